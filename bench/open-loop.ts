/**
 * An open-loop load generator for latency at a target rate: operations arrive at fixed instants
 * (rate r: one every 1/r s) whether or not earlier ones finished, so queueing behind a busy
 * process counts against the operations that waited (no coordinated omission).
 *
 * Why a worker thread: a timer in the measured thread fires at 1 ms granularity (≈ 1.1 ms in
 * practice), so it started the operations of each millisecond as one burst up to a millisecond
 * after their instants, even when the process had been idle the whole time; that timer artefact
 * alone was ~1 ms of every P99. Here a worker thread sleeps to each instant (`Atomics.wait`, sub-
 * millisecond) and hands the arrival to the measured thread, where it is an event, as a request
 * on a socket would be: it waits only while the measured thread is busy. Both threads read the
 * same monotonic clock (`process.hrtime`).
 *
 * Two latencies per operation:
 * - from its **arrival** (the instant the worker handed it over) to settled: the process's
 *   latency — queueing behind earlier operations, GC pauses, Redis;
 * - from its **scheduled instant**: the same plus the generator's own lateness. On a machine
 *   whose cores are all busy (here: the measured thread, redis-server, the worker on 2 cores) the
 *   kernel sometimes wakes the worker milliseconds late; those arrivals then come in a bunch, and
 *   their queueing behind each other still counts in the first figure. `generatorLateMs` says how
 *   late the worker was, so the two can be told apart.
 */
import { Worker } from 'node:worker_threads';

/** Options of {@link openLoop}. */
export interface OpenLoopOptions {
  /** Operations started per second. */
  readonly ratePerSec: number;
  /** Operations in the run. */
  readonly total: number;
  /** Starts operation `i`; its latency ends when the promise settles. */
  readonly run: (i: number) => Promise<unknown>;
}

/** Options of {@link openLoopWindows}. */
export interface OpenLoopWindowsOptions {
  /** Operations started per second, through the warm-up and every window. */
  readonly ratePerSec: number;
  /** Operations at the start that are run at the rate but not measured. @default 0 */
  readonly warmup?: number;
  /** Operations per measured window, back to back after the warm-up. */
  readonly windows: readonly number[];
  /** Starts operation `i` (counted from the first warm-up operation). */
  readonly run: (i: number) => Promise<unknown>;
}

/** What {@link openLoop} measured; latency lists are sorted ascending, in ms. */
export interface OpenLoopResult {
  /** Per operation, arrival (handed over by the generator) → settled. */
  readonly latenciesMs: number[];
  /** Per operation, scheduled instant → settled (includes the generator's lateness). */
  readonly fromScheduleMs: number[];
  /** Per operation, arrival → started in the measured thread (waiting for it to be free). */
  readonly startLagMs: number[];
  /** Per operation, scheduled instant → handed over: the generator's own lateness. */
  readonly generatorLateMs: number[];
  /** Operations completed per second (first scheduled instant → last settled). */
  readonly achievedPerSec: number;
  /** Operations whose promise rejected (their latency is still counted). */
  readonly failures: number;
}

const nowNs = () => Number(process.hrtime.bigint());

