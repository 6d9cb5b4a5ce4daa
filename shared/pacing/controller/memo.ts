/**
 * The controller's curve memo (step-parts.ts, `Memo`): E(t) of a state, kept on the state object
 * and rebuilt from state + forecast after a decode, bit-identical; and the observations of closed
 * slots that feed the forecast.
 */
import type { DayWindow } from '../../budget/time-zone.js';
import { restrictCurve } from '../curve-windows.js';
import { type PacingMode, type PacingModeSpec, pacingModeOf } from '../modes.js';
import type { PacingControllerConfig } from './config.js';
import { type DaySlots, daySlots, previousDay } from './day-slots.js';
import { windowedProfile } from './day-windows.js';
import {
  COVER_UNITS,
  type DayProfile,
  dayProfile,
  quantiseLevel,
  type SlotObservation,
  type TrafficForecast,
} from './forecast.js';
import { type ControllerState, GAIN_SCALE, StateRecord } from './state.js';
import type { Draft, Memo, PlanShape } from './step-parts.js';

/** The observation a state carries for the forecast, if any. */
export function pendingOf(s: ControllerState): SlotObservation | undefined {
  if (s.pendSlot < 0) return undefined;
  return {
    day: s.pendPrevDay ? previousDay(s.day) : s.day,
    slot: s.pendSlot,
    level: s.pendLevel,
    cover: s.pendCover,
  };
}

/** The observation of a closed slot, if enough of it was seen. */
export function observation(
  cfg: PacingControllerConfig,
  s: Draft | ControllerState,
  slots: DaySlots,
): SlotObservation | undefined {
  if (s.accSlot < 0 || s.accSlot >= slots.hours.length) return undefined;
  const lenSec = ((slots.knots[s.accSlot + 1] as number) - (slots.knots[s.accSlot] as number)) / 1000;
  if (s.accSeconds < cfg.minCoverage * lenSec || s.accGain <= 0) return undefined;
  const perHour = (Math.max(0, s.accSpend) / (s.accGain / GAIN_SCALE)) * 3600;
  return {
    day: slots.day,
    slot: s.accSlot,
    level: quantiseLevel(perHour),
    cover: Math.max(
      1,
      Math.min(COVER_UNITS, Math.round(COVER_UNITS * (s.accSeconds / lenSec) * credibility(cfg, s))),
    ),
  };
}

/**
 * How far an hour's level can be trusted, from the ticks that saw new spend in it: n / (n + k),
 * k = `evidenceTicks`. The credibility weight of a mean of n draws against a prior worth k of them
 * (the Bühlmann form): the level of an hour of a few wins is mostly which hour they happened to
 * fall in, and at full weight one day of such hours shaped a small plan's curve. Plans with spend
 * in most ticks keep nearly their full weight (n ≈ 360 an hour at 10 s ticks). An hour with no
 * spend at all is weighted least: for a small plan that is the usual luck, and for a large one an
 * outage hour, which one day should not write into its curve. Unknown (−1, a state an older leader
 * wrote mid-slot): full weight, as that leader would have given it.
 */
function credibility(cfg: PacingControllerConfig, s: Draft | ControllerState): number {
  const n = s.accEvents;
  return n < 0 || cfg.evidenceTicks === 0 ? 1 : n / (n + cfg.evidenceTicks);
}

/** The memo of an anchored curve: the curve of the state's mode (modes.ts, `curve`). */
export function anchoredMemo(
  f: TrafficForecast,
  slots: DaySlots,
  s: Pick<ControllerState, 'mode' | 'anchorSec' | 'anchorMicros' | 'budgetMicros'>,
  profile: DayProfile | undefined,
  shape: PlanShape,
): Memo {
  const mode = pacingModeOf(s.mode);
  const { windows } = shape;
  const curve = mode.curve({
    slots,
    weights: profile?.weights,
    quarters: shape.quarters,
    fromMs: Math.max(s.anchorSec * 1000, slots.startMs),
    anchorMicros: s.anchorMicros,
    budgetMicros: s.budgetMicros,
  });
  // A dayparted plan that steers: E rises only while a window is open (a mode that does not
  // steer keeps its ceiling; the guard refuses its bids outside the windows).
  return {
    forecast: f,
    slots,
    curve: windows && mode.paced ? restrictCurve(curve, windows) : curve,
    profile,
    shapeHash: shape.hash,
  };
}

/**
 * The memo of a state (its curve), rebuilt from the forecast after a decode or when a different
 * forecast object is passed in; undefined when that forecast no longer gives the state's shape.
 */
export function memoOf(
  cfg: PacingControllerConfig,
  s: ControllerState,
  f: TrafficForecast,
  tz: string,
  day: DayWindow,
  shape: PlanShape,
): Memo | undefined {
  const hit = StateRecord.memoOf(s) as Memo | undefined;
  const shapeHash = shape.hash;
  if (hit && hit.forecast === f && hit.slots.startMs === day.startMs && hit.shapeHash === shapeHash)
    return hit;
  const slots = hit && hit.slots.startMs === day.startMs ? hit.slots : daySlots(tz, day);
  if (!pacingModeOf(s.mode).shaped) {
    // A mode the forecast does not shape keeps the plan's shape in the state: a changed one
    // (windows, the plan's own curve) re-plans the rest of the day.
    if (s.shape !== shapeHash) return undefined;
    if (hit) {
      hit.forecast = f;
      return hit;
    }
    return anchoredMemo(f, slots, s, undefined, shape);
  }
  // A warm takeover: the profile of the state this process held, when it was built from the same
  // forecast object and the decoded state agrees on the profile's inputs (state.ts `carryMemo`).
  const held = StateRecord.heldMemoOf(s) as Memo | undefined;
  const profile =
    held?.profile !== undefined &&
    held.forecast === f &&
    held.slots.startMs === day.startMs &&
    held.shapeHash === shapeHash
      ? held.profile
      : windowedProfile(dayProfile(f, pendingOf(s), tz, slots, cfg), shape.windows);
  if (profile.hash !== s.shape) return undefined;
  if (hit) {
    hit.forecast = f;
    return hit;
  }
  return anchoredMemo(f, slots, s, profile, shape);
}

/** Re-anchors `s` at (now, value) with `profile`'s shape; returns the new memo. */
export function reanchor(
  s: Draft,
  f: TrafficForecast,
  slots: DaySlots,
  nowSec: number,
  value: number,
  budget: number,
  mode: PacingModeSpec,
  profile: DayProfile | undefined,
  shape: PlanShape,
): Memo {
  s.anchorSec = nowSec;
  s.anchorMicros = Math.max(0, Math.min(value, budget));
  s.budgetMicros = budget;
  s.mode = mode.id as PacingMode;
  s.shape = mode.shaped ? (profile?.hash ?? 0) : shape.hash;
  return anchoredMemo(f, slots, s, mode.shaped ? profile : undefined, shape);
}
