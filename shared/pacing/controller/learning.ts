/**
 * The controller's learning, on every step after a plan-day's first: this interval's spend
 * against the gain that was applied during it, accumulated per slot of the day; a closed slot
 * becomes an observation for the forecast. Also the smoothed float the guards hold.
 */

import { isOpenAt } from '../../budget/daypart.js';
import { slotAt } from './day-slots.js';
import { withObservation } from './forecast.js';
import { observation } from './memo.js';
import { type ControllerState, GAIN_SCALE, PRESSURE_SCALE } from './state.js';
import type { Position, Tick, Tuning, Working } from './step-parts.js';

/** Learns from the interval since `prev` (a step of the same plan-day) into `w`. */
export function learn(t: Tuning, tick: Tick, prev: ControllerState, w: Working, at: Position): void {
  const { cfg } = t;
  const { committed, budget, mode } = tick;
  const { s, dtSec } = w;
  // The guard may have refused bids when spend plus the guards' floats came within half the
  // margin of E (the controller keeps them a margin below): an interval that sat there at both
  // ends measures the cap, not the demand. One end alone is mostly a small plan's noise — a win
  // or a grant is several margins of its budget — and voiding those intervals dropped the hours
  // it tracked its curve in, so its next curve leaned on the hours it fell behind in.
  const band = 0.5 * at.marginMicros + prev.leasedAvg;
  // Where E(t) is flat (a mode that reaches its budget before midnight, `ahead`) the margin is 0,
  // and what is left below E is less than a bid: spend within 1 % of a flat E is the cap, as for
  // a plan that does not steer.
  const capped = mode.paced
    ? (prev.lastExpected - prev.lastCommitted < band && at.expected - committed < band) ||
      (at.slope === 0 && at.expected - committed < Math.max(band, 0.01 * budget))
    : budget - committed < 0.01 * budget;
  // Outside a dayparted plan's windows the guard refuses every bid: no demand is measured there
  // (an interval with either end outside them is skipped).
  const closed =
    tick.windows !== undefined && (!tick.windowOpen || !isOpenAt(tick.windows, prev.lastSec * 1000));
  // A plan paced to its own curve spends at a pace against the demand that follows the buyer's
  // curve, not the traffic: through the assumed elasticity κ it would teach the forecast a
  // distorted shape (and the priors other plans start from), and its curve does not use it.
  const learnable = dtSec > 0 && dtSec * 1000 <= cfg.maxGapMs && !closed && tick.mode.planCurve !== true;
  if (learnable && !capped && tick.input.spend.initialised) {
    s.accSpend += committed - prev.lastCommitted;
    s.accGain += Math.round(Math.exp(prev.pressure / PRESSURE_SCALE) * dtSec * GAIN_SCALE);
    s.accSeconds += dtSec;
    if (s.accEvents >= 0 && committed > prev.lastCommitted) s.accEvents += 1;
  }
  const slots = w.memo.slots;
  const slotNow = slotAt(slots, tick.nowMs);
  if (slotNow !== s.accSlot) {
    const closed = observation(cfg, s, slots);
    if (closed) {
      if (w.pending) w.f = withObservation(w.f, w.pending, tick.tz, cfg);
      w.pending = closed;
    }
    s.accSlot = slotNow;
    s.accSpend = 0;
    s.accGain = 0;
    s.accSeconds = 0;
    s.accEvents = 0;
  }
  if (dtSec > 0) {
    const a = Math.min(1, (dtSec * 1000) / cfg.leaseSmoothingMs);
    s.leasedAvg = Math.max(0, Math.round(s.leasedAvg + a * (tick.leased - s.leasedAvg)));
  }
}
