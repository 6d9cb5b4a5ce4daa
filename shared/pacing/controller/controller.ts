/**
 * The pacing controller (docs/pacing.md, "Controller"): per plan and tick, from the live spend
 * and the previous state, the target curve E(t), a throttle and a bid multiplier.
 *
 * - E(t) is shaped by the plan's traffic forecast (forecast.ts) and anchored once per plan-day;
 *   it is re-anchored only when the budget or the mode changes, or when the forecast the curve was
 *   built from is gone (then through E's last value, so E never jumps).
 * - A PI controller on the position error — setpoint E(t) minus a small margin, against spend
 *   C = confirmed + in flight plus the float the guards typically hold (the guard caps all three
 *   at E) — normalised by the planned spend over a horizon, drives one log-pressure u that is
 *   split into bid shading first and throttling second (actuators.ts). Anti-windup: conditional
 *   integration and a clamped integral, so a plan that cannot spend resumes smoothly once it can.
 * - Catch-up: the curve is anchored, so spend missed earlier stays a positive error until it is
 *   made up; over the last hour the margin and the float allowance go and the horizon shrinks with
 *   the time left, so any shortfall drives the plan to full speed (the guard still caps every bid).
 * - Modes (shared/pacing/modes.ts): E(t) is the plan's mode's curve function; a mode that is not
 *   `paced` (ASAP) holds no pressure (throttle 1, multiplier 1) and only a `shaped` one gets the
 *   traffic profile. Nothing here branches on a mode's id.
 *
 * Pure: no clock, no I/O, no randomness. The curve is memoised on the state object (a private
 * field, never encoded), so an unchanged curve is returned as the identical object.
 */
import type { ResolvedPlan } from '../../budget/model.js';
import type { DayWindow } from '../../budget/time-zone.js';
import { errorKind } from '../../errors.js';
import { type CurvePoints, evaluateCurve, type PlanPacingParams } from '../types.js';
import { actuatorsOf } from './actuators.js';
import type { PacingController, PlanStep, PlanTickInput } from './api.js';
import { type PacingControllerConfig, resolveControllerConfig } from './config.js';
import { curveSlope, flatCurve } from './curve.js';
import { continueDay, startDay } from './day-anchor.js';
import { EMPTY_FORECAST, type TrafficForecast, withObservation } from './forecast.js';
import { decodeForecast, encodeForecast } from './forecast-codec.js';
import { learn } from './learning.js';
import { memoOf } from './memo.js';
import { steerPressure } from './pressure.js';
import { ForecastPriors } from './prior.js';
import { type ControllerState, decodeState, encodeState, PRESSURE_SCALE, StateRecord } from './state.js';
import { type Position, readTick, type Tick, type Tuning, tuningOf, type Working } from './step-parts.js';

/** The controller with its resolved settings. */
export interface PaceController extends PacingController<ControllerState, TrafficForecast> {
  readonly config: PacingControllerConfig;
}

const seeds = new WeakMap<ResolvedPlan, number>();

/** A stable per-plan tick offset, so forecast writes spread over the hour instead of one tick. */
function seedOf(plan: ResolvedPlan): number {
  let s = seeds.get(plan);
  if (s === undefined) {
    let h = 0x811c9dc5;
    const key = `${plan.scope}/${plan.planId}`;
    for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
    s = h >>> 0;
    seeds.set(plan, s);
  }
  return s;
}

/** Thrown for a tick input that cannot be paced; the message names the field and the fix. */
export class PacingInputError extends errorKind('PacingInputError', 'pacing.input') {}

function checkInput(input: PlanTickInput): void {
  const { day, nowMs, plan } = input;
  if (!Number.isFinite(nowMs) || nowMs < day.startMs || nowMs >= day.endMs) {
    throw new PacingInputError(
      `nowMs ${nowMs} is outside the plan-day ${day.day} [${day.startMs}, ${day.endMs}): pass dayWindow(nowMs, plan.timeZone).`,
    );
  }
  const budget = input.budgetMicros ?? plan.dailyBudgetMicros;
  if (!(Number.isFinite(budget) && budget >= 0)) {
    throw new PacingInputError(
      `budgetMicros ${budget} of plan ${plan.scope}/${plan.planId} is not a budget: give micros ≥ 0.`,
    );
  }
}

function paramsOf(
  cfg: PacingControllerConfig,
  plan: ResolvedPlan,
  day: DayWindow,
  s: ControllerState,
  curve: CurvePoints,
): PlanPacingParams {
  const a = actuatorsOf(s.pressure / PRESSURE_SCALE, cfg);
  return {
    planId: plan.planId,
    day: day.day,
    budgetMicros: s.budgetMicros,
    mode: s.mode,
    throttle: a.throttle,
    bidMultiplier: a.bidMultiplier,
    curve,
  };
}

