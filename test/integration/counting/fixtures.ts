/**
 * Random action-event logs and a brute-force reference counter for the counting tests. The
 * reference decodes every raw record and counts by plain comparison of rendered field values:
 * it shares nothing with the store's byte-offset matching except the field list.
 */
import {
  ACTIONS,
  type ActionEvent,
  decodeMember,
  decodeRecord,
  encodeActionEvent,
} from '../../../shared/counting/schema.js';
import { DAY_MS, HOUR_MS, MINUTE_MS } from '../../../shared/time/clock.js';

export { prng } from '../../../shared/random/prng.js';

export const int = (rand: () => number, lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
export const pick = <T>(rand: () => number, items: readonly T[]): T =>
  items[Math.floor(rand() * items.length)] as T;

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
  /** Raw records in delivery order: includes duplicates. */
  readonly records: Buffer[];
  readonly userIds: readonly string[];
  readonly ads: readonly number[];
}

/** Generates `count` distinct events plus duplicates (same bytes sent again), shuffled. */
export function generateLog(rand: () => number, count: number, start: number, end: number): EventLog {
  const userIds = Array.from({ length: 8 }, (_, i) => String(7_000_000_000 + i * 7919));
  const ads = Array.from({ length: 12 }, (_, i) => 500 + i);
  const insertionIds = Array.from({ length: 3000 }, () =>
    Buffer.from(Array.from({ length: 16 }, () => int(rand, 0, 255))).toString('hex'),
  );
  const records: Buffer[] = [];
  for (let i = 0; i < count; i++) {
    const ad = pick(rand, ads);
    const event: ActionEvent = {
      userId: pick(rand, userIds),
      timestamp: boundaryTimestamp(rand, start, end),
      insertionId: pick(rand, insertionIds),
      action: int(rand, 1, 3),
      viewType: int(rand, 0, 3),
      ...entitiesOf(ad),
    };
    const bytes = encodeActionEvent(event);
    records.push(bytes);
    // Duplicates: the logging system delivering the same event again, later.
    if (rand() < 0.15) records.push(Buffer.from(bytes));
  }
  // Out-of-order arrival: a full shuffle.
  for (let i = records.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [records[i], records[j]] = [records[j] as Buffer, records[i] as Buffer];
  }
  return { records, userIds, ads };
}

/** The brute-force reference: distinct events per user, decoded to rendered field values. */
export class ReferenceCounter {
  private readonly byUser = new Map<string, Map<string, Record<string, string>>>();

  constructor(records: readonly Buffer[]) {
    for (const r of records) {
      const d = decodeRecord(r);
      let events = this.byUser.get(d.userId);
      if (!events) {
        events = new Map();
        this.byUser.set(d.userId, events);
      }
      events.set(d.member.toString('hex'), decodeMember(d.member));
    }
  }

  /** Distinct events of a user matching a predicate. */
  events(userId: string): Record<string, string>[] {
    return [...(this.byUser.get(userId)?.values() ?? [])];
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
