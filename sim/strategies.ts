/**
 * The simulator's strategies. Each is a {@link PacingController} run by the real pacer
 * (`ShardPacer`: fenced claim + publish), read by the real `PacingReader` and enforced by the real
 * `BudgetGuard` over `publishedCurve(reader)` — only the controller (and, for ASAP, the plans'
 * mode) differs, so a comparison on one seed compares pacing, not plumbing:
 *
 * - `paceline`: the production controller (traffic-shaped E(t), PI on throttle and bid shading);
 * - `asap`: every plan in `asap` mode with the linear baseline: E = budget from the day's first
 *   tick, throttle 1, multiplier 1 — the guard alone caps spend at the budget;
 * - `slots`: rtbkit-style fixed time slots: the day is cut into its hour slots and each slot's
 *   equal share of the budget becomes available at the slot's start (unspent allowance carries
 *   over, as rtbkit's banker top-ups accumulate); full speed until the slot's allowance is spent;
 * - `linear`: the linear R(t) = E(t) − C(t) gate alone (E linear in time, no throttle, no shading).
 */
import type { DayWindow } from '../shared/budget/time-zone.js';
import type { PacingController, PlanStep, PlanTickInput } from '../shared/pacing/controller/api.js';
import { daySlots } from '../shared/pacing/controller/day-slots.js';
import { createPacingController, type PacingControllerConfig } from '../shared/pacing/controller/index.js';
import { createLinearController, type LinearState } from '../shared/pacing/controller/linear.js';
import { pacingModeOf } from '../shared/pacing/modes.js';
import type { CurvePoints } from '../shared/pacing/types.js';

/** Strategy names, in report order. */
export const STRATEGIES = ['paceline', 'asap', 'slots', 'linear'] as const;

/** A strategy name. */
export type StrategyName = (typeof STRATEGIES)[number];

/** True for a known strategy name. */
export function isStrategy(s: string): s is StrategyName {
  return (STRATEGIES as readonly string[]).includes(s);
}

/**
 * E(t) of the slots strategy: at each hour slot's start the allowance steps up by budget / slots
 * (1 ms ramps: curve knots must be strictly increasing). A 23 or 25 h DST day has 23 or 25 slots.
 */
export function slotsCurve(timeZone: string, day: DayWindow, budgetMicros: number): CurvePoints {
  const knots = daySlots(timeZone, day).knots;
  const n = knots.length - 1;
  const atMs: number[] = [];
  const micros: number[] = [];
  for (let k = 0; k < n; k++) {
    const start = knots[k] as number;
    atMs.push(start, start + 1);
    micros.push(Math.floor((budgetMicros * k) / n), Math.floor((budgetMicros * (k + 1)) / n));
  }
  atMs.push(day.endMs);
  micros.push(budgetMicros);
  return { atMs, micros };
}

/**
 * The slots controller: the linear baseline (throttle 1, multiplier 1, state = the day) with the
 * slots curve for plans of a `paced` mode (`even`; ASAP plans keep the whole budget); the curve of a (zone, day, budget) is memoised and returned as the
 * identical object, so the publisher rewrites it only when it changes.
 */
export function createSlotsController(): PacingController<LinearState, never> {
  const linear = createLinearController();
  const curves = new Map<string, CurvePoints>();
  return {
    ...linear,
    name: 'slots',
    step(input: PlanTickInput): PlanStep<LinearState, never> {
      const r = linear.step(input, undefined, undefined);
      // A mode that does not steer (ASAP) keeps its ceiling; the others get the slots curve.
      if (!pacingModeOf(input.plan.pacingMode).paced) return r;
      const key = `${input.plan.timeZone}|${input.day.startMs}|${r.params.budgetMicros}`;
      let curve = curves.get(key);
      if (!curve) {
        if (curves.size >= 100_000) curves.clear();
        curve = slotsCurve(input.plan.timeZone, input.day, r.params.budgetMicros);
        curves.set(key, curve);
      }
      return { ...r, params: { ...r.params, curve } };
    },
  };
}

/** The controller a strategy runs in the pacer. */
export function controllerOf(
  strategy: StrategyName,
  paceline: Partial<PacingControllerConfig> = {},
): PacingController<unknown, unknown> {
  switch (strategy) {
    case 'paceline':
      return createPacingController(paceline) as PacingController<unknown, unknown>;
    case 'slots':
      return createSlotsController() as PacingController<unknown, unknown>;
    default:
      return createLinearController() as PacingController<unknown, unknown>;
  }
}
