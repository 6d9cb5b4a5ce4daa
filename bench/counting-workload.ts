/**
 * The workload of the counting benchmark (bench/counting.ts): the ingest records, the cap-check
 * users' events and candidates, and the figures read from redis-server. Each workload is built the
 * same on every call, so the bucket layout (bench/counting-buckets.ts) replays what the store got.
 */
import type { Redis } from 'ioredis';
import { encodeActionEvent } from '../shared/counting/event-encode.js';
import type { CapCandidate, FrequencyCap } from '../shared/counting/query.js';
import { prng } from '../shared/random/prng.js';
import { DAY_MS, HOUR_MS } from '../shared/time/clock.js';

/** What every phase of one run shares. */
export interface CountingWorkload {
  /** A fixed "now" on a minute boundary (keeps the bucket comparison honest: same windows). */
  readonly now: number;
  /** Events of the ingest phase. */
  readonly totalEvents: number;
  /** The cap-check users (exactly 1,000 events each over 30 days). */
  readonly capUserIds: readonly string[];
  /** The 50 candidate ads; 60% of a cap-check user's events fall on them. */
  readonly candidateAds: readonly number[];
}

/** The cap-check windows: 1 h, 7 d, 30 d. */
export const CAP_WINDOWS = [HOUR_MS, 7 * DAY_MS, 30 * DAY_MS];

/** Limits per level (ad, ad group, campaign, advertiser) × window (1 h, 7 d, 30 d). */
const CAP_LIMITS = [
  [2, 8, 20],
  [4, 20, 60],
  [10, 60, 200],
  [30, 150, 400],
];

/** The entity ids of ad `ad` (its ad group, campaign and advertiser follow from it). */
export const entities = (ad: number) => ({
  ad: 1_000_000 + ad,
  adGroup: 200_000 + Math.floor(ad / 4),
  campaign: 30_000 + Math.floor(ad / 16),
  advertiser: 4_000 + Math.floor(ad / 64),
});

function makeEvent(rand: () => number, userId: number, now: number, ad: number): Buffer {
  const insertion = Buffer.alloc(16);
  insertion.writeUInt32BE(Math.floor(rand() * 2 ** 32), 0);
  insertion.writeUInt32BE(Math.floor(rand() * 2 ** 32), 4);
  insertion.writeUInt32BE(userId, 8);
  insertion[15] = 1;
  return encodeActionEvent({
    userId,
    timestamp: now - Math.floor(rand() * 30 * DAY_MS),
    insertionId: insertion,
    action: rand() < 0.9 ? 1 : 2,
    viewType: 1 + Math.floor(rand() * 3),
    ...entities(ad),
  });
}

/** The ingest workload: `totalEvents` records over totalEvents / 10 users, in batches of 500. */
export function ingestWorkload(w: CountingWorkload): { records: Buffer[]; batches: Buffer[][] } {
  const wrand = prng(40);
  const ingestUsers = Math.max(1, Math.floor(w.totalEvents / 10));
  const records = Array.from({ length: w.totalEvents }, () =>
    makeEvent(wrand, 1 + Math.floor(wrand() * ingestUsers), w.now, Math.floor(wrand() * 400)),
  );
  const batches: Buffer[][] = [];
  for (let i = 0; i < records.length; i += 500) batches.push(records.slice(i, i + 500));
  return { records, batches };
}

/** The cap-check users' events: 1,000 each on 400 ads, 60% of them on the candidates. */
export function fixtureWorkload(w: CountingWorkload): Buffer[] {
  const rand = prng(42);
  const records: Buffer[] = [];
  for (const u of w.capUserIds) {
    for (let k = 0; k < 1000; k++) {
      const ad =
        rand() < 0.6 ? (w.candidateAds[Math.floor(rand() * 50)] as number) : Math.floor(rand() * 400);
      records.push(makeEvent(rand, Number(u), w.now, ad));
    }
  }
  return records;
}

/** The candidates of every check: 50 ads × 4 levels × 3 windows. */
export function capCandidates(w: CountingWorkload): CapCandidate[] {
  return w.candidateAds.map((ad) => ({
    id: String(ad),
    entities: entities(ad),
    // Limits per level × window (1 h, 7 d, 30 d): a realistic mix of allowed and capped.
    caps: (['ad', 'adGroup', 'campaign', 'advertiser'] as const).flatMap((level, li) =>
      CAP_WINDOWS.map((windowMs, wi): FrequencyCap => ({ level, windowMs, max: CAP_LIMITS[li]?.[wi] ?? 1 })),
    ),
  }));
}

export function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

export const round = (x: number, digits = 3) => Math.round(x * 10 ** digits) / 10 ** digits;

/** CPU seconds redis-server has used (user + system, main and background threads). */
export async function redisCpuSeconds(client: Redis): Promise<number> {
  const info = await client.info('cpu');
  const field = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? Number.NaN);
  return field('used_cpu_user') + field('used_cpu_sys');
}

export async function usedMemory(client: Redis): Promise<number> {
  const info = await client.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? Number.NaN);
}
