/**
 * The cadence of a pacer invocation (DESIGN requirement 1). EventBridge fires each instance once
 * a minute; the invocation runs the ticks of *its* minute — the minute its start falls in — each on
 * its wall-clock boundary (tick t covers [t·tickMs, (t+1)·tickMs)), and returns when the minute's
 * last tick is done, before the next minute's invocation starts its first tick.
 *
 * - The tick id comes from time, so an invocation that starts late runs the current tick late
 *   (within its window) and counts the minute's earlier ticks as skipped; a tick that overruns into
 *   the next window makes that one late, and one that overruns past a whole window skips it.
 * - Overlapping invocations of one instance (a late one still running) are harmless: the lease
 *   (adoption by the newer invocation) and the fenced claim (one publisher per tick) decide.
 * - A tick that throws (Redis timing out for a second, a DynamoDB throttle) does not end the minute:
 *   the next ticks still run on their boundaries (ticks are idempotent and each claims and
 *   publishes whole), and the invocation then fails with {@link TickFailedError} naming the failed
 *   ticks, its cause the first error — thrown, never swallowed. Before, the first failed tick ended
 *   the invocation, and a one-second stall cost the rest of the minute's publishes.
 * - Time and sleeping are injected, so tests drive a minute on a manual clock.
 */
import type { Clock } from '../time/clock.js';
import { tickOf } from './types.js';

/** Some ticks of an invocation threw (the others ran); `cause` is the first tick's error. */
export class TickFailedError extends Error {
  override readonly name = 'TickFailedError';
  constructor(
    message: string,
    /** Each failed tick and its error, in order. */
    readonly failures: readonly { readonly tick: number; readonly error: unknown }[],
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The ticks an invocation starting at `startMs` is responsible for. */
export interface MinutePlan {
  /** First tick of the invocation's minute. */
  readonly firstTick: number;
  /** Last tick of the minute. */
  readonly lastTick: number;
  /** The tick `startMs` falls in (earlier ticks of the minute are already past). */
  readonly currentTick: number;
  readonly minuteEndMs: number;
}

/** Plans the ticks of the minute containing `startMs` (pure). */
export function planMinute(startMs: number, tickMs: number, minuteMs: number): MinutePlan {
  const minuteStart = Math.floor(startMs / minuteMs) * minuteMs;
  const minuteEndMs = minuteStart + minuteMs;
  return {
    firstTick: tickOf(minuteStart, tickMs),
    lastTick: tickOf(minuteEndMs - 1, tickMs),
    currentTick: tickOf(startMs, tickMs),
    minuteEndMs,
  };
}

/** Options of {@link runInvocation}. */
export interface InvocationOptions<T> {
  readonly clock: Clock;
  /** Waits `ms` (injected: tests advance a manual clock instead). */
  readonly sleep: (ms: number) => Promise<void>;
  readonly tickMs: number;
  readonly minuteMs: number;
  /** Time left before the invocation's timeout (Lambda context); a tick is not started without a tick's worth left. */
  readonly remainingMs?: () => number;
  /** Runs one tick. */
  readonly runTick: (tick: number) => Promise<T>;
  /** Called after each tick (metrics, logs), with how many ticks were skipped just before it. */
  readonly onTick?: (outcome: T, skippedBefore: number) => void;
}

/** What an invocation did. */
export interface InvocationSummary<T> {
  readonly startedAtMs: number;
  readonly plan: MinutePlan;
  readonly outcomes: readonly T[];
  /** Ticks of the minute not run: started late, overran past a window, or out of time. */
  readonly ticksSkipped: number;
  /** Ticks that began after their window's start plus a tenth of a tick (late, still inside it). */
  readonly ticksLate: number;
  /** Skipped ticks after the last tick run (not yet reported through `onTick`). */
  readonly trailingSkipped: number;
}

/** Runs the ticks of the invocation's minute on their wall-clock boundaries. */
export async function runInvocation<T>(options: InvocationOptions<T>): Promise<InvocationSummary<T>> {
  const { clock, tickMs } = options;
  const startedAtMs = clock.now();
  const plan = planMinute(startedAtMs, tickMs, options.minuteMs);
  const outcomes: T[] = [];
  const failures: { tick: number; error: unknown }[] = [];
  let skipped = plan.currentTick - plan.firstTick;
  let pendingSkipped = skipped;
  let late = 0;
  for (let tick = plan.currentTick; tick <= plan.lastTick; tick++) {
    const boundary = tick * tickMs;
    let now = clock.now();
    if (now < boundary) {
      await options.sleep(boundary - now);
      now = clock.now();
    }
    const remaining = options.remainingMs?.() ?? Number.POSITIVE_INFINITY;
    if (now >= boundary + tickMs || remaining < tickMs) {
      skipped++;
      pendingSkipped++;
      continue;
    }
    if (now > boundary + tickMs / 10) late++;
    let outcome: T;
    try {
      outcome = await options.runTick(tick);
    } catch (error) {
      failures.push({ tick, error });
      continue;
    }
    outcomes.push(outcome);
    options.onTick?.(outcome, pendingSkipped);
    pendingSkipped = 0;
  }
  if (failures.length > 0) {
    const first = failures[0] as { tick: number; error: unknown };
    const reason = first.error instanceof Error ? first.error.message : String(first.error);
    throw new TickFailedError(
      `${failures.length} of the minute's ticks failed (${failures.map((f) => f.tick).join(', ')}; ` +
        `${outcomes.length} ran); first: ${reason}`,
      failures,
      { cause: first.error },
    );
  }
  return {
    startedAtMs,
    plan,
    outcomes,
    ticksSkipped: skipped,
    ticksLate: late,
    trailingSkipped: pendingSkipped,
  };
}
