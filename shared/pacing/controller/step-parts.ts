/**
 * What the controller's step (controller.ts) hands between its named parts: the settings with
 * their derived constants, one tick's reading of its input, and the working copy of the state.
 * Nothing here is stored: states and forecasts keep their own codecs (state.ts, forecast.ts).
 */

import { type DayWindows, isOpenAt, planDayWindows } from '../../budget/daypart.js';
import type { ResolvedPlan } from '../../budget/model.js';
import { planCurveHash, planCurveQuarterWeights } from '../../budget/plan-curve.js';
import type { DayWindow } from '../../budget/time-zone.js';
import { countedInFlight, releaseCapMicros } from '../../spend/release.js';
import { type PacingModeSpec, pacingModeOf } from '../modes.js';
import type { CurvePoints } from '../types.js';
import { lowestPressure } from './actuators.js';
import type { PlanTickInput } from './api.js';
import type { PacingControllerConfig } from './config.js';
import type { DaySlots } from './day-slots.js';
import type { DayProfile, SlotObservation, TrafficForecast } from './forecast.js';
import { type ControllerState, PRESSURE_SCALE } from './state.js';

const HOUR_MS = 3_600_000;

/** The resolved settings and the constants derived from them once per controller. */
export interface Tuning {
  readonly cfg: PacingControllerConfig;
  /** The lowest log-pressure the actuators can express. */
  readonly uMin: number;
  /** {@link uMin} in the state's fixed point, rounded towards zero. */
  readonly uMinQ: number;
  readonly ticksPerHour: number;
}

/** The tuning of `cfg`. */
export function tuningOf(cfg: PacingControllerConfig): Tuning {
  const uMin = lowestPressure(cfg);
  return {
    cfg,
    uMin,
    uMinQ: Math.ceil(uMin * PRESSURE_SCALE),
    ticksPerHour: Math.max(1, Math.round(HOUR_MS / cfg.tickMs)),
  };
}

/** A pressure in the state's fixed point, within [uMin, 0]. */
export function quantP(t: Tuning, u: number): number {
  const q = Math.max(t.uMinQ, Math.min(0, Math.round(u * PRESSURE_SCALE)));
  return q === 0 ? 0 : q; // never −0: the state must survive its text form exactly
}

/** What the controller keeps beside a state (never stored: rebuilt from state + forecast). */
export interface Memo {
  /** The forecast object the profile was computed from. */
  forecast: TrafficForecast;
  readonly slots: DaySlots;
  readonly curve: CurvePoints;
  readonly profile: DayProfile | undefined;
  /** {@link PlanShape.hash} of the plan the curve was built for (a change re-checks the shape). */
  readonly shapeHash: number;
}

/** A mutable working copy of the state during one step. */
export type Draft = { -readonly [K in keyof ControllerState]: ControllerState[K] };

/** One tick's input as the step reads it. */
export interface Tick {
  readonly input: PlanTickInput;
  readonly plan: ResolvedPlan;
  readonly day: DayWindow;
  readonly tz: string;
  readonly nowMs: number;
  readonly nowSec: number;
  /** The budget to pace, micros ≥ 0 (a whole number). */
  readonly budget: number;
  /** The plan's mode (an UnknownPacingModeError for a mode of another version, thrown here). */
  readonly mode: PacingModeSpec;
  /** A dayparted plan's windows on this day (undefined: it may spend all day). */
  readonly windows: DayWindows | undefined;
  /** False while a dayparted plan's windows are closed at `nowMs` (the guard refuses its bids). */
  readonly windowOpen: boolean;
  /** What of the plan itself shapes its curve: its windows and its own curve (mode `curve`). */
  readonly shape: PlanShape;
  /** Spend C = confirmed + counted in flight (0 when unusable). */
  readonly committed: number;
  /** Float the guards hold now (0 when unusable). */
  readonly leased: number;
  /** The spend read is corrupt (NaN or negative): the step holds the previous parameters. */
  readonly unusable: boolean;
}

