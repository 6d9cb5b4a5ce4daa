/**
 * The cadence of a pacer invocation (DESIGN requirement 1). A rule per (shard, instance) invokes
 * the pacer once a minute — at the rule's own second within the minute, plus a delivery delay of
 * up to 20 s, occasionally twice, occasionally not at all (shared/region/schedule-delivery.ts).
 * So an invocation covers a window that starts at its own start, not at a clock minute: the tick
 * its start falls in (run at once, late inside its window) and every tick whose boundary falls in
 * the minute after its start plus an overlap of the longest delivery delay, each on its wall-clock
 * boundary (tick t covers [t·tickMs, (t+1)·tickMs)).
 *
 * - Coverage: the next invocation of the same rule starts at most a minute plus the longest delay
 *   after this one, so consecutive invocations of one instance overlap instead of leaving gaps,
 *   whatever the rule's second and the delays ({@link planInvocation}, unit-tested for every start
 *   second and delay). A window bound to the clock minute would not: a rule firing at :37 would
 *   run 2 of its minute's 6 ticks.
 * - Overlaps decide themselves: the newer invocation of the holding instance adopts the lease
 *   (fencing the older one out), the fenced claim lets one publisher claim a tick and never the
 *   same tick twice, and in one process a shard's ticks run one at a time, each once
 *   ({@link ProcessTicks}, passed as `ticks`).
 * - An overlap lasts about a tick: once a newer invocation of the same instance has started (the
 *   lease's `superseded`, passed as `superseded`), the older one ends — so an instance costs about
 *   a minute of compute a minute, not a minute and a third; only a missed or late delivery lets
 *   a window run to its end.
 * - A tick that overruns into the next window makes that one late; one that overruns past a whole
 *   window skips it; no tick starts with less than a tick of the invocation's time left.
 * - A tick that throws (Redis timing out for a second, a DynamoDB throttle) does not end the
 *   invocation: the next ticks still run on their boundaries (ticks are idempotent and each claims
 *   and publishes whole), and the invocation then fails with {@link TickFailedError} naming the
 *   failed ticks, its cause the first error — thrown, never swallowed.
 * - Time and sleeping are injected, so tests drive an invocation on a manual clock.
 */
import { PacelineError } from '../errors.js';
import { scheduleDeliveryDelayMaxMs } from '../region/schedule-delivery.js';
import type { Clock } from '../time/clock.js';
import type { ProcessTicks } from './process-ticks.js';
import { tickOf } from './types.js';

/** Some ticks of an invocation threw (the others ran); `cause` is the first tick's error. */
export class TickFailedError extends PacelineError {
  override readonly name = 'TickFailedError';
  override readonly code = 'pacing.tick-failed';
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
export interface InvocationPlan {
  /** The tick the start falls in: run at once (late inside its window). */
  readonly firstTick: number;
  /** The last tick: the last boundary at or before start + minute + the longest delivery delay. */
  readonly lastTick: number;
  /** End of the last tick's window: the invocation returns then (or when its last tick is done). */
  readonly endMs: number;
}

/**
 * How far past a minute an invocation's window reaches: the longest delivery delay of the
 * schedule (20 s of a 60 s minute, scaled with shorter minutes).
 */
export function invocationOverlapMs(minuteMs: number): number {
  return scheduleDeliveryDelayMaxMs(minuteMs);
}

/** Plans the window of an invocation starting at `startMs` (pure). */
export function planInvocation(startMs: number, tickMs: number, minuteMs: number): InvocationPlan {
  const lastTick = tickOf(startMs + minuteMs + invocationOverlapMs(minuteMs), tickMs);
  return { firstTick: tickOf(startMs, tickMs), lastTick, endMs: (lastTick + 1) * tickMs };
}

/**
 * The longest window an invocation runs, ms: a minute, the overlap, and the tick its start falls
 * in (a start just after a boundary). The Lambda timeout adds the last tick's run time to this.
 */
export function invocationWindowMs(tickMs: number, minuteMs: number): number {
  return minuteMs + invocationOverlapMs(minuteMs) + tickMs;
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
  /**
   * The shard's ticks in this process, and this invocation's rank among the process's invocations
   * of the shard (its lease epoch while it holds the lease, else 0). @default every tick runs
   */
  readonly ticks?: { readonly process: ProcessTicks; readonly rank: () => number };
  /**
   * True once a newer invocation of the same instance covers the rest of the window (the lease's
   * `superseded`): asked after each tick; the invocation then ends. @default never
   */
  readonly superseded?: () => boolean;
  /** Runs one tick. */
  readonly runTick: (tick: number) => Promise<T>;
  /** Called after each tick (metrics, logs), with how many ticks were skipped just before it. */
  readonly onTick?: (outcome: T, skippedBefore: number) => void;
}

/** What an invocation did. */
export interface InvocationSummary<T> {
  readonly startedAtMs: number;
  readonly plan: InvocationPlan;
  readonly outcomes: readonly T[];
  /** Ticks of the window not run: overran past a window, or out of time. */
  readonly ticksSkipped: number;
  /** Ticks that began after their window's start plus a tenth of a tick (late, still inside it). */
  readonly ticksLate: number;
  /** Skipped ticks after the last tick run (not yet reported through `onTick`). */
  readonly trailingSkipped: number;
  /** Ticks of the window this process ran (or runs) in another invocation of the shard. */
  readonly ticksRunElsewhere: number;
  /** Ticks of the window left to a newer invocation of the same instance (ended early). */
  readonly ticksHandedOver: number;
}

/** Runs the ticks of the invocation's window on their wall-clock boundaries. */
export async function runInvocation<T>(options: InvocationOptions<T>): Promise<InvocationSummary<T>> {
  const { clock, tickMs } = options;
  const startedAtMs = clock.now();
  const plan = planInvocation(startedAtMs, tickMs, options.minuteMs);
  const turns = options.ticks?.process.join(plan.lastTick, options.ticks.rank);
  const outcomes: T[] = [];
  const failures: { tick: number; error: unknown }[] = [];
  let skipped = 0;
  let pendingSkipped = 0;
  let late = 0;
  let elsewhere = 0;
  let handedOver = 0;
  try {
    for (let tick = plan.firstTick; tick <= plan.lastTick; tick++) {
      if (tick > plan.firstTick && options.superseded?.()) {
        handedOver = plan.lastTick - tick + 1;
        break;
      }
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
      let outcome: T;
      try {
        const turn = turns
          ? await turns.run(tick, () => options.runTick(tick))
          : { ran: true as const, value: await options.runTick(tick) };
        if (!turn.ran) {
          elsewhere++;
          continue;
        }
        outcome = turn.value;
      } catch (error) {
        failures.push({ tick, error });
        continue;
      }
      // Late: reached more than a tenth of a tick after its boundary.
      if (now > boundary + tickMs / 10) late++;
      outcomes.push(outcome);
      options.onTick?.(outcome, pendingSkipped);
      pendingSkipped = 0;
    }
  } finally {
    turns?.leave();
  }
  if (failures.length > 0) {
    const first = failures[0] as { tick: number; error: unknown };
    const reason = first.error instanceof Error ? first.error.message : String(first.error);
    throw new TickFailedError(
      `${failures.length} of the invocation's ticks failed (${failures.map((f) => f.tick).join(', ')}; ` +
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
    ticksRunElsewhere: elsewhere,
    ticksHandedOver: handedOver,
  };
}
