/**
 * Pacing target curves: E(t), the spend a plan may have reached by time t of its day. The guard
 * leases only from the allowance R(t) = E(t) − C(t) (C = confirmed + weight × in-flight), so a
 * transient overshoot of the curve is paid back by pausing (seed write-up, "方案二").
 *
 * A curve is a pure function of (plan, day, now). Today: linear over the local day (`even`) and
 * the whole budget at once (`asap`). The pacer's published parameters plug in as another
 * {@link TargetCurve} (e.g. a traffic-shaped curve or a throttle factor) without touching the guard.
 */
import type { ResolvedPlan } from './model.js';
import type { DayWindow } from './time-zone.js';

/** E(t) for a plan. */
export interface TargetCurve {
  /** Expected (allowed) cumulative spend by `nowMs`, integer micros, never above the budget. */
  expectedMicros(plan: ResolvedPlan, day: DayWindow, nowMs: number): number;
  /**
   * Optional: makes the inputs of {@link expectedMicros} current before a lease (e.g. reads the
   * published curve of a campaign a local cache does not hold). The guard awaits it before every
   * lease call, so a curve backed by a cache never falls back for a mere cache miss.
   */
  prepare?(plan: ResolvedPlan, day: DayWindow, nowMs: number): Promise<void>;
}

/** E(t) = budget × elapsed / day length (the day may be 23, 24 or 25 hours). */
export function linearExpected(budgetMicros: number, day: DayWindow, nowMs: number): number {
  if (nowMs <= day.startMs) return 0;
  if (nowMs >= day.endMs) return budgetMicros;
  return Math.floor((budgetMicros * (nowMs - day.startMs)) / (day.endMs - day.startMs));
}

/** The default curve: linear for `even` plans, the whole budget for `asap` plans. */
export const defaultCurve: TargetCurve = {
  expectedMicros(plan, day, nowMs) {
    return plan.pacingMode === 'asap'
      ? plan.dailyBudgetMicros
      : linearExpected(plan.dailyBudgetMicros, day, nowMs);
  },
};
