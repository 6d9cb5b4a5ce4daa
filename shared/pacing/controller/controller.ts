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
import { PacelineError } from '../../errors.js';
import { countedInFlight } from '../../spend/release.js';
import { type PacingMode, type PacingModeSpec, pacingModeOf } from '../modes.js';
import { type CurvePoints, evaluateCurve, type PlanPacingParams } from '../types.js';
import { actuatorsOf, lowestPressure } from './actuators.js';
import type { PacingController, PlanStep, PlanTickInput } from './api.js';
import { type PacingControllerConfig, resolveControllerConfig } from './config.js';
import { curveSlope, flatCurve } from './curve.js';
import { type DaySlots, daySlots, previousDay, slotAt, slotsOfDay } from './day-slots.js';
import {
  COVER_UNITS,
  type DayProfile,
  dayProfile,
  decodeForecast,
  EMPTY_FORECAST,
  encodeForecast,
  isPriorOnly,
  quantiseLevel,
  type SlotObservation,
  type TrafficForecast,
  withObservation,
} from './forecast.js';
import { ForecastPriors, ownObservations, seedPrior } from './prior.js';
import {
  BLANK_STATE,
  type ControllerState,
  decodeState,
  encodeState,
  GAIN_SCALE,
  PRESSURE_SCALE,
  StateRecord,
} from './state.js';

const HOUR_MS = 3_600_000;

/** What the controller keeps beside a state (never stored: rebuilt from state + forecast). */
interface Memo {
  /** The forecast object the profile was computed from. */
  forecast: TrafficForecast;
  readonly slots: DaySlots;
  readonly curve: CurvePoints;
  readonly profile: DayProfile | undefined;
}

/** The controller with its resolved settings. */
export interface PaceController extends PacingController<ControllerState, TrafficForecast> {
  readonly config: PacingControllerConfig;
}

/** A mutable working copy of the state during one step. */
type Draft = { -readonly [K in keyof ControllerState]: ControllerState[K] };

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

function pendingOf(s: ControllerState): SlotObservation | undefined {
  if (s.pendSlot < 0) return undefined;
  return {
    day: s.pendPrevDay ? previousDay(s.day) : s.day,
    slot: s.pendSlot,
    level: s.pendLevel,
    cover: s.pendCover,
  };
}

/** Thrown for a tick input that cannot be paced; the message names the field and the fix. */
export class PacingInputError extends PacelineError {
  override readonly name = 'PacingInputError';
  override readonly code = 'pacing.input';
}

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

