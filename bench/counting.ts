/**
 * `npm run bench -- counting [--events N] [--users N] [--checks N] [--skip-buckets] [--skip-freshness]`
 *
 * Against its own redis-server (standalone, loopback), in one process:
 * - ingest: encoded wire records → decode + validate → store with dedup by event identity within
 *   the one-day window, in Lambda-sized batches of 500, 4 batches in flight (events/s); then the
 *   same records again (a redelivery pass: exact duplicates), then re-stamped copies of them (1 ms
 *   to 1 h earlier: duplicates by identity);
 * - cap check: 50 candidates × 4 levels × 3 windows (1 h, 7 d, 30 d) for users with 1,000 events
 *   over 30 days: latency one check at a time (P50/P99), throughput with 4 checks in flight, and
 *   latency and CPU in an open loop at the target rate (5,000 checks/s, bench/open-loop.ts),
 *   beside the CPU of a bare round trip on the same schedule (`roundTripCpuShare`);
 * - the alternative, to decide the store by measurement (docs/counting.md): the Aperture seed's
 *   layout (day / hour / minute bucket sets per user) under the same workload;
 * - the combined check (bench/counting-combined.ts): the same candidates with a recency, a
 *   90-day lifetime and a household cap added, over two logs in one round trip;
 * - the day summary (bench/counting-days.ts): households with many events a day checked over
 *   90-day windows through the summary and over the whole log;
 * - freshness (bench/counting-freshness.ts): enqueue → countable through the local stream path;
 * - the raw pipelined Redis ceiling (bench/ceiling.ts), with ratios.
 */
import { Redis } from 'ioredis';
import { startRedis } from '../local/emulators/redis.js';
import { ActionStore } from '../shared/counting/store.js';
import { ManualClock, MINUTE_MS } from '../shared/time/clock.js';
import { measureCeiling } from './ceiling.js';
import { bucketAlternative } from './counting-buckets.js';
import { combinedChecks } from './counting-combined.js';
import { daySummaryChecks } from './counting-days.js';
import { freshnessPhase } from './counting-freshness.js';
import {
  bytesPerEventOfKeys,
  type CapChecks,
  closedLoop,
  ingestPhase,
  loadFixture,
  openLoopAtTargetRate,
  scanOnlyMs,
  sequentialChecks,
} from './counting-phases.js';
import { type CountingWorkload, capCandidates, percentile, round } from './counting-workload.js';

function arg(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(`--${name}`);
  const v = i >= 0 ? Number(args[i + 1]) : fallback;
  if (!Number.isFinite(v) || v <= 0) throw new Error(`--${name} needs a positive number`);
  return v;
}

