/**
 * The shard's budgets snapshot in Redis (hash `keys.budgets`: one field per budget item, and a
 * metadata field): kept up to date incrementally by whoever publishes, so a cold process can load
 * the shard's budgets — and pace, and publish under an override — while DynamoDB is unreachable,
 * then read only the changes since the snapshot from DynamoDB.
 */
import type { BudgetItem } from '../budget/repository.js';
import type { RedisClient } from '../redis/connect.js';
import { type BudgetsRefresh, budgetItemKey } from './budgets-cache.js';

/** The snapshot hash's metadata field (readers ignore a snapshot without it: half-written). */
const SNAPSHOT_META = '~meta';

interface SnapshotMeta {
  readonly takenAtMs: number;
}

/**
 * A new publisher mirrors into the snapshot the budget changes it holds from this long before the
 * snapshot's last update on: older ones reached its predecessor's cache before that update (the
 * budgets index lags by less: the cache's own incremental queries overlap by as much).
 */
const SNAPSHOT_OVERLAP_MS = 60_000;

/**
 * Loads the snapshot stored at `key` into `budgets` (nothing to mirror back: the changes it made
 * are drained); false when there is none or it is unreadable (DynamoDB decides then).
 */
export async function loadBudgetsSnapshot(
  redis: RedisClient,
  key: string,
  budgets: BudgetsRefresh,
): Promise<boolean> {
  try {
    const raw = await scanHash(redis, key);
    const meta = raw.get(SNAPSHOT_META);
    if (meta === undefined) return false;
    raw.delete(SNAPSHOT_META);
    const items = [...raw.values()].map((v) => JSON.parse(v) as BudgetItem);
    budgets.importItems(items, (JSON.parse(meta) as SnapshotMeta).takenAtMs);
    budgets.drainChanges();
    return true;
  } catch {
    return false;
  }
}

/**
 * Brings the budgets up to date. A cold process first loads the shard's snapshot from Redis
 * (`key`, written by the publisher), so it can pace — and publish under an override — while
 * DynamoDB is unreachable, and then reads only the changes since the snapshot from DynamoDB.
 * Never throws: a failed refresh is reported (the cache serves what it holds).
 */
export async function refreshBudgets(
  redis: RedisClient,
  key: string,
  budgets: BudgetsRefresh,
): Promise<{ ok: boolean; changed: number; error?: string; fromSnapshot?: boolean }> {
  const fromSnapshot = !budgets.loaded && (await loadBudgetsSnapshot(redis, key, budgets));
  const snapshotFlag = fromSnapshot ? { fromSnapshot } : {};
  try {
    const r = await budgets.refresh();
    return { ok: true, changed: r.campaignsChanged, ...snapshotFlag };
  } catch (error) {
    return { ok: false, changed: 0, error: (error as Error).message, ...snapshotFlag };
  }
}

/** When the snapshot at `key` was last updated; undefined when there is none (or it is unreadable). */
export async function snapshotTakenAt(redis: RedisClient, key: string): Promise<number | undefined> {
  const meta = await redis.hget(key, SNAPSHOT_META);
  if (meta === null) return undefined;
  try {
    const at = (JSON.parse(meta) as Partial<SnapshotMeta>).takenAtMs;
    return typeof at === 'number' && Number.isFinite(at) ? at : undefined;
  } catch {
    return undefined;
  }
}

/** A publish's writes to the snapshot. */
export interface SnapshotWrites {
  /** `field, item JSON` pairs (and the metadata field when anything changes). */
  readonly set: string[];
  readonly del: readonly string[];
  /** The snapshot is written whole (there was none). */
  readonly replace: boolean;
}

/**
 * The snapshot writes of a publish: every item when there is no snapshot (`since` undefined),
 * else the changes drained from `budgets` since the last publish — for a new publisher only those
 * from `since` (the snapshot's last update) less the overlap on: a process that followed for a
 * while holds every change since it started (followers do not drain them), and mirroring them all
 * wrote the whole snapshot again at every warm takeover. A continuing publisher passes −∞.
 */
export function snapshotWrites(
  budgets: BudgetsRefresh,
  since: number | undefined,
  nowMs: number,
): SnapshotWrites {
  const replace = since === undefined;
  const mirrorFrom = (since ?? Number.NEGATIVE_INFINITY) - SNAPSHOT_OVERLAP_MS;
  const changes = budgets.drainChanges();
  const set: string[] = [];
  for (const item of replace ? budgets.exportItems() : changes.upserts) {
    if (item.updatedAt < mirrorFrom) continue;
    set.push(budgetItemKey(item), JSON.stringify(item));
  }
  if (replace || set.length > 0 || changes.removals.length > 0) {
    set.push(SNAPSHOT_META, JSON.stringify({ takenAtMs: nowMs } satisfies SnapshotMeta));
  }
  return { set, del: replace ? [] : changes.removals, replace };
}

/** All fields of a hash, read with HSCAN in pages (a shard's state hash can be large). */
export async function scanHash(redis: RedisClient, key: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  let cursor = '0';
  do {
    const [next, flat] = await redis.hscan(key, cursor, 'COUNT', 10_000);
    for (let i = 0; i + 1 < flat.length; i += 2) out.set(flat[i] as string, flat[i + 1] as string);
    cursor = next;
  } while (cursor !== '0');
  return out;
}
