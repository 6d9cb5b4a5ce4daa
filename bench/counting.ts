/**
 * `npm run bench -- counting [--events N] [--users N] [--checks N] [--skip-buckets]`
 *
 * Against its own redis-server (standalone, loopback), in one process:
 * - ingest: encoded wire records → decode + validate → store with dedup by event identity within
 *   the one-day window, in Lambda-sized batches of 500, 4 batches in flight (events/s); then the
 *   same records again (a redelivery pass: exact duplicates), then re-stamped copies of them (1 ms
 *   to 1 h earlier: duplicates by identity);
 * - cap check: 50 candidates × 4 levels × 3 windows (1 h, 7 d, 30 d) for users with 1,000 events
 *   over 30 days: latency one check at a time (P50/P99), throughput with 4 checks in flight, and
 *   latency in an open loop at the target rate (5,000 checks/s, bench/open-loop.ts);
 * - the alternative, to decide the store by measurement (docs/counting.md): the Aperture seed's
 *   layout (day / hour / minute bucket sets per user) under the same workload;
 * - the raw pipelined Redis ceiling (bench/ceiling.ts), with ratios.
 */
import { readFileSync } from 'node:fs';
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { startRedis } from '../local/emulators/redis.js';
import { ingestRecords } from '../shared/counting/ingest.js';
import { type CapCandidate, evaluateCaps, type FrequencyCap } from '../shared/counting/query.js';
import { decodeRecord, encodeActionEvent } from '../shared/counting/schema.js';
import { ActionStore } from '../shared/counting/store.js';
import { prng } from '../shared/random/prng.js';
import { DAY_MS, HOUR_MS, ManualClock, MINUTE_MS } from '../shared/time/clock.js';
import { measureCeiling } from './ceiling.js';
import { type OpenLoopResult, openLoopWindows } from './open-loop.js';

function arg(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(`--${name}`);
  const v = i >= 0 ? Number(args[i + 1]) : fallback;
  if (!Number.isFinite(v) || v <= 0) throw new Error(`--${name} needs a positive number`);
  return v;
}

