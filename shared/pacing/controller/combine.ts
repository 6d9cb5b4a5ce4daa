/**
 * What the ad server applies to a bid, and what it falls back to. Pure functions; the same rules
 * are written out in docs/pacing.md for readers in other languages.
 */
import type { ResolvedPlan } from '../../budget/model.js';
import type { DayWindow } from '../../budget/time-zone.js';
import { planFailSafeCurve } from '../curve-windows.js';
import { safeCurvesOf } from '../modes.js';
import type { PlanPacingParams } from '../types.js';

/** What a bid gets: pass it with probability `throttle`, bid `price × bidMultiplier`. */
export interface BidPacing {
  readonly throttle: number;
  readonly bidMultiplier: number;
}

/**
 * Combines the parameters of every plan that applies to a bid (account, campaign, arm): the
 * throttles multiply (a bid passes each plan's gate independently) and so do the multipliers.
 * Each plan's controller sees the spend produced by the combined values, so a plan that is not
 * binding drifts to full speed (throttle 1, multiplier 1, no windup) and leaves the binding one
 * in control; when several bind, their integrals settle on a product that satisfies all.
 * Missing parameters are skipped (the reader substitutes {@link failSafeParams} first).
 */
export function combineForBid(
  params: readonly (Pick<PlanPacingParams, 'throttle' | 'bidMultiplier'> | undefined)[],
): BidPacing {
  let throttle = 1;
  let bidMultiplier = 1;
  for (const p of params) {
    if (!p) continue;
    throttle *= clamp01(p.throttle);
    bidMultiplier *= p.bidMultiplier > 0 && Number.isFinite(p.bidMultiplier) ? p.bidMultiplier : 1;
  }
  return { throttle, bidMultiplier };
}

function clamp01(x: number): number {
  return x >= 0 && x <= 1 ? x : x > 1 ? 1 : 0;
}

/** Throttle of the fail-safe when nothing is known about the plan today. */
export const FAIL_SAFE_THROTTLE = 1;
/** Multiplier of the fail-safe when nothing is known about the plan today. */
export const FAIL_SAFE_MULTIPLIER = 1;

/** Options of {@link failSafeParams}. */
export interface FailSafeOptions {
  /** The plan's budget in this region. @default plan.dailyBudgetMicros */
  readonly budgetMicros?: number;
  /** The last parameters received for the plan (stale), if any. */
  readonly last?: PlanPacingParams;
}

/**
 * The stated safe policy when a plan's parameters are stale or missing (DESIGN.md requirement 10):
 * E(t) is the mode's fail-safe curve (modes.ts: the linear day curve; ASAP plans: the whole
 * budget; a mode this process does not know: linear) — the guard enforces it, so the cap holds
 * whatever the throttle — and the throttle and multiplier are the last ones received for
 * the same day (they describe the market minutes ago, better than any constant), else throttle
 * {@link FAIL_SAFE_THROTTLE} and multiplier {@link FAIL_SAFE_MULTIPLIER}: the linear R(t) gate
 * alone, which spends evenly in the large and never over the cap.
 */
export function failSafeParams(
  plan: Pick<ResolvedPlan, 'planId' | 'pacingMode' | 'dailyBudgetMicros'> &
    Partial<Pick<ResolvedPlan, 'daypart' | 'timeZone' | 'curve'>>,
  day: DayWindow,
  options: FailSafeOptions = {},
): PlanPacingParams {
  const budgetMicros = options.budgetMicros ?? plan.dailyBudgetMicros;
  const last = options.last?.day === day.day ? options.last : undefined;
  return {
    planId: plan.planId,
    day: day.day,
    budgetMicros,
    mode: plan.pacingMode,
    throttle: last ? clamp01(last.throttle) : FAIL_SAFE_THROTTLE,
    bidMultiplier: last && last.bidMultiplier > 0 ? Math.min(1, last.bidMultiplier) : FAIL_SAFE_MULTIPLIER,
    // A dayparted plan's curve rises only in its windows, a curve plan's follows its own curve (the
    // plan list passes the plan; the reader has only the published fields and gives the mode's
    // whole-day curve — the guard refuses bids outside the windows either way).
    curve:
      plan.daypart || plan.curve
        ? planFailSafeCurve(plan as ResolvedPlan, day, budgetMicros)
        : safeCurvesOf(plan.pacingMode).failSafeCurve(day, budgetMicros),
  };
}
