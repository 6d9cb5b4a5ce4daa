/**
 * The pacing vocabulary shared by the controller (`shared/pacing/controller/`), the pacer
 * function's publisher, the ad servers' `PacingReader`, the budget guard's published curve and
 * the market simulator. Pure types and pure functions only: no I/O.
 *
 * Contract and design: docs/pacing.md.
 */
import type { PacingMode } from '../budget/model.js';

/** Length of one pacing tick: parameters are recomputed and published every 10 s. */
export const TICK_MS = 10_000;

/** The tick id of an instant: ticks are wall-clock aligned, so every instance agrees on it. */
export function tickOf(nowMs: number, tickMs: number = TICK_MS): number {
  return Math.floor(nowMs / tickMs);
}

/**
 * E(t) of one plan-day: cumulative spend the plan may have reached by each instant, as a
 * piecewise-linear curve. Evaluated with {@link evaluateCurve}.
 */
export interface CurvePoints {
  /** Knot instants, epoch ms, strictly increasing; the last one is the end of the plan's day. */
  readonly atMs: readonly number[];
  /** Cumulative allowed spend at each knot, integer micros, non-decreasing; the last is the budget. */
  readonly micros: readonly number[];
}

/**
 * Index i of the segment [atMs[i], atMs[i + 1]) holding `nowMs`, for an instant strictly inside the
 * curve (atMs[0] < nowMs < last knot); binary search.
 */
export function curveSegment(curve: CurvePoints, nowMs: number): number {
  const { atMs } = curve;
  let lo = 0;
  let hi = atMs.length - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if ((atMs[mid] as number) <= nowMs) lo = mid;
    else hi = mid;
  }
  return lo;
}

/**
 * Value of a curve at `nowMs`: linear between knots, the first value before the first knot, the
 * last value from the last knot on. Integer micros (floored).
 */
export function evaluateCurve(curve: CurvePoints, nowMs: number): number {
  const { atMs, micros } = curve;
  const n = atMs.length;
  if (n === 0) return 0;
  if (nowMs <= (atMs[0] as number)) return micros[0] as number;
  if (nowMs >= (atMs[n - 1] as number)) return micros[n - 1] as number;
  const lo = curveSegment(curve, nowMs);
  const hi = lo + 1;
  const t0 = atMs[lo] as number;
  const t1 = atMs[hi] as number;
  const v0 = micros[lo] as number;
  const v1 = micros[hi] as number;
  return Math.floor(v0 + ((v1 - v0) * (nowMs - t0)) / (t1 - t0));
}

/** Live spend of one plan-day as the pacer reads it every tick (from the live counters). */
export interface PlanSpendSnapshot {
  /** False when the plan-day has no live counters yet (not started, or Redis was reset). */
  readonly initialised: boolean;
  readonly confirmedMicros: number;
  /** Bids out and not yet resolved by a notice (live in-flight slots). */
  readonly inFlightMicros: number;
  /** Floats leased to guards and not yet spent. */
  readonly leasedMicros: number;
  /**
   * Of the in-flight amount, what no notice is expected to resolve (learned per plan-day from the
   * slots that died; docs/spend.md "In flight without loss notices"). The controller counts
   * in-flight less this, up to the same cap as the guards. @default 0
   */
  readonly releasableMicros?: number;
  /**
   * The allocation fields of the state hash (several regions, docs/spend.md "Allocations"):
   * read when allocations are strict; otherwise present only when a cap is stored (stale).
   */
  readonly alloc?: AllocationFields;
}

/** The allocation fields of a plan-day state hash; absent fields are undefined. */
export interface AllocationFields {
  /** The cap the lease script enforces: ag − ar − ax. */
  readonly a?: number;
  /** Grants stop after this instant (epoch ms). */
  readonly ae?: number;
  /** Cumulative grant applied. */
  readonly ag?: number;
  /** Cumulative released. */
  readonly ar?: number;
  /** Cumulative reclaimed applied. */
  readonly ax?: number;
  /** When the allocation last held a lease back (epoch ms): demand censored since. */
  readonly ac?: number;
  /** What that held-back lease asked for (a guard's float), micros. */
  readonly aw?: number;
}

/**
 * What the pacer publishes for one plan (account, campaign or experiment arm) each tick; the
 * ad server applies `throttle` and `bidMultiplier`, the budget guard takes E(t) from `curve`.
 */
export interface PlanPacingParams {
  /** `account`, `campaign` or `arm:<armId>` (the plan's id in its scope, as in the spend keys). */
  readonly planId: string;
  /** Advertiser-local day (`YYYY-MM-DD`) the curve belongs to. */
  readonly day: string;
  /** The budget the curve ends at (the plan's daily budget, or this region's share of it). */
  readonly budgetMicros: number;
  readonly mode: PacingMode;
  /** Pass-through probability in [0, 1]: the share of eligible requests the ad server bids on. */
  readonly throttle: number;
  /** Factor applied to the ad server's bid price (bid shading when < 1). */
  readonly bidMultiplier: number;
  /**
   * E(t) from the curve's anchor (at or before the publishing tick: the plan-day's first tick or
   * its last re-anchoring) to the end of the day. The controller returns the identical object
   * while the curve is unchanged, so a publisher rewrites the curve only when the reference
   * changes (day start, budget or mode change, lost forecast).
   */
  readonly curve: CurvePoints;
}
