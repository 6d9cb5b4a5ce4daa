/**
 * Which intervals the forecast learns from (docs/pacing.md "Traffic forecast", Censoring): an
 * interval measures the cap, not the demand, only when spend plus the guards' floats sat within
 * half the margin of E(t) at both its ends. A small plan's spend moves in whole wins and its
 * floats in whole grants, each several margins wide: one end inside the band is that noise, and
 * censoring on it dropped the hours such a plan tracked its curve in — the hours it could have
 * spent more in — so the next day's curve leaned on the hours it was behind in.
 */
import { describe, expect, it } from 'vitest';
import {
  type ControllerState,
  createPacingController,
  type TrafficForecast,
} from '../../../shared/pacing/controller/index.js';
import { evaluateCurve } from '../../../shared/pacing/types.js';
import { DAY, H, planOf, spendOf } from './fixture.js';

const plan = planOf(24_000_000);
const ctl = createPacingController({ builtInShape: null });
/** 3 minutes of the flat curve's slope ($1 an hour): the controller's margin below E. */
const MARGIN = 50_000;
/** What two guards hold of a small plan: 2 % of its day, ten margins. */
const FLOATS = 480_000;

/**
 * Steps the plan tick by tick from its day's start, on its setpoint until 06:00, then for 40
 * minutes (inside one hour slot) with spend plus the floats `gap(k)` below E at tick k. Returns
 * the seconds of that slot learned from.
 */
function observedSeconds(gap: (k: number) => number): number {
  let state: ControllerState | undefined;
  let forecast: TrafficForecast | undefined;
  let expected = 0;
  const from = DAY.startMs + 6 * H;
  for (let t = DAY.startMs; t < from + 240 * 10_000; t += 10_000) {
    const k = (t - from) / 10_000;
    const confirmed = Math.max(0, expected - FLOATS - (k < 0 ? MARGIN : gap(k)));
    const r = ctl.step({ plan, day: DAY, nowMs: t, spend: spendOf(confirmed, 0, FLOATS) }, state, forecast);
    state = r.state;
    forecast = r.forecast;
    expected = evaluateCurve(r.params.curve, t + 10_000);
  }
  return (state as ControllerState).accSeconds;
}

describe('learning: censored intervals', () => {
  it('a plan on its setpoint is learned from', () => {
    expect(observedSeconds(() => MARGIN)).toBeGreaterThan(0.9 * 2390);
  });

  it('a win that reaches the band at one end of an interval does not void it', () => {
    // Every other tick a win takes spend plus floats to E (inside the band), the tick after it is
    // back on the setpoint: every interval has one end in the band and one outside.
    const seconds = observedSeconds((k) => (k % 2 === 0 ? MARGIN : 0));
    expect(seconds).toBeGreaterThan(0.9 * 2390);
  });

  it('a plan held at the cap (in the band at both ends) is not learned from', () => {
    expect(observedSeconds(() => 0)).toBe(0);
    // Two ticks at the cap, two on the setpoint: one interval in four has both ends at the cap.
    const seconds = observedSeconds((k) => (k % 4 < 2 ? 0 : MARGIN));
    expect(seconds).toBeGreaterThan(0.7 * 2390);
    expect(seconds).toBeLessThan(0.8 * 2390);
  });
});