/** Reads one tick's input (checked by the caller). */
export function readTick(
  input: PlanTickInput,
  cfg: PacingControllerConfig,
  expectedMicros: number | undefined,
): Tick {
  const { plan, day, spend, nowMs } = input;
  const budget = Math.max(0, Math.floor(input.budgetMicros ?? plan.dailyBudgetMicros));
  // Spend = confirmed + in flight. Leased float is budget handed to guards, not spend: counting
  // it would make C jump by a whole float at every grant (for small budgets a float is several
  // percent of the day) — the guard keeps counting it for the cap.
  // In flight that no notice is expected to resolve (exchanges without loss notices) counts as
  // the guards count it: released up to the same cap (docs/spend.md), the headroom over E taken
  // at the previous step's E (none on a plan-day's first step: its in-flight is counted whole).
  const cap = releaseCapMicros(budget, expectedMicros ?? budget, cfg.releaseCap, cfg.releaseHeadroom);
  const read =
    spend.confirmedMicros + countedInFlight(spend.inFlightMicros, spend.releasableMicros ?? 0, cap);
  const unusable = !(Number.isFinite(read) && read >= 0 && spend.leasedMicros >= 0);
  const windows = planDayWindows(plan, day);
  return {
    input,
    plan,
    day,
    tz: plan.timeZone,
    nowMs,
    nowSec: Math.floor(nowMs / 1000),
    budget,
    mode: pacingModeOf(plan.pacingMode),
    windows,
    windowOpen: windows === undefined || isOpenAt(windows, nowMs),
    shape: planShapeOf(plan, day, windows),
    committed: unusable ? 0 : read,
    leased: unusable ? 0 : spend.leasedMicros,
    unusable,
  };
}

/**
 * What of a plan shapes its curve besides the forecast: its windows (dayparting) and its own
 * curve's quarter-hour weights (mode `curve`), zero outside the windows; `hash` their fingerprint
 * (24 bits, 0 when there is neither), kept in the state of a mode the forecast does not shape.
 */
export interface PlanShape {
  readonly windows: DayWindows | undefined;
  readonly quarters: Float64Array | undefined;
  readonly hash: number;
}

const NO_SHAPE: PlanShape = { windows: undefined, quarters: undefined, hash: 0 };
const shapes = new WeakMap<object, { startMs: number; shape: PlanShape }>();

/** The {@link PlanShape} of `plan` on `day` (memoised per plan object and day). */
export function planShapeOf(plan: ResolvedPlan, day: DayWindow, windows: DayWindows | undefined): PlanShape {
  if (!windows && !plan.curve) return NO_SHAPE;
  const hit = shapes.get(plan);
  if (hit && hit.startMs === day.startMs) return hit.shape;
  let quarters: Float64Array | undefined;
  if (plan.curve) {
    quarters = planCurveQuarterWeights(plan.curve, plan.timeZone, day);
    if (windows) {
      quarters = quarters.map((w, q) => (isOpenAt(windows, day.startMs + q * 900_000) ? w : 0));
    }
  }
  const h = Math.imul((windows?.hash ?? 0) ^ (plan.curve ? planCurveHash(plan.curve) : 0), 0x01000193);
  const shape = { windows, quarters, hash: (h >>> 8) & 0xffffff || 1 };
  shapes.set(plan, { startMs: day.startMs, shape });
  return shape;
}

/** The step's working set once the day is anchored: state draft, curve memo, forecast. */
export interface Working {
  readonly s: Draft;
  readonly memo: Memo;
  f: TrafficForecast;
  /** The closed slot's observation not yet written into the forecast. */
  pending: SlotObservation | undefined;
  /** Seconds since the previous step (0 on a plan-day's first). */
  readonly dtSec: number;
}

/** Where the plan stands on its curve at this tick. */
export interface Position {
  /** E(now). */
  readonly expected: number;
  /** dE/dt now, micros per ms. */
  readonly slope: number;
  readonly remainMs: number;
  /** How far below E the controller aims (it shrinks to 0 over the end ramp). */
  readonly marginMicros: number;
}
