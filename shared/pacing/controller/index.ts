/**
 * TEMPORARY controller entry point (issue 9's pacing service), replaced at merge by the real
 * controller's index.ts. It exports the linear baseline under the names the pacer, the reader and
 * the benchmark use, so they are written against the interface only:
 *
 * - `createPacingController(config?)` — the controller the pacer runs;
 * - `combineForBid(plans)` — one throttle and bid multiplier for a bid from the parameters of
 *   every plan that applies to it (account, campaign, arm);
 * - `failSafeParams(plan, nowMs)` — what an ad server uses when published parameters are stale
 *   or missing: linear E(t) and a conservative throttle.
 */
import type { PacingMode } from '../../budget/model.js';
import type { DayWindow } from '../../budget/time-zone.js';
import type { PlanPacingParams } from '../types.js';
import type { PacingController } from './api.js';
import { createLinearController, linearCurve } from './linear.js';

/** The pacer's controller (today: the linear baseline). */
export function createPacingController(_config?: unknown): PacingController<unknown, unknown> {
  return createLinearController() as PacingController<unknown, unknown>;
}

/** Throttle and bid multiplier of one bid. */
export interface BidPacing {
  /** Probability of bidding at all, in [0, 1]. */
  readonly throttle: number;
  /** Factor on the bid price. */
  readonly bidMultiplier: number;
}

/**
 * Combines the parameters of every plan that applies to a bid (account, campaign, arm): the most
 * restrictive wins — the smallest throttle and the smallest multiplier — so no plan is paced
 * faster than its own controller asks. No plans: no pacing constraint (1, 1).
 */
export function combineForBid(
  plans: readonly Pick<PlanPacingParams, 'throttle' | 'bidMultiplier'>[],
): BidPacing {
  let throttle = 1;
  let bidMultiplier = 1;
  for (const p of plans) {
    if (p.throttle < throttle) throttle = p.throttle;
    if (p.bidMultiplier < bidMultiplier) bidMultiplier = p.bidMultiplier;
  }
  return { throttle, bidMultiplier };
}

/** What the fail-safe needs to know of a plan. */
export interface FailSafePlan {
  readonly planId: string;
  readonly mode: PacingMode;
  readonly budgetMicros: number;
  readonly day: DayWindow;
}

/** Throttle used while parameters are stale or missing: bid on half the requests. */
export const FAIL_SAFE_THROTTLE = 0.5;

/**
 * Parameters to use when the published ones are stale or missing: the linear E(t) of the day
 * (the budget guard then caps at the linear curve) and a conservative throttle of
 * {@link FAIL_SAFE_THROTTLE} with multiplier 1 — spend continues, slower, until the pacer is back.
 */
export function failSafeParams(plan: FailSafePlan, _nowMs: number): PlanPacingParams {
  return {
    planId: plan.planId,
    day: plan.day.day,
    budgetMicros: plan.budgetMicros,
    mode: plan.mode,
    throttle: FAIL_SAFE_THROTTLE,
    bidMultiplier: 1,
    // Linear even for asap plans: without a pacer, spread rather than burst.
    curve: linearCurve(plan.day, plan.budgetMicros, 'even'),
  };
}
