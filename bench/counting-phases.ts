/**
 * The measured phases of the counting benchmark (bench/counting.ts says what each figure means):
 * ingest (first pass, redelivery, re-stamped copies), the cap-check fixture, and the cap checks —
 * one at a time, a closed loop, an open loop at the target rate, the in-process scan alone.
 */
import { constants, PerformanceObserver } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { evaluateCapLog } from '../shared/counting/caps.js';
import { ingestRecords } from '../shared/counting/ingest.js';
import { userCapLogKey, userCapTuplesKey } from '../shared/counting/keys.js';
import { type CapCandidate, evaluateCaps } from '../shared/counting/query.js';
import type { ActionStore } from '../shared/counting/store.js';
import { prng } from '../shared/random/prng.js';
import { RawValueReader } from '../shared/redis/resp/value-reader.js';
import { DAY_MS, HOUR_MS } from '../shared/time/clock.js';
import {
  type CountingWorkload,
  fixtureWorkload,
  ingestWorkload,
  percentile,
  redisCpuSeconds,
  round,
  usedMemory,
} from './counting-workload.js';
import { type OpenLoopResult, openLoopWindows } from './open-loop.js';

/**
 * A full collection between phases (as JMH does between iterations), so the cap-check phases do
 * not pay for the ingest phase's garbage. Why it matters here: V8 visits every old-generation
 * page on each young collection, and on this VM that costs ≈ 1 ms per scavenge with ~250 MB of
 * old space (scavenge pauses 1.6–2.0 ms) against 0.8–0.9 ms with ~12 MB — the garbage the ingest
 * phase promoted stays until the next full collection, which the check phase alone never
 * triggers. Needs `--expose-gc` (bench/main.ts runs this benchmark with it).
 */
export function fullCollection(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('bench counting needs node --expose-gc (npm run bench -- counting sets it)');
  gc();
}

/** One ingest pass over `batches`: 4 batches in flight; wall and CPU seconds, events added. */
async function ingestPass(client: Redis, store: ActionStore, batches: readonly Buffer[][]) {
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
}

/**
 * The ingest phase: the workload, its redelivery, its re-stamped copies (duplicates by identity);
 * throws when dedup did not hold. A function of its own: its records (and their copies) must not
 * stay reachable through the cap-check phase, whose tail latency a bloated heap's GC shows.
 */
export async function ingestPhase(client: Redis, store: ActionStore, w: CountingWorkload) {
  const irand = prng(41);
  const { records, batches } = ingestWorkload(w);
  const memBefore = await usedMemory(client);
  const first = await ingestPass(client, store, batches);
  const memAfter = await usedMemory(client);
  const second = await ingestPass(client, store, batches);
  // The same events as a client retry or a second log source sends them: another timestamp.
  const restamped = batches.map((batch) =>
    batch.map((r) => {
      const copy = Buffer.from(r);
      copy.writeUIntBE(copy.readUIntBE(3, 6) - 1 - Math.floor(irand() * HOUR_MS), 3, 6);
      return copy;
    }),
  );
  const third = await ingestPass(client, store, restamped);
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
}

/**
 * The cap-check users' events into the store. Like the ingest records, the fixture records are
 * not kept through the cap checks: a serving process does not hold them, and their promotion
 * would show in its GC.
 */
export async function loadFixture(store: ActionStore, w: CountingWorkload): Promise<void> {
  const records = fixtureWorkload(w);
  for (let i = 0; i < records.length; i += 2000) await ingestRecords(store, records.slice(i, i + 2000));
}

/** What the cap-check phases share. */
export interface CapChecks {
  readonly store: ActionStore;
  readonly capUserIds: readonly string[];
  readonly candidates: readonly CapCandidate[];
  /** Checks per measured phase. */
  readonly checks: number;
  /** A full collection before the measured phases (see fullCollection). */
  readonly collect: boolean;
}

/** Checks one at a time after a warm-up: sorted latencies (ms) and candidates rejected. */
export async function sequentialChecks(c: CapChecks): Promise<{ latencies: number[]; rejected: number }> {
  const { store, capUserIds, candidates, checks } = c;
  // Warm-up, not measured: the first few hundred checks run before the JIT has compiled the
  // scan (1–3 ms each), which is start-up cost, not the steady latency a serving process sees.
  for (let i = 0; i < Math.min(checks, 1000); i++) {
    await store.checkFrequencyCaps({ userId: capUserIds[i % capUserIds.length] as string, candidates });
  }
  if (c.collect) fullCollection();
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
  return { latencies, rejected };
}

/** `checks` checks on `s`, `concurrency` in flight (a closed loop): latencies, wall seconds, CPU. */
export async function closedLoop(c: CapChecks, s: ActionStore, concurrency: number) {
  const { capUserIds, candidates, checks } = c;
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
}

/**
 * Open loop at the target rate (bench/open-loop.ts): checks arrive at fixed instants (5,000/s)
 * whether or not earlier ones finished, each latency measured from its arrival, so queueing
 * behind earlier checks shows up in it (no coordinated omission); the generator's own lateness
 * is reported beside it. Returns the `capCheckAtTargetRate` figures.
 */