const entities = (ad: number) => ({
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

/**
 * A full collection between phases (as JMH does between iterations), so the cap-check phases do
 * not pay for the ingest phase's garbage. Why it matters here: V8 visits every old-generation
 * page on each young collection, and on this VM that costs ≈ 1 ms per scavenge with ~250 MB of
 * old space (scavenge pauses 1.6–2.0 ms) against 0.8–0.9 ms with ~12 MB — the garbage the ingest
 * phase promoted stays until the next full collection, which the check phase alone never
 * triggers. Needs `--expose-gc` (bench/main.ts runs this benchmark with it).
 */
function fullCollection(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('bench counting needs node --expose-gc (npm run bench -- counting sets it)');
  gc();
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

const round = (x: number, digits = 3) => Math.round(x * 10 ** digits) / 10 ** digits;

/** CPU seconds redis-server has used (user + system, main and background threads). */
async function redisCpuSeconds(client: Redis): Promise<number> {
  const info = await client.info('cpu');
  const field = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? Number.NaN);
  return field('used_cpu_user') + field('used_cpu_sys');
}

async function usedMemory(client: Redis): Promise<number> {
  const info = await client.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? Number.NaN);
}

/**
 * The seed's layout: one set per user and day/hour/minute bucket; member = event bytes. Read
 * from beside this file: the benchmarks run from the repository only (tsx).
 */
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

const CAP_LIMITS = [
  [2, 8, 20],
  [4, 20, 60],
  [10, 60, 200],
  [30, 150, 400],
];

/** Runs the benchmark; returns the figures (bench/main.ts prints them as the final JSON line). */
export async function run(args: string[]): Promise<Record<string, unknown>> {
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
    /** The ingest workload (the same every call: the bucket layout below replays it). */
    const ingestWorkload = () => {
      const wrand = prng(40);
      const ingestUsers = Math.max(1, Math.floor(totalEvents / 10));
      const records = Array.from({ length: totalEvents }, () =>
        makeEvent(wrand, 1 + Math.floor(wrand() * ingestUsers), now, Math.floor(wrand() * 400)),
      );
      const batches: Buffer[][] = [];
      for (let i = 0; i < records.length; i += 500) batches.push(records.slice(i, i + 500));
      return { records, batches };
    };

    // ---- ingest ----------------------------------------------------------------------------
    // In its own function: its 300,000 records (and their redelivered and re-stamped copies) must
    // not stay reachable through the cap-check phase, whose tail latency a bloated heap's GC shows.
    const { first, second, third, memBefore, memAfter } = await (async () => {
      const irand = prng(41);
      const { records, batches } = ingestWorkload();
      const memBefore = await usedMemory(client);
      const ingestPass = async (batches: readonly Buffer[][]) => {
        let next = 0;
        let added = 0;
        const cpu0 = process.cpuUsage();
        const server0 = await redisCpuSeconds(client);
        const start = performance.now();
        await Promise.all(
          Array.from({ length: 4 }, async () => {
            while (next < batches.length) {
              const batch = batches[next++] as Buffer[];
              const r = await ingestRecords(store, batch);
              if (r.malformed.length) throw r.malformed[0]?.error;
              added += r.added;
            }
          }),
        );
        const seconds = (performance.now() - start) / 1000;
        const cpu = process.cpuUsage(cpu0);
        return {
          seconds,
          added,
          cpuSeconds: (cpu.user + cpu.system) / 1e6,
          serverCpuSeconds: (await redisCpuSeconds(client)) - server0,
        };
      };
      const first = await ingestPass(batches);
      const memAfter = await usedMemory(client);
      const second = await ingestPass(batches);
      // The same events as a client retry or a second log source sends them: another timestamp.
      const restamped = batches.map((batch) =>
        batch.map((r) => {
          const copy = Buffer.from(r);
          copy.writeUIntBE(copy.readUIntBE(3, 6) - 1 - Math.floor(irand() * HOUR_MS), 3, 6);
          return copy;
        }),
      );
      const third = await ingestPass(restamped);
      if (
        first.added !== new Set(records.map((r) => r.toString('hex'))).size ||
        second.added !== 0 ||
        third.added !== 0
      ) {
        throw new Error(
          `dedup broken: first pass added ${first.added}, redelivery ${second.added}, re-stamped ${third.added}`,
        );
      }
      return { first, second, third, memBefore, memAfter };
    })();
    const ingestEventsPerSec = Math.round(totalEvents / first.seconds);

    // ---- cap-check fixture: users with exactly 1,000 events over 30 days ------------------
    // 50 candidate ads; the user's events fall on 400 ads, 60% of them on the candidates.
    const candidateAds = Array.from({ length: 50 }, (_, i) => i * 3);
    const capUserIds = Array.from({ length: capUsers }, (_, i) => String(9_000_000 + i));
    /** The cap-check users' events (the same every call: the bucket layout below replays them). */
    const fixtureWorkload = () => {
      const rand = prng(42);
      const records: Buffer[] = [];
      for (const u of capUserIds) {
        for (let k = 0; k < 1000; k++) {
          const ad =
            rand() < 0.6 ? (candidateAds[Math.floor(rand() * 50)] as number) : Math.floor(rand() * 400);
          records.push(makeEvent(rand, Number(u), now, ad));
        }
      }
      return records;
    };
    // Like the ingest records above, the 200,000 fixture records are not kept through the cap
    // checks: a serving process does not hold them, and their promotion would show in its GC.
    await (async () => {
      const records = fixtureWorkload();
      for (let i = 0; i < records.length; i += 2000) await ingestRecords(store, records.slice(i, i + 2000));
    })();
    const windows = [HOUR_MS, 7 * DAY_MS, 30 * DAY_MS];
    const candidates: CapCandidate[] = candidateAds.map((ad) => ({
      id: String(ad),
      entities: entities(ad),
      // Limits per level × window (1 h, 7 d, 30 d): a realistic mix of allowed and capped.
      caps: (['ad', 'adGroup', 'campaign', 'advertiser'] as const).flatMap((level, li) =>
        windows.map((windowMs, wi): FrequencyCap => ({ level, windowMs, max: CAP_LIMITS[li]?.[wi] ?? 1 })),
      ),
    }));
    const members = await client.zcard(store.key(capUserIds[0] as string));
    if (members !== 1000) throw new Error(`fixture user has ${members} events, expected 1000`);

    // Warm-up, not measured: the first few hundred checks run before the JIT has compiled the
    // scan (1–3 ms each), which is start-up cost, not the steady latency a serving process sees.
    for (let i = 0; i < Math.min(checks, 1000); i++) {
      await store.checkFrequencyCaps({ userId: capUserIds[i % capUserIds.length] as string, candidates });
    }
    if (collect) fullCollection();
    const latencies: number[] = [];
    let rejected = 0;
    for (let i = 0; i < checks; i++) {
      const userId = capUserIds[i % capUserIds.length] as string;
      const t0 = performance.now();
      const result = await store.checkFrequencyCaps({ userId, candidates });
      latencies.push(performance.now() - t0);
      rejected += result.rejected.length;
    }
    latencies.sort((a, b) => a - b);
    const concurrency = 4;
    /** `checks` checks, `concurrency` in flight (a closed loop): latencies, wall seconds, CPU. */
    const closedLoop = async (s: ActionStore) => {
      const latencies: number[] = [];
      const cpu0 = process.cpuUsage();
      const start = performance.now();
      await Promise.all(
        Array.from({ length: concurrency }, async (_, w) => {
          for (let i = w; i < checks; i += concurrency) {
            const t0 = performance.now();
            await s.checkFrequencyCaps({ userId: capUserIds[i % capUserIds.length] as string, candidates });
            latencies.push(performance.now() - t0);
          }
        }),
      );
      return { latencies, wall: (performance.now() - start) / 1000, cpu: process.cpuUsage(cpu0) };
    };
    const { latencies: loaded, wall: capWall, cpu: capCpu } = await closedLoop(store);
    const done = loaded.length;
    const capChecksPerSec = Math.round(done / capWall);
    loaded.sort((a, b) => a - b);
    // Open loop at the target rate (bench/open-loop.ts): checks arrive at fixed instants (5,000/s)
    // whether or not earlier ones finished, each latency measured from its arrival, so queueing
    // behind earlier checks shows up in it (no coordinated omission); the generator's own
    // lateness is reported beside it.
    const targetRate = 5000;
    // Warm-up, not measured: 3 s at the target rate. The hand-over path (worker → message →
    // check) and the request path under this arrival pattern compile first; with a 1,000-check
    // warm-up the JIT was still compiling (and re-optimising what it had deoptimised) during the
    // measured window, at the same check indexes run after run — start-up cost, not the steady
    // state of a serving process. Then three windows measured back to back on the same schedule
    // (one generator: bench/open-loop.ts says why), pooled for the percentiles; each window's own
    // P99 is reported too, to show the spread.
    const windowChecks = Math.max(checks * 2, targetRate * 2);
    if (collect) fullCollection();
    // The young-generation pauses of the open loop, warm-up included (their length depends on
    // the old generation's size: see fullCollection).
    const scavengeMs: number[] = [];
    const gcObserver = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        if ((e.detail as { kind?: number } | undefined)?.kind === constants.NODE_PERFORMANCE_GC_MINOR)
          scavengeMs.push(e.duration);
      }
    });
    gcObserver.observe({ entryTypes: ['gc'] });
    const paceWindows = await openLoopWindows({
      ratePerSec: targetRate,
      warmup: targetRate * 3,
      windows: [windowChecks, windowChecks, windowChecks],
      run: (i) =>
        store.checkFrequencyCaps({ userId: capUserIds[i % capUserIds.length] as string, candidates }),
    });
    // Entries are delivered after the fact: one turn of the event loop before disconnecting.
    await new Promise((resolve) => setImmediate(resolve));
    gcObserver.disconnect();
    scavengeMs.sort((a, b) => a - b);
    const pooled = (pick: (r: OpenLoopResult) => number[]) => paceWindows.flatMap(pick).sort((a, b) => a - b);
    const pooledP99 = (pick: (r: OpenLoopResult) => number[]) => round(percentile(pooled(pick), 99));
    const failures = paceWindows.reduce((sum, r) => sum + r.failures, 0);
    if (failures > 0) throw new Error(`${failures} cap checks failed in the open loop`);
    const paced = pooled((r) => r.latenciesMs);
    const pacedRate = Math.min(...paceWindows.map((r) => r.achievedPerSec));
    // The closed loop with the log read through ioredis (rawReads: false), for comparison; after
    // the open loop, so its code paths do not deoptimise the raw path's just before it.
    const io = await closedLoop(new ActionStore({ redis: client, clock, rawReads: false }));
    const ioDone = io.latencies.length;
    const ioWall = io.wall;
    const ioCpu = io.cpu;
    // Where the time goes: the in-process scan alone (no Redis).
    const sampleMembers = await store.eventLog(capUserIds[0] as string);
    const scanStart = performance.now();
    for (let i = 0; i < 500; i++) evaluateCaps(sampleMembers, candidates, now, now - 30 * DAY_MS);
    const scanOnlyMs = (performance.now() - scanStart) / 500;

    // ---- memory per event of the two keys, for users with 1,000 events --------------------
    let setBytes = 0;
    let logBytes = 0;
    for (const u of capUserIds.slice(0, 20)) {
      setBytes += Number(await client.call('MEMORY', 'USAGE', store.key(u), 'SAMPLES', '0'));
      logBytes += Number(await client.call('MEMORY', 'USAGE', store.logKey(u), 'SAMPLES', '0'));
    }

    // ---- the alternative: day/hour/minute bucket sets (the Aperture seed's layout) ----------
    let buckets: Record<string, unknown> = { skipped: true };
    if (!skipBuckets) {
      await client.flushall();
      client.defineCommand('bucketIngest', { numberOfKeys: 3, lua: BUCKET_INGEST_LUA });
      const callBucket = (p: ReturnType<Redis['pipeline']>, keys: string[], ttl: number, member: Buffer) =>
        (p as unknown as { bucketIngest(...a: unknown[]): void }).bucketIngest(...keys, ttl, member);
      const { batches } = ingestWorkload();
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
      const fixtureRecords = fixtureWorkload();
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
      buckets = {
        ingestEventsPerSec: Math.round(totalEvents / bSeconds),
        bytesPerEvent: Math.round((bMemAfter - bMemBefore) / totalEvents),
        capCheckP50Ms: round(percentile(bLat, 50)),
        capCheckP99Ms: round(percentile(bLat, 99)),
        capChecksPerSecSequential: Math.round(1000 / (bLat.reduce((a, b) => a + b, 0) / bLat.length)),
        keysReadPerCheck: coveringBuckets('x', now - 30 * DAY_MS, now + MINUTE_MS).length,
      };
    }

    return {
      store:
        'key schema v2, per user: occurrence set (dedup by identity, retention) + packed log string (reads: one GET)',
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
      capCheckAtTargetRate: {
        offeredPerSec: targetRate,
        achievedPerSec: pacedRate,
        p50Ms: round(percentile(paced, 50)),
        p99Ms: round(percentile(paced, 99)),
        p999Ms: round(percentile(paced, 99.9)),
        checks: paced.length,
        windowP99Ms: paceWindows.map((r) => round(percentile(r.latenciesMs, 99))),
        // Arrival → started: the part of the latency spent waiting for the process to be free.
        startLagP99Ms: pooledP99((r) => r.startLagMs),
        // From the scheduled instant instead of the arrival: adds the generator's own lateness.
        fromScheduleP99Ms: pooledP99((r) => r.fromScheduleMs),
        generatorLateP99Ms: pooledP99((r) => r.generatorLateMs),
        // Young-generation collections in the open loop (warm-up included) and their pauses.
        scavenges: scavengeMs.length,
        scavengePauseP50Ms: round(percentile(scavengeMs, 50)),
        scavengePauseMaxMs: round(scavengeMs[scavengeMs.length - 1] ?? Number.NaN),
        fullCollectionsBefore: collect,
        arrivals: `one every 200 µs, handed over by a worker thread that sleeps to each instant; latency from arrival (bench/open-loop.ts); one schedule: 3 s warm-up at the rate, then 3 windows back to back, pooled${collect ? '; a full collection before it' : ''}`,
      },
      capCheckClientCpuShare: round((capCpu.user + capCpu.system) / 1e6 / capWall, 2),
      capCheckClientCpuUs: round((capCpu.user + capCpu.system) / done, 1),
      capChecksPerSecIoredisReads: Math.round(ioDone / ioWall),
      capCheckClientCpuUsIoredisReads: round((ioCpu.user + ioCpu.system) / ioDone, 1),
      capCheckScanOnlyMs: round(scanOnlyMs),
      capCheckRejectedPerCheck: round(rejected / checks, 1),
      ...ceiling,
      ingestToCeilingRatio: round(ingestEventsPerSec / ceiling.redisCeilingOpsPerSec),
      capChecksToCeilingRatio: round(capChecksPerSec / ceiling.redisCeilingOpsPerSec, 4),
      userBytesPerEventSet: Math.round(setBytes / 20 / 1000),
      userBytesPerEventLog: Math.round(logBytes / 20 / 1000),
      alternativeDayHourMinuteBuckets: buckets,
      note: 'one process, loopback redis-server on the same 2-core machine (client and server share CPUs)',
    };
  } finally {
    client.disconnect();
    await redisServer.stop();
  }
}