// CommonJS source run by the worker (eval). It picks the first instant once it runs (a worker
// takes tens of ms to start: a start fixed by the parent made the first arrivals late), tells
// the parent, then sleeps to each instant, stamps the hand-over in shared memory and posts the
// index.
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { periodNs, total, handedOver } = workerData;
const stamps = new Float64Array(handedOver);
const cell = new Int32Array(new SharedArrayBuffer(4));
const startNs = Number(process.hrtime.bigint()) + 5e6;
parentPort.postMessage(-1 - startNs);
for (let i = 0; i < total; i++) {
  const due = startNs + i * periodNs;
  const waitMs = (due - Number(process.hrtime.bigint())) / 1e6;
  if (waitMs > 0) Atomics.wait(cell, 0, 0, waitMs);
  stamps[i] = Number(process.hrtime.bigint());
  parentPort.postMessage(i);
}
`;

/** Runs `total` operations at `ratePerSec` (see the module comment) and reports their latencies. */
export async function openLoop(options: OpenLoopOptions): Promise<OpenLoopResult> {
  const { ratePerSec, total, run } = options;
  if (!Number.isSafeInteger(total) || total <= 0) {
    throw new RangeError(`openLoop: ratePerSec (${ratePerSec}) and total (${total}) must be positive`);
  }
  const [result] = await openLoopWindows({ ratePerSec, windows: [total], run });
  return result as OpenLoopResult;
}

/**
 * One generator, one schedule: `warmup` operations, then each window's, at `ratePerSec` without
 * a break; one result per window. Why not one {@link openLoop} per window: each started a new
 * generator thread, whose start-up (a new isolate, its code compiled on V8's shared background
 * threads, its first collections) fell inside the window it timed; measured here, runs of 15–35
 * checks each 2–4 ms late at the same point of every window, which this schedule does not have.
 */
export async function openLoopWindows(options: OpenLoopWindowsOptions): Promise<OpenLoopResult[]> {
  const { ratePerSec, warmup = 0, windows, run } = options;
  if (
    !(ratePerSec > 0) ||
    !Number.isSafeInteger(warmup) ||
    warmup < 0 ||
    windows.length === 0 ||
    !windows.every((n) => Number.isSafeInteger(n) && n > 0)
  ) {
    throw new RangeError(
      `openLoop: ratePerSec (${ratePerSec}) and every window (${windows.join(', ')}) must be positive, warmup (${warmup}) ≥ 0`,
    );
  }
  const total = warmup + windows.reduce((a, b) => a + b, 0);
  const periodNs = 1e9 / ratePerSec;
  const handedOver = new SharedArrayBuffer(total * 8);
  const stamps = new Float64Array(handedOver);
  const settledAt = new Float64Array(total);
  const startLag = new Float64Array(total);
  const failed = new Uint8Array(total);
  let startNs = 0;
  let settled = 0;
  const worker = new Worker(WORKER, { eval: true, workerData: { periodNs, total, handedOver } });
  try {
    await new Promise<void>((resolve, reject) => {
      worker.on('error', reject);
      worker.on('message', (i: number) => {
        if (i < 0) {
          startNs = -1 - i;
          return;
        }
        startLag[i] = (nowNs() - (stamps[i] as number)) / 1e6;
        const done = () => {
          settledAt[i] = nowNs();
          if (++settled === total) resolve();
        };
        let operation: Promise<unknown>;
        try {
          operation = run(i);
        } catch (error) {
          operation = Promise.reject(error);
        }
        operation.then(done, () => {
          failed[i] = 1;
          done();
        });
      });
    });
  } finally {
    await worker.terminate();
  }
  const sorted = (from: number, to: number, value: (i: number) => number) => {
    const out = new Array<number>(to - from);
    for (let i = from; i < to; i++) out[i - from] = value(i);
    return out.sort((a, b) => a - b);
  };
  const due = (i: number) => startNs + i * periodNs;
  const results: OpenLoopResult[] = [];
  let from = warmup;
  for (const count of windows) {
    const to = from + count;
    let lastNs = 0;
    let failures = 0;
    for (let i = from; i < to; i++) {
      lastNs = Math.max(lastNs, settledAt[i] as number);
      failures += failed[i] as number;
    }
    results.push({
      latenciesMs: sorted(from, to, (i) => ((settledAt[i] as number) - (stamps[i] as number)) / 1e6),
      fromScheduleMs: sorted(from, to, (i) => ((settledAt[i] as number) - due(i)) / 1e6),
      startLagMs: sorted(from, to, (i) => startLag[i] as number),
      generatorLateMs: sorted(from, to, (i) => ((stamps[i] as number) - due(i)) / 1e6),
      achievedPerSec: Math.round(count / ((lastNs - due(from)) / 1e9)),
      failures,
    });
    from = to;
  }
  return results;
}
