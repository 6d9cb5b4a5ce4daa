/**
 * Random action-event logs (duplicates, re-stamped copies around the dedup window, shuffled
 * arrival) and a brute-force reference of the counting rule for the counting tests.
 */

import { decodeMember, decodeRecord } from '../../../shared/counting/event-decode.js';
import { type ActionEvent, encodeActionEvent, type Id } from '../../../shared/counting/event-encode.js';
import { ACTIONS } from '../../../shared/counting/schema.js';
import type { RedisClient } from '../../../shared/redis/connect.js';
import { DAY_MS, HOUR_MS, MINUTE_MS } from '../../../shared/time/clock.js';

export { prng } from '../../../shared/random/prng.js';

/**
 * Real evictions: redis-server with `maxmemory` just above what it holds and `allkeys-random`,
 * then `fillers` writes of `fillerBytes` each, then back to `noeviction`. Returns the server's
 * `evicted_keys` total.
 */
export async function evictAtRandom(
  client: RedisClient,
  fillers: number,
  fillerBytes: number,
): Promise<number> {
  const used = Number(/used_memory:(\d+)/.exec(await client.info('memory'))?.[1]);
  await client.config('SET', 'maxmemory-policy', 'allkeys-random');
  await client.config('SET', 'maxmemory', String(used + 64 * 1024));
  for (let i = 0; i < fillers; i++) await client.set(`filler:${i}`, Buffer.alloc(fillerBytes, 1));
  await client.config('SET', 'maxmemory', '0');
  await client.config('SET', 'maxmemory-policy', 'noeviction');
  return Number(/evicted_keys:(\d+)/.exec(await client.info('stats'))?.[1]);
}

