/**
 * The budget guard's E(t) from published pacing parameters (DESIGN.md requirement 10: the hard
 * cap and the pacing follow the same curve). `lookup` returns the parameters an ad server holds
 * for a plan (e.g. from the PacingReader's cache); when they are missing or of another day, the
 * fallback curve applies (linear for even plans: the fail-safe).
 */
import type { ResolvedPlan } from '../../budget/model.js';
import { defaultCurve, type TargetCurve } from '../../budget/pacing.js';
import { evaluateCurve, type PlanPacingParams } from '../types.js';

/** A {@link TargetCurve} over published parameters, never above the plan's budget. */
export function publishedCurve(
  lookup: (plan: ResolvedPlan) => PlanPacingParams | undefined,
  fallback: TargetCurve = defaultCurve,
): TargetCurve {
  return {
    expectedMicros(plan, day, nowMs) {
      const p = lookup(plan);
      if (!p || p.day !== day.day) return fallback.expectedMicros(plan, day, nowMs);
      // A budget cut the pacer has not republished yet still caps at once.
      return Math.min(plan.dailyBudgetMicros, evaluateCurve(p.curve, nowMs));
    },
  };
}