/** The store's figures (everything but freshness). */
async function storeFigures(args: string[]): Promise<Record<string, unknown>> {
  const totalEvents = arg(args, 'events', 300_000);
  const capUsers = arg(args, 'users', 200);
  const checks = arg(args, 'checks', 4000);
  const skipBuckets = args.includes('--skip-buckets');
  // Without the full collections: the cap checks then run with the ingest phase's garbage in the
  // old generation, as in a serving process with a large heap (docs/counting.md, "Deployment").
  const collect = !args.includes('--no-collect');
  const redisServer = await startRedis({ mode: 'standalone' });
  const port = Number(redisServer.nodes[0]?.split(':')[1]);
  const client = new Redis({ port, host: '127.0.0.1', enableAutoPipelining: false });
  try {
    const ceiling = await measureCeiling(client, port);
    await client.flushall();
    // A fixed "now" on a minute boundary keeps the bucket comparison honest (same windows).
    const now = Math.floor(Date.now() / MINUTE_MS) * MINUTE_MS;
    const clock = new ManualClock(now);
    const store = new ActionStore({ redis: client, clock });
    const workload: CountingWorkload = {
      now,
      totalEvents,
      // 50 candidate ads; the cap-check users' events fall on 400 ads, 60% of them on the candidates.
      candidateAds: Array.from({ length: 50 }, (_, i) => i * 3),
      capUserIds: Array.from({ length: capUsers }, (_, i) => String(9_000_000 + i)),
    };
    const { first, second, third, memBefore, memAfter } = await ingestPhase(client, store, workload);
    const ingestEventsPerSec = Math.round(totalEvents / first.seconds);

    // Cap-check fixture: users with exactly 1,000 events over 30 days.
    await loadFixture(store, workload);
    const c: CapChecks = {
      store,
      capUserIds: workload.capUserIds,
      candidates: capCandidates(workload),
      checks,
      collect,
    };
    const members = await client.zcard(store.key(workload.capUserIds[0] as string));
    if (members !== 1000) throw new Error(`fixture user has ${members} events, expected 1000`);
    const { latencies, rejected } = await sequentialChecks(c);
    const concurrency = 4;
    const { latencies: loaded, wall: capWall, cpu: capCpu } = await closedLoop(c, store, concurrency);
    const done = loaded.length;
    const capChecksPerSec = Math.round(done / capWall);
    loaded.sort((a, b) => a - b);
    const capCheckAtTargetRate = await openLoopAtTargetRate(client, c);
    // The closed loop with the log read through ioredis (rawReads: false), for comparison; after
    // the open loop, so its code paths do not deoptimise the raw path's just before it.
    const io = await closedLoop(c, new ActionStore({ redis: client, clock, rawReads: false }), concurrency);
    const ioDone = io.latencies.length;
    // The closed loop over the logs instead of the cap logs (capLogReads: false), for comparison.
    const overLogs = await closedLoop(
      c,
      new ActionStore({ redis: client, clock, capLogReads: false }),
      concurrency,
    );
    if (store.capLogMisses > 0) throw new Error(`${store.capLogMisses} cap checks found no cap log`);
    const scanMs = await scanOnlyMs(client, c, now);
    const keyBytes = await bytesPerEventOfKeys(client, c);
    const buckets = skipBuckets
      ? { skipped: true }
      : await bucketAlternative(client, workload, c.candidates, checks);
    const combined = await combinedChecks(client, workload, checks, collect);
    const days = await daySummaryChecks(client, now, checks, collect);

    return {
      store:
        'key schema v2, per user: occurrence set (dedup by identity, retention) + packed log string + cap log (cap checks: one GET of the cap log)',
      events: totalEvents,
      ingestEventsPerSec,
      ingestRedeliveryEventsPerSec: Math.round(totalEvents / second.seconds),
      ingestRestampedEventsPerSec: Math.round(totalEvents / third.seconds),
      // Share of the wall time this Node process was on a CPU: ≈ 1 means the client is the bottleneck.
      ingestClientCpuShare: round(first.cpuSeconds / first.seconds, 2),
      // CPU time per event (µs) of this process and of redis-server: unlike events/s, barely
      // moved by other processes sharing the machine, so comparable across runs.
      ingestClientCpuUsPerEvent: round((first.cpuSeconds / totalEvents) * 1e6, 2),
      ingestRedisCpuUsPerEvent: round((first.serverCpuSeconds / totalEvents) * 1e6, 2),
      bytesPerEvent: Math.round((memAfter - memBefore) / totalEvents),
      capCheckShape: '50 candidates x 4 levels x 3 windows (1h, 7d, 30d); user with 1000 events over 30 days',
      capCheckP50Ms: round(percentile(latencies, 50)),
      capCheckP99Ms: round(percentile(latencies, 99)),
      capChecksPerSec,
      capCheckLoadedP50Ms: round(percentile(loaded, 50)),
      capCheckLoadedP99Ms: round(percentile(loaded, 99)),
      capCheckConcurrency: concurrency,
      capCheckAtTargetRate,
      // Share of one core the checks used while they arrived at 5,000/s, the load generator's
      // own share taken off (target ≤ 0.4; both in capCheckAtTargetRate).
      capCheckCpuShareAtTargetRate: capCheckAtTargetRate.cpuShare,
      capCheckClientCpuShare: round((capCpu.user + capCpu.system) / 1e6 / capWall, 2),
      capCheckClientCpuUs: round((capCpu.user + capCpu.system) / done, 1),
      capChecksPerSecLogReads: Math.round(overLogs.latencies.length / overLogs.wall),
      capCheckClientCpuUsLogReads: round(
        (overLogs.cpu.user + overLogs.cpu.system) / overLogs.latencies.length,
        1,
      ),
      capChecksPerSecIoredisReads: Math.round(ioDone / io.wall),
      capCheckClientCpuUsIoredisReads: round((io.cpu.user + io.cpu.system) / ioDone, 1),
      capCheckScanOnlyMs: round(scanMs.capLog),
      capCheckScanOnlyMsLog: round(scanMs.log),
      capCheckRejectedPerCheck: round(rejected / checks, 1),
      ...combined,
      ...days,
      ...ceiling,
      ingestToCeilingRatio: round(ingestEventsPerSec / ceiling.redisCeilingOpsPerSec),
      capChecksToCeilingRatio: round(capChecksPerSec / ceiling.redisCeilingOpsPerSec, 4),
      ...keyBytes,
      alternativeDayHourMinuteBuckets: buckets,
      note: 'one process, loopback redis-server on the same 2-core machine (client and server share CPUs)',
    };
  } finally {
    client.disconnect();
    await redisServer.stop();
  }
}

/**
 * Runs the benchmark; returns the figures (bench/main.ts prints them as the final JSON line): the
 * store's, then freshness through the local runtime (its own servers, started after the store's
 * redis-server has stopped).
 */
export async function run(args: string[]): Promise<Record<string, unknown>> {
  const figures = await storeFigures(args);
  if (args.includes('--skip-freshness')) return { ...figures, freshness: { skipped: true } };
  return { ...figures, ...(await freshnessPhase()) };
}