export const int = (rand: () => number, lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
export const pick = <T>(rand: () => number, items: readonly T[]): T =>
  items[Math.floor(rand() * items.length)] as T;

/**
 * The wire bytes of one impression of user `userId` on ad 11 (ad group 7, campaign 3, advertiser
 * 1), its insertion id derived from `insertion` (distinct insertions → distinct identities).
 */
export function impressionWire(userId: Id, insertion: number, timestamp: number): Buffer {
  const insertionId = Buffer.alloc(16);
  insertionId.writeUInt32BE(insertion, 12);
  insertionId[0] = 1;
  return encodeActionEvent({
    userId,
    timestamp,
    insertionId,
    action: 'impression',
    ad: 11,
    adGroup: 7,
    campaign: 3,
    advertiser: 1,
  });
}

/** Entity hierarchy: ad → ad group → campaign → advertiser (consistent, like real ads). */
export function entitiesOf(ad: number) {
  const adGroup = 100 + (ad % 6);
  const campaign = 1000 + (adGroup % 3);
  const advertiser = 10_000 + (campaign % 2);
  return {
    ad: String(ad),
    adGroup: String(adGroup),
    campaign: String(campaign),
    advertiser: String(advertiser),
  };
}

/** A timestamp in [start, end), often exactly on (or 1 ms around) a minute/hour/day boundary. */
export function boundaryTimestamp(rand: () => number, start: number, end: number): number {
  const r = rand();
  if (r < 0.55) return int(rand, start, end - 1);
  const unit = r < 0.7 ? MINUTE_MS : r < 0.85 ? HOUR_MS : DAY_MS;
  const first = Math.ceil(start / unit);
  const last = Math.floor((end - 1) / unit);
  const t = int(rand, first, last) * unit + pick(rand, [0, 0, -1, 1]);
  return Math.min(end - 1, Math.max(start, t));
}

export interface EventLog {
  /** Raw records in delivery order: includes duplicates and re-stamped copies. */
  readonly records: Buffer[];
  readonly userIds: readonly string[];
  readonly ads: readonly number[];
  /** Re-stamped copies by their offset from the original, in windows: `inside`, `edge`, `outside`. */
  readonly restamps: { inside: number; edge: number; outside: number };
  /** With `identities`: each user's household id (three users share one) and device id. */
  readonly householdOf: ReadonlyMap<string, string>;
  readonly deviceOf: ReadonlyMap<string, string>;
  /** With `identities`: each user's stream session id. */
  readonly sessionOf: ReadonlyMap<string, string>;
}

/** Options of {@link generateLog}. */
export interface GenerateOptions {
  /** Share of events that get re-stamped copies (a client retry, a second log source). @default 0.12 */
  readonly restampShare?: number;
  /** The dedup window the copies are placed around. @default DAY_MS */
  readonly windowMs?: number;
  /** Most re-stamped copies of one event. @default 2 */
  readonly maxCopies?: number;
  /**
   * Distinct insertion ids drawn from (collisions make more occurrences of one identity); 0 gives
   * every event its own. @default 3000
   */
  readonly insertionIds?: number;
  /**
   * Give events identities besides the user (layout v2): half carry the user's household id
   * (users 0–2, 3–5 and 6–7 share one), a third the user's device id, a quarter the user's stream
   * session id. @default false
   */
  readonly identities?: boolean;
  /** Added to every user, household and device id: two logs with other bases share no identity. @default 0 */
  readonly idBase?: number;
}

/**
 * Generates `count` distinct events plus duplicates: the same bytes sent again (redelivery), and
 * re-stamped copies — the same event with another timestamp, inside the dedup window (a few ms to
 * window − 1 ms either side), exactly on its edge (± window, ± (window − 1)) and outside it (beyond
 * a window); then shuffled, so copies often arrive before their original.
 */
export function generateLog(
  rand: () => number,
  count: number,
  start: number,
  end: number,
  options: GenerateOptions = {},
): EventLog {
  const window = options.windowMs ?? DAY_MS;
  const restampShare = options.restampShare ?? 0.12;
  const idBase = options.idBase ?? 0;
  const userIds = Array.from({ length: 8 }, (_, i) => String(7_000_000_000 + idBase + i * 7919));
  const ads = Array.from({ length: 12 }, (_, i) => 500 + i);
  const pool = options.insertionIds ?? 3000;
  const randomId = () => Buffer.from(Array.from({ length: 16 }, () => int(rand, 0, 255))).toString('hex');
  const insertionIds = Array.from({ length: pool }, randomId);
  const records: Buffer[] = [];
  const restamps = { inside: 0, edge: 0, outside: 0 };
  const sign = () => (rand() < 0.5 ? -1 : 1);
  const householdOf = new Map(userIds.map((u, i) => [u, String(900_000 + idBase + Math.floor(i / 3))]));
  const deviceOf = new Map(userIds.map((u, i) => [u, String(800_000 + idBase + i)]));
  const sessionOf = new Map(userIds.map((u, i) => [u, String(600_000 + idBase + i)]));
  for (let i = 0; i < count; i++) {
    const ad = pick(rand, ads);
    const userId = pick(rand, userIds);
    const identities = options.identities
      ? {
          ...(rand() < 0.5 ? { householdId: householdOf.get(userId) } : {}),
          ...(rand() < 0.33 ? { deviceId: deviceOf.get(userId) } : {}),
          ...(rand() < 0.25 ? { sessionId: sessionOf.get(userId) } : {}),
        }
      : {};
    const event: ActionEvent = {
      userId,
      ...identities,
      timestamp: boundaryTimestamp(rand, start, end),
      insertionId: pool > 0 ? pick(rand, insertionIds) : randomId(),
      action: int(rand, 1, 3),
      viewType: int(rand, 0, 3),
      ...entitiesOf(ad),
    };
    const bytes = encodeActionEvent(event);
    records.push(bytes);
    // Duplicates: the logging system delivering the same event again, later.
    if (rand() < 0.15) records.push(Buffer.from(bytes));
    if (window > 0 && rand() < restampShare) {
      for (let k = int(rand, 1, options.maxCopies ?? 2); k > 0; k--) {
        const r = rand();
        const kind = r < 0.5 ? 'inside' : r < 0.75 ? 'edge' : 'outside';
        const offset =
          kind === 'inside'
            ? sign() * pick(rand, [1, 1000, int(rand, 1, window - 1)])
            : kind === 'edge'
              ? sign() * pick(rand, [window, window - 1, window + 1])
              : sign() * int(rand, window + 2, 3 * window);
        const timestamp = event.timestamp + offset;
        if (timestamp < start || timestamp >= end) continue;
        restamps[kind]++;
        records.push(encodeActionEvent({ ...event, timestamp }));
      }
    }
  }
  // Out-of-order arrival: a full shuffle.
  for (let i = records.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [records[i], records[j]] = [records[j] as Buffer, records[i] as Buffer];
  }
  return { records, userIds, ads, restamps, householdOf, deviceOf, sessionOf };
}

/**
 * The brute-force reference of the counting rule (docs/counting.md): records are delivered in
 * arrival order at a clock instant; a record older than the retention is skipped; otherwise it is
 * counted unless its identity — every rendered field but the timestamp, plus the user — already
 * has a counted occurrence at the same instant or less than the dedup window away. Counted events
 * are kept decoded and counted by plain comparison of rendered values: nothing is shared with the
 * store's script or byte-offset matching except the field list.
 */
export class ReferenceCounter {
  private readonly byUser = new Map<
    string,
    { counted: Record<string, string>[]; occurrences: Map<string, number[]> }
  >();

  constructor(
    readonly retentionMs = 30 * DAY_MS,
    readonly windowMs = DAY_MS,
  ) {}

  /** Delivers records (in arrival order) at `now`. */
  deliver(records: readonly Buffer[], now: number): this {
    for (const r of records) {
      const d = decodeRecord(r);
      const { timestamp, ...rest } = decodeMember(d.member);
      const ts = Number(timestamp);
      if (ts < now - this.retentionMs) continue;
      // The event counts for each identity it carries, each judged on its own (its key group).
      for (const key of d.keys) {
        let user = this.byUser.get(key);
        if (!user) {
          user = { counted: [], occurrences: new Map() };
          this.byUser.set(key, user);
        }
        const identity = JSON.stringify(rest);
        const seen = user.occurrences.get(identity) ?? [];
        if (seen.some((c) => c === ts || Math.abs(c - ts) < this.windowMs)) continue;
        seen.push(ts);
        user.occurrences.set(identity, seen);
        user.counted.push({ ...rest, timestamp: String(ts) });
      }
    }
    return this;
  }

  /** Counted events of a user. */
  events(userId: string): Record<string, string>[] {
    return this.byUser.get(userId)?.counted ?? [];
  }

  count(
    userId: string,
    horizon: number,
    range: { from: number; to: number },
    filter: Record<string, string[]>,
    groupBy: string[],
  ): { total: number; groups: Map<string, number> } {
    let total = 0;
    const groups = new Map<string, number>();
    for (const e of this.events(userId)) {
      const ts = Number(e.timestamp);
      if (ts < horizon || ts < range.from || ts >= range.to) continue;
      if (!Object.entries(filter).every(([dim, values]) => values.includes(e[dim] as string))) continue;
      total++;
      if (groupBy.length > 0) {
        const key = JSON.stringify(Object.fromEntries(groupBy.map((g) => [g, e[g]])));
        groups.set(key, (groups.get(key) ?? 0) + 1);
      }
    }
    return { total, groups };
  }
}

/** Renders action codes the way the store's group keys do. */
export function actionName(code: number): string {
  return Object.entries(ACTIONS).find(([, c]) => c === code)?.[0] ?? String(code);
}
