/**
 * The linear baseline controller: each plan's fail-safe curve (modes.ts) — E(t) linear over the
 * advertiser's local day for `even` plans (the seed's R(t) gate), the whole budget from the day's
 * start for `asap` plans — throttle 1 and bid multiplier 1, no feedback. It is the market simulator's "linear" baseline and the pacer's
 * controller until the real one lands; it implements the same {@link PacingController} interface,
 * so the pacer, the benchmark and the simulator swap controllers without other changes.
 *
 * Pure: a step depends only on its input. The whole-day curve of a (day, budget, mode) is built
 * once and returned as the same object every tick, so the publisher rewrites curve fields only
 * when the day, the budget or the mode changes.
 */
import type { DayWindow } from '../../budget/time-zone.js';
import { planFailSafeCurve } from '../curve-windows.js';
import { type PacingMode, pacingModeOf } from '../modes.js';
import type { CurvePoints, PlanPacingParams } from '../types.js';
import type { PacingController, PlanStep, PlanTickInput } from './api.js';

/** State of the linear controller: the day it last paced (it keeps nothing else). */
export interface LinearState {
  readonly day: string;
}

/**
 * The whole-day E(t) of a plan: its mode's fail-safe curve (modes.ts) — linear for `even`, the
 * whole budget for `asap`. Throws `UnknownPacingModeError` for a mode this process does not know.
 */
export function linearCurve(day: DayWindow, budgetMicros: number, mode: PacingMode): CurvePoints {
  return pacingModeOf(mode).failSafeCurve(day, budgetMicros);
}

/** Options of {@link createLinearController}. */
export interface LinearControllerOptions {
  /** Curves kept for reuse (one per live plan-day). @default 1_000_000 */
  readonly maxCachedCurves?: number;
}

/** Creates the linear baseline controller. */
export function createLinearController(
  options: LinearControllerOptions = {},
): PacingController<LinearState, never> {
  const maxCurves = options.maxCachedCurves ?? 1_000_000;
  const curves = new Map<string, CurvePoints>();
  const curveOf = (day: DayWindow, budget: number, mode: PacingMode): CurvePoints => {
    const key = `${day.startMs}|${day.endMs}|${budget}|${mode}`;
    let curve = curves.get(key);
    if (!curve) {
      // A memo, not state: dropping it only costs a rewrite of the curve fields.
      if (curves.size >= maxCurves) curves.clear();
      curve = linearCurve(day, budget, mode);
      curves.set(key, curve);
    }
    return curve;
  };
  return {
    name: 'linear',
    step(input: PlanTickInput): PlanStep<LinearState, never> {
      const { plan, day } = input;
      const budget = input.budgetMicros ?? plan.dailyBudgetMicros;
      const curve =
        plan.daypart || plan.curve
          ? planFailSafeCurve(plan, day, budget)
          : curveOf(day, budget, plan.pacingMode);
      const params: PlanPacingParams = {
        planId: plan.planId,
        day: day.day,
        budgetMicros: budget,
        mode: plan.pacingMode,
        throttle: 1,
        bidMultiplier: 1,
        curve,
      };
      return { params, state: { day: day.day }, forecast: undefined };
    },
    encodeState: (state) => state.day,
    decodeState: (raw) => (/^\d{4}-\d{2}-\d{2}$/.test(raw) ? { day: raw } : undefined),
    encodeForecast: () => '',
    decodeForecast: () => undefined,
  };
}
