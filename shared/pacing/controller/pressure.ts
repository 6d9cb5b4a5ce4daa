/**
 * The controller's control law: a PI controller on the position error — setpoint E(t) minus a
 * small margin, against spend plus the float the guards typically hold — normalised by the
 * planned spend over a horizon, with conditional integration and a clamped integral (no windup),
 * and a step down of the integral while the plan sits at the guards' cap.
 */
import { type ControllerState, PRESSURE_SCALE } from './state.js';
import { type Draft, type Position, quantP, type Tick, type Tuning } from './step-parts.js';

/**
 * Sets `s.integral` and `s.pressure` for this tick. `same` is the previous state when it is of
 * the same plan-day (undefined on a plan-day's first step); `dtSec` the seconds since it.
 */
export function steerPressure(
  t: Tuning,
  tick: Tick,
  same: ControllerState | undefined,
  s: Draft,
  anchorMs: number,
  at: Position,
  dtSec: number,
): void {
  const { cfg, uMin } = t;
  const { budget, committed, day } = tick;
  const { expected, slope, remainMs, marginMicros } = at;
  if (!tick.mode.paced) {
    s.integral = 0;
    s.pressure = 0;
    return;
  }
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
  const closing = same !== undefined && committed - same.lastCommitted < expected - same.lastExpected;
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
  if (same !== undefined && dt > 0 && remainMs > cfg.endRampMs && expected - s.anchorMicros > marginMicros) {
    const half = 0.5 * marginMicros;
    const atCap = (gap: number) => gap < half && gap > -half;
    if (
      atCap(expected - committed - tick.leased) &&
      atCap(same.lastExpected - same.lastCommitted - same.leasedAvg)
    )
      i -= (cfg.capStep * dt) / cfg.tickMs;
  }
  i = Math.max(uMin, Math.min(0, i));
  const u = i + cfg.kp * e;
  // Conditional integration: while the output is pinned at a limit and the error pushes
  // further into it, the integral does not move (no windup).
  if ((u >= 0 && e > 0) || (u <= uMin && e < 0)) i = Math.max(uMin, Math.min(0, i0));
  s.integral = quantP(t, i);
  s.pressure = quantP(t, i + cfg.kp * e);
}
