/**
 * Where a step's curve comes from: a plan-day's first step anchors E(t) at (now, spend) and
 * closes yesterday's last slot; a later step keeps the curve, or re-anchors it when the budget or
 * the mode changed or the forecast it was built from is gone (through E's last value, so E never
 * jumps), and for a mode capped per hour at every hour slot's start.
 */

import { pacingModeOf } from '../modes.js';
import { evaluateCurve } from '../types.js';
import type { DaySlots } from './day-slots.js';
import { daySlots, previousDay, slotAt, slotsOfDay } from './day-slots.js';
import { windowedProfile } from './day-windows.js';
import {
  type DayProfile,
  dayProfile,
  isPriorOnly,
  type TrafficForecast,
  withObservation,
} from './forecast.js';
import { memoOf, observation, pendingOf, reanchor } from './memo.js';
import { ownObservations, seedPrior } from './prior.js';
import { BLANK_STATE, type ControllerState, PRESSURE_SCALE, StateRecord } from './state.js';
import { type Draft, type Memo, quantP, type Tick, type Tuning, type Working } from './step-parts.js';

/** A new plan-day (or a fresh plan): close yesterday's last slot, anchor E at (now, spend). */
export function startDay(
  t: Tuning,
  tick: Tick,
  prev: ControllerState | undefined,
  forecast: TrafficForecast,
): Working {
  const { cfg } = t;
  const { tz, day, nowMs, budget, mode, plan, committed } = tick;
  let f = forecast;
  let pending: Working['pending'];
  const slots = daySlots(tz, day);
  if (prev) {
    const yesterday = previousDay(day.day);
    let older = pendingOf(prev);
    const closed = prev.day === yesterday ? observation(cfg, prev, slotsOfDay(tz, prev.day)) : undefined;
    // The state carries at most one pending observation, of today or yesterday: anything else
    // goes into the forecast now (rare: only after skipped ticks or days).
    if (older && (closed || older.day < yesterday)) {
      f = withObservation(f, older, tz, cfg);
      older = undefined;
    }
    pending = closed ?? older;
  }
  const { windows } = tick;
  let profile = mode.shaped ? windowedProfile(dayProfile(f, pending, tz, slots, cfg), windows) : undefined;
  if (
    profile &&
    (profile.demand === undefined || (isPriorOnly(f) && !ownObservations(f, pending, day.day)))
  ) {
    // No level of its own (a new plan, or one that has learned nothing yet): every plan-day
    // starts from a prior — the shape and level other plans learned, else the built-in shape
    // at the level the initial pressure implies — stored as the plan's forecast.
    const seeded = seedPrior(f, tick.input.prior?.(plan, nowMs), budget, cfg, tz, nowMs);
    if (seeded) {
      f = seeded;
      profile = windowedProfile(dayProfile(f, pending, tz, slots, cfg), windows);
    }
  }
  const s = new StateRecord(BLANK_STATE) as Draft;
  s.day = day.day;
  s.mode = plan.pacingMode;
  s.budgetMicros = budget;
  s.lastSec = tick.nowSec;
  s.lastCommitted = committed;
  s.leasedAvg = Math.max(0, tick.leased);
  s.accSlot = slotAt(slots, nowMs);
  const memo = reanchor(s, f, slots, tick.nowSec, committed, budget, mode, profile, tick.shape);
  const need = budget - s.anchorMicros;
  s.integral = quantP(t, mode.paced ? initialIntegral(t, profile, slots, nowMs, need, prev) : 0);
  s.pressure = s.integral;
  return { s, memo, f, pending, dtSec: 0 };
}

/** A later step of the same plan-day: keep the curve, or re-anchor it without a jump. */
export function continueDay(t: Tuning, tick: Tick, prev: ControllerState, f: TrafficForecast): Working {
  const { cfg } = t;
  const { tz, day, nowMs, nowSec, budget, mode, plan, windows } = tick;
  const s = new StateRecord(prev) as Draft;
  const pending = pendingOf(prev);
  const dtSec = nowSec - prev.lastSec;
  const held = memoOf(cfg, prev, f, tz, day, tick.shape);
  let memo: Memo;
  if (!held) {
    // The forecast this curve was built from is gone: rebuild the shape from the forecast we
    // have, through E's last value, so E continues without a jump.
    const slots = daySlots(tz, day);
    const profile = windowedProfile(dayProfile(f, pending, tz, slots, cfg), windows);
    memo = reanchor(s, f, slots, nowSec, prev.lastExpected, budget, mode, profile, tick.shape);
  } else if (budget !== prev.budgetMicros || plan.pacingMode !== prev.mode) {
    // Budget or mode changed: keep E(now) (a cut below it stops at the new budget) and spread
    // what is left of the new budget over the rest of the day by the same profile. Switching
    // from a mode that does not steer (ASAP: its curve is only a ceiling), E(now) is the spend
    // so far.
    const eNow = pacingModeOf(prev.mode).paced ? evaluateCurve(held.curve, nowMs) : tick.committed;
    const profile = mode.shaped
      ? (held.profile ?? windowedProfile(dayProfile(f, pending, tz, held.slots, cfg), windows))
      : undefined;
    // Demand is what the market offered, whatever the budget: learning goes on.
    memo = reanchor(s, f, held.slots, nowSec, eNow, budget, mode, profile, tick.shape);
  } else if (mode.hourly && slotAt(held.slots, nowMs) !== slotAt(held.slots, prev.anchorSec * 1000)) {
    // A new hour slot of a mode capped per hour: E starts again at the slot's start, from the
    // spend read at the last tick before it (≤ the spend at the start, so the hour's allowance is
    // at most the cap: spend in [start, now] is already in today's read and counts against it).
    const startSec = Math.floor((held.slots.knots[slotAt(held.slots, nowMs)] as number) / 1000);
    memo = reanchor(s, f, held.slots, startSec, prev.lastCommitted, budget, mode, undefined, tick.shape);
  } else {
    memo = held;
  }
  return { s, memo, f, pending, dtSec };
}

/** Pressure to start a plan-day with: from the forecast's demand level if it has one. */
function initialIntegral(
  t: Tuning,
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
  return t.cfg.initialPressure;
}
