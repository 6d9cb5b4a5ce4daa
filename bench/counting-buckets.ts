/**
 * The alternative store of the counting benchmark, to decide the store by measurement
 * (docs/counting.md): the Aperture seed's layout — one set per user and day / hour / minute
 * bucket, member = event bytes — under the same workload as the store (bench/counting.ts).
 */
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { decodeRecord } from '../shared/counting/event-decode.js';
import { type CapCandidate, evaluateCaps } from '../shared/counting/query.js';
import { DAY_MS, HOUR_MS, MINUTE_MS } from '../shared/time/clock.js';
import {
  type CountingWorkload,
  fixtureWorkload,
  ingestWorkload,
  percentile,
  round,
  usedMemory,
} from './counting-workload.js';

/** The layout's ingest script. Read from beside this file: the benchmarks run from the repository only (tsx). */
const BUCKET_INGEST_LUA = readFileSync(new URL('./bucket-ingest.lua', import.meta.url), 'utf8');

function bucketKeys(userId: string, ts: number): string[] {
  return [
    `bk:{${userId}}:d:${Math.floor(ts / DAY_MS)}`,
    `bk:{${userId}}:h:${Math.floor(ts / HOUR_MS)}`,
    `bk:{${userId}}:m:${Math.floor(ts / MINUTE_MS)}`,
  ];
}

/** Fewest whole buckets covering [from, to) (minute aligned): days in the middle, hours and minutes at the ends. */
function coveringBuckets(userId: string, from: number, to: number): string[] {
  const keys: string[] = [];
  let t = Math.ceil(from / MINUTE_MS) * MINUTE_MS;
  while (t < to) {
    if (t % DAY_MS === 0 && t + DAY_MS <= to) {
      keys.push(`bk:{${userId}}:d:${t / DAY_MS}`);
      t += DAY_MS;
    } else if (t % HOUR_MS === 0 && t + HOUR_MS <= to) {
      keys.push(`bk:{${userId}}:h:${t / HOUR_MS}`);
      t += HOUR_MS;
    } else {
      keys.push(`bk:{${userId}}:m:${t / MINUTE_MS}`);
      t += MINUTE_MS;
    }
  }
  return keys;
}

/**
 * The bucket layout on a flushed server: the ingest workload (4 batches in flight), the cap-check
 * fixture, then up to 1,000 checks one at a time; its figures.
 */
export async function bucketAlternative(
  client: Redis,
  w: CountingWorkload,
  candidates: readonly CapCandidate[],
  checks: number,
): Promise<Record<string, unknown>> {
  const { now, totalEvents, capUserIds } = w;
  await client.flushall();
  client.defineCommand('bucketIngest', { numberOfKeys: 3, lua: BUCKET_INGEST_LUA });
  const callBucket = (p: ReturnType<Redis['pipeline']>, keys: string[], ttl: number, member: Buffer) =>
    (p as unknown as { bucketIngest(...a: unknown[]): void }).bucketIngest(...keys, ttl, member);
  const { batches } = ingestWorkload(w);
  const bMemBefore = await usedMemory(client);
  const bStart = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < batches.length) {
        const batch = batches[next++] as Buffer[];
        const p = client.pipeline();
        for (const data of batch) {
          const d = decodeRecord(data);
          callBucket(p, bucketKeys(d.userId, d.timestamp), 31 * DAY_MS, d.member);
        }
        await p.exec();
      }
    }),
  );
  const bSeconds = (performance.now() - bStart) / 1000;
  const bMemAfter = await usedMemory(client);
  const fixtureRecords = fixtureWorkload(w);
  for (let i = 0; i < fixtureRecords.length; i += 2000) {
    const p = client.pipeline();
    for (const data of fixtureRecords.slice(i, i + 2000)) {
      const d = decodeRecord(data);
      callBucket(p, bucketKeys(d.userId, d.timestamp), 31 * DAY_MS, d.member);
    }
    await p.exec();
  }
  const bLat: number[] = [];
  const bChecks = Math.min(checks, 1000);
  for (let i = 0; i < bChecks; i++) {
    const userId = capUserIds[i % capUserIds.length] as string;
    const t0 = performance.now();
    // Each window is a union of buckets; the 30-day window covers the others, so one read of
    // its buckets (≈ 30 days + 23 hours + 59 minutes of keys) serves all three windows.
    const keys = coveringBuckets(userId, now - 30 * DAY_MS, now + MINUTE_MS);
    const p = client.pipeline();
    for (const k of keys) p.smembersBuffer(k);
    const out = (await p.exec()) ?? [];
    const all = out.flatMap(([, v]) => v as Buffer[]);
    evaluateCaps(all, candidates, now, now - 30 * DAY_MS);
    bLat.push(performance.now() - t0);
  }
  bLat.sort((a, b) => a - b);
  return {
    ingestEventsPerSec: Math.round(totalEvents / bSeconds),
    bytesPerEvent: Math.round((bMemAfter - bMemBefore) / totalEvents),
    capCheckP50Ms: round(percentile(bLat, 50)),
    capCheckP99Ms: round(percentile(bLat, 99)),
    capChecksPerSecSequential: Math.round(1000 / (bLat.reduce((a, b) => a + b, 0) / bLat.length)),
    keysReadPerCheck: coveringBuckets('x', now - 30 * DAY_MS, now + MINUTE_MS).length,
  };
}
