/**
 * The reader phases of the pacer benchmark (bench/pacer.ts says what each figure means): cached
 * `forBid` lookups per second, and the remote reads a realistic request mix leaves.
 */
import { PacingReader } from '../shared/pacing/reader.js';
import { prng } from '../shared/random/prng.js';
import type { RedisClient } from '../shared/redis/connect.js';
import { ManualClock, systemClock } from '../shared/time/clock.js';
import { progress } from './pacer-ticks.js';
import { ARM_EVERY, SHARDS } from './pacer-workload.js';

/** Zipf(s) sampler over 0..n-1 (inverse CDF on a precomputed table). */
function zipf(n: number, s: number, random: () => number): () => number {
  const cdf = new Float64Array(n);
  let sum = 0;
  for (let i = 0; i < n; i++) {
    sum += 1 / (i + 1) ** s;
    cdf[i] = sum;
  }
  return () => {
    const u = random() * sum;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((cdf[mid] as number) < u) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
}

/** Cached `forBid` lookups per second over `lookupCampaigns` campaigns: Zipf and uniform streams. */
export async function cachedLookups(
  readerRedis: RedisClient,
  lookupCampaigns: number,
  accountOf: (c: number) => string,
): Promise<{ readerLookupsPerSec: number; readerLookupsPerSecUniform: number }> {
  const reader = new PacingReader({
    redis: readerRedis,
    clock: systemClock,
    shards: SHARDS,
    maxAgeMs: 3_600_000,
  });
  await reader.prefetch(
    Array.from({ length: lookupCampaigns }, (_, c) => ({
      accountId: accountOf(c),
      campaignId: `camp-${c}`,
    })),
  );
  // Pre-built requests, cycled: the loop measures the reader, not string building. Two request
  // streams over the same 20,000 cached campaigns: the realistic one (candidates drawn Zipf(1),
  // as in the mix below) and a uniform one (worst case for CPU caches: every lookup a miss).
  const zipfPick = zipf(lookupCampaigns, 1.0, prng(7));
  const stream = (pick: (i: number) => number) =>
    Array.from({ length: 65_536 }, (_, i) => {
      const c = pick(i);
      return {
        accountId: accountOf(c),
        campaignId: `camp-${c}`,
        armId: c % ARM_EVERY === 0 ? (i & 1 ? 'A' : 'B') : undefined,
      };
    });
  const measure = (requests: ReturnType<typeof stream>) => {
    const lookups = 5_000_000;
    let sink = 0;
    const t0 = performance.now();
    for (let i = 0; i < lookups; i++) {
      const q = requests[i & 65_535] as (typeof requests)[number];
      sink += reader.forBid(q.accountId, q.campaignId, q.armId).throttle;
    }
    return { perSec: Math.round(lookups / ((performance.now() - t0) / 1000)), sink };
  };
  const zipfRun = measure(stream(() => zipfPick()));
  const uniformRun = measure(stream((i) => (i * 7919) % lookupCampaigns));
  const readerLookupsPerSec = zipfRun.perSec;
  const readerLookupsPerSecUniform = uniformRun.perSec;
  const sink = zipfRun.sink + uniformRun.sink;
  reader.close();
  progress(
    `reader: ${readerLookupsPerSec} cached lookups/s (Zipf mix), ${readerLookupsPerSecUniform} (uniform over 20,000: cache-miss bound) (checksum ${sink.toFixed(0)})`,
  );
  return { readerLookupsPerSec, readerLookupsPerSecUniform };
}

/** Remote reads at a realistic request mix: the mix, the reduction and the reader's hit rate. */
export async function remoteReads(
  readerRedis: RedisClient,
  lookupCampaigns: number,
  accountOf: (c: number) => string,
) {
  const mix = {
    adRequestsPerSec: 2_000,
    candidatesPerRequest: 50,
    catalogCampaigns: lookupCampaigns,
    popularity: 'Zipf(s = 1.0) over the catalog',
    simulatedSeconds: 120,
    tickMs: 10_000,
  };
  const clock = new ManualClock(Date.now());
  const mixReader = new PacingReader({
    redis: readerRedis,
    clock,
    shards: SHARDS,
    maxAgeMs: 3_600_000,
    settleMs: 2_000,
  });
  const random = prng(42);
  const pick = zipf(mix.catalogCampaigns, 1.0, random);
  const stepMs = 1000 / mix.adRequestsPerSec;
  let nextRefresh = (Math.floor(clock.now() / mix.tickMs) + 1) * mix.tickMs + 2_000;
  const adRequests = mix.adRequestsPerSec * mix.simulatedSeconds;
  let mixLookups = 0;
  for (let r = 0; r < adRequests; r++) {
    for (let k = 0; k < mix.candidatesPerRequest; k++) {
      const c = pick();
      mixReader.forBid(accountOf(c), `camp-${c}`, c % ARM_EVERY === 0 ? 'A' : undefined);
      mixLookups++;
    }
    clock.advance(stepMs);
    if (clock.now() >= nextRefresh) {
      await mixReader.refreshDue();
      nextRefresh += mix.tickMs;
    }
    if (r % 200 === 0) await new Promise((res) => setImmediate(res)); // let background reads land
  }
  await new Promise((res) => setTimeout(res, 50));
  const m = mixReader.metrics;
  // Campaign hashes and (contract v2) the shards' claim hashes: every remote read counts.
  const remoteReadReduction = +(1 - (m.remoteReads + m.shardReads) / mixLookups).toFixed(4);
  progress(
    `mix: ${mixLookups} lookups, ${m.remoteReads} remote reads + ${m.shardReads} shard reads, hit rate ${(m.hits / m.lookups).toFixed(4)}`,
  );
  return { mix, remoteReadReduction, readerHitRate: +(m.hits / m.lookups).toFixed(4) };
}