/** Creates the controller. */
export function createPacingController(overrides: Partial<PacingControllerConfig> = {}): PaceController {
  const cfg = resolveControllerConfig(overrides);
  const uMin = lowestPressure(cfg);
  const uMinQ = Math.ceil(uMin * PRESSURE_SCALE);
  const ticksPerHour = Math.max(1, Math.round(HOUR_MS / cfg.tickMs));

  const quantP = (u: number) => {
    const q = Math.max(uMinQ, Math.min(0, Math.round(u * PRESSURE_SCALE)));
    return q === 0 ? 0 : q; // never −0: the state must survive its text form exactly
  };

  /** The observation of a closed slot, if enough of it was seen. */
  function observation(s: Draft | ControllerState, slots: DaySlots): SlotObservation | undefined {
    if (s.accSlot < 0 || s.accSlot >= slots.hours.length) return undefined;
    const lenSec = ((slots.knots[s.accSlot + 1] as number) - (slots.knots[s.accSlot] as number)) / 1000;
    if (s.accSeconds < cfg.minCoverage * lenSec || s.accGain <= 0) return undefined;
    const perHour = (Math.max(0, s.accSpend) / (s.accGain / GAIN_SCALE)) * 3600;
    return {
      day: slots.day,
      slot: s.accSlot,
      level: quantiseLevel(perHour),
      cover: Math.min(COVER_UNITS, Math.round((COVER_UNITS * s.accSeconds) / lenSec)),
    };
  }

  /** The memo of an anchored curve: the curve of the state's mode (modes.ts, `curve`). */
  function anchoredMemo(
    f: TrafficForecast,
    slots: DaySlots,
    s: Pick<ControllerState, 'mode' | 'anchorSec' | 'anchorMicros' | 'budgetMicros'>,
    profile: DayProfile | undefined,
  ): Memo {
    const curve = pacingModeOf(s.mode).curve({
      slots,
      weights: profile?.weights,
      fromMs: Math.max(s.anchorSec * 1000, slots.startMs),
      anchorMicros: s.anchorMicros,
      budgetMicros: s.budgetMicros,
    });
    return { forecast: f, slots, curve, profile };
  }

  /** Pressure to start a plan-day with: from the forecast's demand level if it has one. */
  function initialIntegral(
    profile: DayProfile | undefined,
    slots: DaySlots,
    fromMs: number,
    need: number,
    prev: ControllerState | undefined,
  ): number {
    const demand = profile?.demand;
    if (demand && need > 0) {
      let rest = 0;
      const a = slotAt(slots, fromMs);
      for (let k = a; k < demand.length; k++) {
        const k0 = slots.knots[k] as number;
        const k1 = slots.knots[k + 1] as number;
        rest += ((demand[k] as number) * (k1 - Math.max(k0, fromMs))) / (k1 - k0);
      }
      if (rest > 0) return Math.log(need / rest);
    }
    if (prev) return prev.integral / PRESSURE_SCALE;
    return cfg.initialPressure;
  }

  /**
   * The memo of a state (its curve), rebuilt from the forecast after a decode or when a different
   * forecast object is passed in; undefined when that forecast no longer gives the state's shape.
   */
  function memoOf(s: ControllerState, f: TrafficForecast, tz: string, day: DayWindow): Memo | undefined {
    const hit = StateRecord.memoOf(s) as Memo | undefined;
    if (hit && hit.forecast === f && hit.slots.startMs === day.startMs) return hit;
    const slots = hit && hit.slots.startMs === day.startMs ? hit.slots : daySlots(tz, day);
    if (!pacingModeOf(s.mode).shaped) {
      if (hit) {
        hit.forecast = f;
        return hit;
      }
      return anchoredMemo(f, slots, s, undefined);
    }
    const profile = dayProfile(f, pendingOf(s), tz, slots, cfg);
    if (profile.hash !== s.shape) return undefined;
    if (hit) {
      hit.forecast = f;
      return hit;
    }
    return anchoredMemo(f, slots, s, profile);
  }

  function paramsOf(
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

  /** Re-anchors `s` at (now, value) with `profile`'s shape; returns the new memo. */
  function reanchor(
    s: Draft,
    f: TrafficForecast,
    slots: DaySlots,
    nowSec: number,
    value: number,
    budget: number,
    mode: PacingModeSpec,
    profile: DayProfile | undefined,
  ): Memo {
    s.anchorSec = nowSec;
    s.anchorMicros = Math.max(0, Math.min(value, budget));
    s.budgetMicros = budget;
    s.mode = mode.id as PacingMode;
    s.shape = mode.shaped && profile ? profile.hash : 0;
    return anchoredMemo(f, slots, s, mode.shaped ? profile : undefined);
  }

  function step(
    input: PlanTickInput,
    prev: ControllerState | undefined,
    forecastIn: TrafficForecast | undefined,
  ): PlanStep<ControllerState, TrafficForecast> {
    const { plan, day, spend, nowMs } = input;
    checkInput(input);
    const tz = plan.timeZone;
    const budget = Math.max(0, Math.floor(input.budgetMicros ?? plan.dailyBudgetMicros));
    // The plan's mode (an UnknownPacingModeError for a mode of another version: the caller's
    // fail-safe, never another mode's curve).
    const mode = pacingModeOf(plan.pacingMode);
    const nowSec = Math.floor(nowMs / 1000);
    // Spend = confirmed + in flight. Leased float is budget handed to guards, not spend: counting
    // it would make C jump by a whole float at every grant (for small budgets a float is several
    // percent of the day) — the guard keeps counting it for the cap.
    // In flight that no notice is expected to resolve (exchanges without loss notices) counts as
    // the guards count it: released up to the same cap (docs/spend.md).
    const read =
      spend.confirmedMicros +
      countedInFlight(spend.inFlightMicros, spend.releasableMicros ?? 0, cfg.releaseCap * budget);
    const unusable = !(Number.isFinite(read) && read >= 0 && spend.leasedMicros >= 0);
    const committed = unusable ? 0 : read;
    const leased = unusable ? 0 : spend.leasedMicros;
    let f = forecastIn ?? EMPTY_FORECAST;
    const sameDay = prev !== undefined && prev.day === day.day;

    // Counters unreadable mid-day (Redis reset, not yet rebuilt) or unusable (a corrupt field read
    // as NaN or negative), or a step older than the last one: publish the previous parameters
    // unchanged and keep the state.
    if (sameDay && ((!spend.initialised && prev.lastCommitted > 0) || unusable || nowSec < prev.lastSec)) {
      const held = memoOf(prev, f, tz, day);
      const curve =
        held?.curve ?? flatCurve(nowMs, day.endMs, Math.min(budget, Math.max(0, prev.lastExpected)));
      return { params: paramsOf(plan, day, prev, curve), state: prev, forecast: forecastIn };
    }

    let s: Draft;
    let memo: Memo;
    let pending: SlotObservation | undefined;
    let dtSec = 0;

    if (!sameDay) {
      // A new plan-day (or a fresh plan): close yesterday's last slot, anchor E at (now, spend).
      const slots = daySlots(tz, day);
      if (prev) {
        const yesterday = previousDay(day.day);
        let older = pendingOf(prev);
        const closed = prev.day === yesterday ? observation(prev, slotsOfDay(tz, prev.day)) : undefined;
        // The state carries at most one pending observation, of today or yesterday: anything else
        // goes into the forecast now (rare: only after skipped ticks or days).
        if (older && (closed || older.day < yesterday)) {
          f = withObservation(f, older, tz, cfg);
          older = undefined;
        }
        pending = closed ?? older;
      }
      let profile = mode.shaped ? dayProfile(f, pending, tz, slots, cfg) : undefined;
      if (
        profile &&
        (profile.demand === undefined || (isPriorOnly(f) && !ownObservations(f, pending, day.day)))
      ) {
        // No level of its own (a new plan, or one that has learned nothing yet): every plan-day
        // starts from a prior — the shape and level other plans learned, else the built-in shape
        // at the level the initial pressure implies — stored as the plan's forecast.
        const seeded = seedPrior(f, input.prior?.(plan, nowMs), budget, cfg);
        if (seeded) {
          f = seeded;
          profile = dayProfile(f, pending, tz, slots, cfg);
        }
      }
      s = new StateRecord(BLANK_STATE) as Draft;
      s.day = day.day;
      s.mode = plan.pacingMode;
      s.budgetMicros = budget;
      s.lastSec = nowSec;
      s.lastCommitted = committed;
      s.leasedAvg = Math.max(0, leased);
      s.accSlot = slotAt(slots, nowMs);
      memo = reanchor(s, f, slots, nowSec, committed, budget, mode, profile);
      const need = budget - s.anchorMicros;
      s.integral = quantP(mode.paced ? initialIntegral(profile, slots, nowMs, need, prev) : 0);
      s.pressure = s.integral;
    } else {
      s = new StateRecord(prev) as Draft;
      pending = pendingOf(prev);
      dtSec = nowSec - prev.lastSec;
      const held = memoOf(prev, f, tz, day);
      if (!held) {
        // The forecast this curve was built from is gone: rebuild the shape from the forecast we
        // have, through E's last value, so E continues without a jump.
        const slots = daySlots(tz, day);
        memo = reanchor(
          s,
          f,
          slots,
          nowSec,
          prev.lastExpected,
          budget,
          mode,
          dayProfile(f, pending, tz, slots, cfg),
        );
      } else if (budget !== prev.budgetMicros || plan.pacingMode !== prev.mode) {
        // Budget or mode changed: keep E(now) (a cut below it stops at the new budget) and spread
        // what is left of the new budget over the rest of the day by the same profile. Switching
        // from a mode that does not steer (ASAP: its curve is only a ceiling), E(now) is the spend
        // so far.
        const eNow = pacingModeOf(prev.mode).paced ? evaluateCurve(held.curve, nowMs) : committed;
        const profile = mode.shaped
          ? (held.profile ?? dayProfile(f, pending, tz, held.slots, cfg))
          : undefined;
        // Demand is what the market offered, whatever the budget: learning goes on.
        memo = reanchor(s, f, held.slots, nowSec, eNow, budget, mode, profile);
      } else {
        memo = held;
      }
    }

    const { curve, slots } = memo;
    const expected = evaluateCurve(curve, nowMs);
    const slope = curveSlope(curve, nowMs);
    const remainMs = day.endMs - nowMs;
    const marginMicros = slope * cfg.marginMs * Math.min(1, remainMs / cfg.endRampMs);

    // ---- learning: this interval's spend against the gain that was applied during it ----------
    if (sameDay) {
      // The guard may have refused bids when spend plus the guards' floats came within half the
      // margin of E (the controller keeps them a margin below): such an interval measures the
      // cap, not the demand.
      const band = 0.5 * marginMicros + prev.leasedAvg;
      const capped = mode.paced
        ? prev.lastExpected - prev.lastCommitted < band || expected - committed < band
        : budget - committed < 0.01 * budget;
      const learn = dtSec > 0 && dtSec * 1000 <= cfg.maxGapMs;
      if (learn && !capped && spend.initialised) {
        s.accSpend += committed - prev.lastCommitted;
        s.accGain += Math.round(Math.exp(prev.pressure / PRESSURE_SCALE) * dtSec * GAIN_SCALE);
        s.accSeconds += dtSec;
      }
      const slotNow = slotAt(slots, nowMs);
      if (slotNow !== s.accSlot) {
        const closed = observation(s, slots);
        if (closed) {
          if (pending) f = withObservation(f, pending, tz, cfg);
          pending = closed;
        }
        s.accSlot = slotNow;
        s.accSpend = 0;
        s.accGain = 0;
        s.accSeconds = 0;
      }
    }

    if (sameDay && dtSec > 0) {
      const a = Math.min(1, (dtSec * 1000) / cfg.leaseSmoothingMs);
      s.leasedAvg = Math.max(0, Math.round(s.leasedAvg + a * (leased - s.leasedAvg)));
    }

    // ---- control --------------------------------------------------------------------------------
    if (!mode.paced) {
      s.integral = 0;
      s.pressure = 0;
    } else {
      const anchorMs = curve.atMs[0] as number;
      const avgRate = (budget - s.anchorMicros) / Math.max(cfg.tickMs, day.endMs - anchorMs);
      const rate = Math.max(slope, 0.25 * avgRate, 1e-9);
      const horizon = Math.max(cfg.tickMs, Math.min(cfg.horizonMs, remainMs));
      // Never aim below the anchor: right after (re-)anchoring E has not grown yet.
      const setpoint = expected - Math.min(marginMicros, expected - s.anchorMicros);
      // The guard caps confirmed + in flight + leased at E: aim so that this sum, with the float
      // the guards typically hold (smoothed: a grant is a jump of a whole float), stays below E.
      // Over the end ramp that allowance goes too, so the guards' floats are spent before midnight.
      const floats = s.leasedAvg * Math.min(1, remainMs / cfg.endRampMs);
      const raw = (setpoint - committed - floats) / (rate * horizon);
      // Behind: clamped at +errorClamp. Ahead: the proportional term goes down to −aheadClamp (a
      // plan far ahead stops almost at once). The integral takes at most −errorClamp, and nothing
      // while the plan is further ahead than that but E(t) gained on its spend over the last
      // interval: the pressure already closes the gap, and being ahead after a burst says little
      // about the pressure the plan needs once E(t) has caught up.
      const e = Math.max(-cfg.aheadClamp, Math.min(cfg.errorClamp, raw));
      const closing = sameDay && committed - prev.lastCommitted < expected - prev.lastExpected;
      const eI = e >= -cfg.errorClamp ? e : closing ? 0 : -cfg.errorClamp;
      const i0 = s.integral / PRESSURE_SCALE;
      // A spent budget says nothing about the market: hold the integral (no wind-down either),
      // so tomorrow can start from it.
      const spent = budget - committed <= 0.001 * budget;
      const dt = spent ? 0 : Math.min(dtSec * 1000, cfg.maxGapMs);
      let i = i0 + (cfg.ki * eI * dt) / cfg.horizonMs;
      // At the guards' cap at this tick and the one before (outside the end ramp, and once E has
      // grown a margin past its anchor: right after midnight the first floats are all of E): the
      // demand above the cap does not show in the error, so step the integral down until it does.
      // At the cap means that spend and the floats the guards hold are within half the margin of E
      // (the guards cap their sum at E): this tick with the floats held now, the one before with
      // their smoothed level. Further ahead the error itself is negative and already acts.
      if (sameDay && dt > 0 && remainMs > cfg.endRampMs && expected - s.anchorMicros > marginMicros) {
        const half = 0.5 * marginMicros;
        const atCap = (gap: number) => gap < half && gap > -half;
        if (
          atCap(expected - committed - leased) &&
          atCap(prev.lastExpected - prev.lastCommitted - prev.leasedAvg)
        )
          i -= (cfg.capStep * dt) / cfg.tickMs;
      }
      i = Math.max(uMin, Math.min(0, i));
      const u = i + cfg.kp * e;
      // Conditional integration: while the output is pinned at a limit and the error pushes
      // further into it, the integral does not move (no windup).
      if ((u >= 0 && e > 0) || (u <= uMin && e < 0)) i = Math.max(uMin, Math.min(0, i0));
      s.integral = quantP(i);
      s.pressure = quantP(i + cfg.kp * e);
    }

    // ---- forecast writes, spread over the hour ---------------------------------------------------
    if (pending && Math.floor(nowMs / cfg.tickMs) % ticksPerHour === seedOf(plan) % ticksPerHour) {
      f = withObservation(f, pending, tz, cfg);
      pending = undefined;
    }
    s.pendSlot = pending ? pending.slot : -1;
    s.pendPrevDay = pending ? pending.day < s.day : false;
    s.pendLevel = pending ? pending.level : 0;
    s.pendCover = pending ? pending.cover : 0;
    s.lastSec = nowSec;
    s.lastCommitted = committed;
    s.lastExpected = expected;
    memo.forecast = f;

    const state = new StateRecord(s, memo);
    const forecast = f === EMPTY_FORECAST && forecastIn === undefined ? undefined : f;
    return { params: paramsOf(plan, day, state, curve), state, forecast };
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