export async function openLoopAtTargetRate(client: Redis, c: CapChecks): Promise<Record<string, unknown>> {
  const { store, capUserIds, candidates, checks, collect } = c;
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
  // The process's CPU over the whole schedule (warm-up included: it runs at the same rate), as a
  // share of one core; the generator's own share (harnessCpuShare) is taken off after.
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  const paceWindows = await openLoopWindows({
    ratePerSec: targetRate,
    warmup: targetRate * 3,
    windows: [windowChecks, windowChecks, windowChecks],
    run: (i) => store.checkFrequencyCaps({ userId: capUserIds[i % capUserIds.length] as string, candidates }),
  });
  const cpu = process.cpuUsage(cpu0);
  const grossShare = (cpu.user + cpu.system) / 1000 / (performance.now() - wall0);
  const harnessShare = await harnessCpuShare(targetRate);
  const roundTripShare = await roundTripCpuShare(client, targetRate);
  // Entries are delivered after the fact: one turn of the event loop before disconnecting.
  await new Promise((resolve) => setImmediate(resolve));
  gcObserver.disconnect();
  scavengeMs.sort((a, b) => a - b);
  const pooled = (pick: (r: OpenLoopResult) => number[]) => paceWindows.flatMap(pick).sort((a, b) => a - b);
  const pooledP99 = (pick: (r: OpenLoopResult) => number[]) => round(percentile(pooled(pick), 99));
  const failures = paceWindows.reduce((sum, r) => sum + r.failures, 0);
  if (failures > 0) throw new Error(`${failures} cap checks failed in the open loop`);
  const paced = pooled((r) => r.latenciesMs);
  return {
    offeredPerSec: targetRate,
    achievedPerSec: Math.min(...paceWindows.map((r) => r.achievedPerSec)),
    // The checks' share: the process's less the generator's own (measured alone just after).
    cpuShare: round(Math.max(0, grossShare - harnessShare)),
    grossCpuShare: round(grossShare),
    harnessCpuShare: round(harnessShare),
    // A bare GET of a 1-byte key on the same schedule, less the generator: the least a check
    // (one round trip) can cost at this rate on this host, before any evaluation.
    roundTripCpuShare: round(Math.max(0, roundTripShare - harnessShare)),
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
  };
}

/**
 * The open-loop generator's own CPU at `ratePerSec`, as a share of one core: the same schedule
 * with an operation that does nothing. Arrivals are a worker thread waking at each instant and a
 * message event in the measured thread (bench/open-loop.ts), tens of µs each — about a fifth of a
 * core at 5,000/s on this host. A serving process pays its own request path instead (HTTP, the
 * ad server's code), which is not the cap check's either; so the check's share is the process's
 * less this.
 */
export function harnessCpuShare(ratePerSec: number): Promise<number> {
  return scheduleCpuShare(ratePerSec, () => Promise.resolve());
}

/** The process's CPU, as a share of one core, over a short open-loop schedule of `run`. */
async function scheduleCpuShare(ratePerSec: number, run: () => Promise<unknown>): Promise<number> {
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  await openLoopWindows({ ratePerSec, warmup: ratePerSec, windows: [ratePerSec * 2, ratePerSec * 2], run });
  const cpu = process.cpuUsage(cpu0);
  return (cpu.user + cpu.system) / 1000 / (performance.now() - wall0);
}

/**
 * The process's CPU at `ratePerSec` when each arrival is one GET of a 1-byte key through the raw
 * reader the checks use, as a share of one core (the generator's own share included): a
 * request's round trip — its write, the wake-up for its reply, the reply's parse — without the
 * check's evaluation.
 */
export async function roundTripCpuShare(client: Redis, ratePerSec: number): Promise<number> {
  const key = 'bench:round-trip';
  await client.set(key, 'x');
  const reader = RawValueReader.of(client);
  const share = await scheduleCpuShare(ratePerSec, () => reader.get(key, (value) => value?.length));
  await client.del(key);
  return share;
}

/**
 * Where the time goes: the in-process evaluation of one user's cap log alone (no Redis), ms per
 * check, and of its log (what a check without the cap log scans).
 */
export async function scanOnlyMs(
  client: Redis,
  c: CapChecks,
  now: number,
): Promise<{ capLog: number; log: number }> {
  const user = c.capUserIds[0] as string;
  const log = await c.store.eventLog(user);
  const capLog = (await client.getBuffer(userCapLogKey(user))) as Buffer;
  const time = (run: () => void) => {
    for (let i = 0; i < 200; i++) run();
    const start = performance.now();
    for (let i = 0; i < 500; i++) run();
    return (performance.now() - start) / 500;
  };
  return {
    capLog: time(() => evaluateCapLog(capLog, c.candidates, now, now - 30 * DAY_MS)),
    log: time(() => evaluateCaps(log, c.candidates, now, now - 30 * DAY_MS)),
  };
}

/** Bytes per event of the occurrence set and of the packed log, over 20 users with 1,000 events. */
export async function bytesPerEventOfKeys(client: Redis, c: CapChecks) {
  let setBytes = 0;
  let logBytes = 0;
  let capLogBytes = 0;
  let capLogLength = 0;
  const usage = async (key: string) => Number(await client.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'));
  for (const u of c.capUserIds.slice(0, 20)) {
    setBytes += await usage(c.store.key(u));
    logBytes += await usage(c.store.logKey(u));
    capLogBytes += (await usage(userCapLogKey(u))) + (await usage(userCapTuplesKey(u)));
    capLogLength += await client.strlen(userCapLogKey(u));
  }
  return {
    userBytesPerEventSet: Math.round(setBytes / 20 / 1000),
    userBytesPerEventLog: Math.round(logBytes / 20 / 1000),
    // Memory of the cap log and its tuple index; what a check reads (the cap log's length).
    userBytesPerEventCapLog: Math.round(capLogBytes / 20 / 1000),
    capLogReadBytesPerEvent: round(capLogLength / 20 / 1000, 1),
  };
}