/**
 * Counters unreadable mid-day (Redis reset, not yet rebuilt) or unusable (a corrupt field read as
 * NaN or negative), or a step older than the last one: the step publishes the previous parameters
 * unchanged and keeps the state.
 */
function mustHold(tick: Tick, same: ControllerState): boolean {
  return (
    (!tick.input.spend.initialised && same.lastCommitted > 0) || tick.unusable || tick.nowSec < same.lastSec
  );
}

/** The previous parameters and state, unchanged (see {@link mustHold}). */
function hold(
  t: Tuning,
  tick: Tick,
  prev: ControllerState,
  forecastIn: TrafficForecast | undefined,
): PlanStep<ControllerState, TrafficForecast> {
  const { day, nowMs, budget } = tick;
  const held = memoOf(t.cfg, prev, forecastIn ?? EMPTY_FORECAST, tick.tz, day, tick.shape);
  const curve = held?.curve ?? flatCurve(nowMs, day.endMs, Math.min(budget, Math.max(0, prev.lastExpected)));
  return { params: paramsOf(t.cfg, tick.plan, day, prev, curve), state: prev, forecast: forecastIn };
}

/** Where the plan stands on its curve now. */
function positionOf(t: Tuning, tick: Tick, curve: CurvePoints): Position {
  const { nowMs } = tick;
  const slope = curveSlope(curve, nowMs);
  const remainMs = tick.day.endMs - nowMs;
  return {
    expected: evaluateCurve(curve, nowMs),
    slope,
    remainMs,
    marginMicros: slope * t.cfg.marginMs * Math.min(1, remainMs / t.cfg.endRampMs),
  };
}

/**
 * The step's end: a pending observation goes into the forecast at the plan's tick of the hour
 * (writes spread over the hour), the rest stays in the state with this tick's readings.
 */
function settle(
  t: Tuning,
  tick: Tick,
  w: Working,
  at: Position,
  forecastIn: TrafficForecast | undefined,
): PlanStep<ControllerState, TrafficForecast> {
  const { s, memo } = w;
  const { nowMs } = tick;
  if (w.pending && Math.floor(nowMs / t.cfg.tickMs) % t.ticksPerHour === seedOf(tick.plan) % t.ticksPerHour) {
    w.f = withObservation(w.f, w.pending, tick.tz, t.cfg);
    w.pending = undefined;
  }
  const pending = w.pending;
  s.pendSlot = pending ? pending.slot : -1;
  s.pendPrevDay = pending ? pending.day < s.day : false;
  s.pendLevel = pending ? pending.level : 0;
  s.pendCover = pending ? pending.cover : 0;
  s.lastSec = tick.nowSec;
  s.lastCommitted = tick.committed;
  s.lastExpected = at.expected;
  memo.forecast = w.f;
  const state = new StateRecord(s, memo);
  const forecast = w.f === EMPTY_FORECAST && forecastIn === undefined ? undefined : w.f;
  return { params: paramsOf(t.cfg, tick.plan, tick.day, state, memo.curve), state, forecast };
}

/** Creates the controller. */
export function createPacingController(overrides: Partial<PacingControllerConfig> = {}): PaceController {
  const cfg = resolveControllerConfig(overrides);
  const t = tuningOf(cfg);

  function step(
    input: PlanTickInput,
    prev: ControllerState | undefined,
    forecastIn: TrafficForecast | undefined,
  ): PlanStep<ControllerState, TrafficForecast> {
    checkInput(input);
    const same = prev !== undefined && prev.day === input.day.day ? prev : undefined;
    const tick = readTick(input, cfg, same?.lastExpected);
    if (same && mustHold(tick, same)) return hold(t, tick, same, forecastIn);
    const f = forecastIn ?? EMPTY_FORECAST;
    const w = same ? continueDay(t, tick, same, f) : startDay(t, tick, prev, f);
    const at = positionOf(t, tick, w.memo.curve);
    if (same) learn(t, tick, same, w, at);
    // Outside a dayparted plan's windows the guard refuses every bid: the error says nothing
    // about the market, so the integral holds until a window opens.
    steerPressure(t, tick, same, w.s, w.memo.curve.atMs[0] as number, at, tick.windowOpen ? w.dtSec : 0);
    return settle(t, tick, w, at, forecastIn);
  }

  return {
    name: 'paceline',
    config: cfg,
    step,
    createPriorBook: () => new ForecastPriors(),
    encodeState,
    decodeState,
    encodeForecast,
    decodeForecast,
  };
}
