/**
 * Pacing target curves: E(t), the spend a plan may have reached by time t of its day. The guard
 * leases only from the allowance R(t) = E(t) − C(t) (C = confirmed + weight × in-flight), so a
 * transient overshoot of the curve is paid back by pausing (seed write-up, "方案二").
 *
 * A curve is a pure function of (plan, day, now). The default is the plan's mode's
 * (shared/pacing/modes.ts): linear over the local day (`even`), the whole budget at once
 * (`asap`). The pacer's published parameters plug in as another {@link TargetCurve} (e.g. a
 * traffic-shaped curve or a throttle factor) without touching the guard.
 */
import { planDefaultExpected } from '../pacing/curve-windows.js';
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
export { linearExpected } from '../pacing/controller/curve.js';

/**
 * The default curve: each mode's default E(t) (shared/pacing/modes.ts): linear for `even` plans,
 * the whole budget for `asap` plans; linear for a mode this process does not know; for a dayparted
 * plan that curve restricted to its windows (shared/pacing/curve-windows.ts).
 */
export const defaultCurve: TargetCurve = {
  expectedMicros(plan, day, nowMs) {
    return planDefaultExpected(plan, day, nowMs);
  },
};
