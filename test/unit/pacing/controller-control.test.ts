/**
 * The control law's rules for the first minutes and for being ahead (docs/pacing.md "Control
 * law"): shading down to the 0.05 floor before any throttling, the asymmetric error clamp (a plan
 * far ahead stops at once and resumes as E(t) catches up, its integral barely moved), and the
 * integral stepping down while the plan sits at the guards' cap (but not in the day's last hour).
 */
import { describe, expect, it } from 'vitest';
import { actuatorsOf } from '../../../shared/pacing/controller/actuators.js';
import { defaultControllerConfig } from '../../../shared/pacing/controller/config.js';
import {
  type ControllerState,
  createPacingController,
  type PaceController,
  type TrafficForecast,
} from '../../../shared/pacing/controller/index.js';
import { evaluateCurve } from '../../../shared/pacing/types.js';
import { DAY, H, planOf, spendOf } from './fixture.js';

const plan = planOf(24_000_000);
const pressure = (s: ControllerState) => s.pressure / 10_000;
const integral = (s: ControllerState) => s.integral / 10_000;

/** Steps one plan with a flat curve ($1 an hour) from `from` for `ticks` ticks, spend by `spend(t, E)`. */
function run(
  ctl: PaceController,
  from: number,
  ticks: number,
  spend: (t: number, expected: number) => number,
  start?: { state: ControllerState; forecast: TrafficForecast | undefined },
) {
  let state = start?.state;
  let forecast = start?.forecast;
  let expected = 0;
  const trace: { t: number; u: number; i: number; e: number; c: number }[] = [];
  for (let k = 0; k < ticks; k++) {
    const t = from + k * 10_000;
    const c = spend(t, expected);
    const r = ctl.step({ plan, day: DAY, nowMs: t, spend: spendOf(c) }, state, forecast);
    state = r.state;
    forecast = r.forecast;
    expected = evaluateCurve(r.params.curve, t + 10_000);
    trace.push({ t, u: pressure(r.state), i: integral(r.state), e: expected, c });
  }
  return { state: state as ControllerState, forecast, trace };
}

const flat = createPacingController({ builtInShape: null });

describe('shading before throttling', () => {
  it('the multiplier goes down to 0.05 before the throttle moves at all', () => {
    const cfg = defaultControllerConfig;
    expect(cfg.minMultiplier).toBe(0.05);
    for (const m of [0.5, 0.25, 0.1, 0.06]) {
      const a = actuatorsOf(Math.log(m), cfg);
      expect(a.throttle).toBe(1);
      expect(a.bidMultiplier).toBeCloseTo(m, 10);
    }
    const below = actuatorsOf(Math.log(0.05) - 1, cfg);
    expect(below.bidMultiplier).toBe(0.05);
    expect(below.throttle).toBeCloseTo(Math.exp(-1), 10);
  });
});

describe('ahead of the target', () => {
  // Settle a plan at its setpoint for two hours: spend tracks E − the margin (3 minutes of the
  // curve's slope, $1/h → 50,000 µ$), so the error is about 0 and the integral stays put.
  const margin = 50_000;
  const settled = run(flat, DAY.startMs, 720, (_t, e) => Math.max(0, e - margin));

  it('a plan far ahead stops at once and resumes as E(t) catches up; its integral barely moves', () => {
    const t0 = DAY.startMs + 2 * H;
    const i0 = integral(settled.state);
    const e0 = evaluateCurve(
      flat.step({ plan, day: DAY, nowMs: t0, spend: spendOf(0) }, settled.state, settled.forecast).params
        .curve,
      t0,
    );
    // 6 % of the budget (1.5 hours of the flat curve) landed at once beyond E; from then on the
    // plan spends only what keeps it at its setpoint once E has caught up.
    const ahead = e0 + 1_500_000;
    const spend = (_t: number, e: number) => Math.max(ahead, e - margin);
    const after = run(flat, t0, 720, spend, settled);
    const first = after.trace[0] as (typeof after.trace)[number];
    // With the error clamped at −3 the pressure could go no lower than I − 3; now the
    // proportional term takes it down to about I − 9 (the error is ≈ −9.3).
    expect(first.u).toBeLessThan(i0 - 8);
    const clampedOld = createPacingController({ builtInShape: null, aheadClamp: 3 });
    const old = run(clampedOld, t0, 1, spend, settled);
    expect((old.trace[0] as (typeof old.trace)[number]).u).toBeGreaterThanOrEqual(i0 - 3.02);
    // While far ahead and E(t) gains on the spend, the integral does not move; the cap step does
    // not apply either (ahead is not at the cap).
    const at40 = after.trace[240] as (typeof after.trace)[number];
    expect(Math.abs(i0 - at40.i)).toBeLessThan(0.05);
    // E catches up after 90 minutes: the pressure is back near where it was (the last half hour
    // of the catch-up, within the clamp, integrates as usual: ≈ ki × 1.5 × 3 = 1.1 and the tail).
    const end = after.trace.at(-1) as (typeof after.trace)[number];
    expect(end.u).toBeGreaterThan(i0 - 2.5);
    expect(end.u).toBeGreaterThan(first.u + 6);
    // Further ahead and still gaining (spend grows faster than E): the integral does move.
    const gaining = run(flat, t0, 60, (t) => ahead + (t - t0) * (1_500_000 / H), settled);
    expect(i0 - (gaining.trace.at(-1) as (typeof after.trace)[number]).i).toBeGreaterThan(0.7);
  });
});

describe('at the guards’ cap (capStep, off by default)', () => {
  const stepping = createPacingController({ builtInShape: null, capStep: 0.05 });

  it('the integral steps down while spend sits at E, and stops when it leaves the cap', () => {
    const ctl = stepping;
    // Spend at E(t) every tick: the guards let through all that E allows and demand is higher.
    const capped = run(ctl, DAY.startMs + 6 * H, 70, (_t, e) => e);
    const i = capped.trace.map((x) => x.i);
    // Not while E is within a margin (3 minutes: 18 ticks) of its anchor — right after anchoring
    // the first floats are all of E — then −capStep per tick besides the integral's own move.
    expect(Math.abs((i[2] as number) - (i[15] as number))).toBeLessThan(0.2);
    const drop = (i[25] as number) - (i[55] as number);
    expect(drop).toBeGreaterThan(30 * 0.05 * 0.9);
    expect(drop).toBeLessThan(30 * 0.05 + 0.1);
    // Back under the cap by a margin: the steps stop.
    const free = run(ctl, DAY.startMs + 6 * H + 700_000, 30, (_t, e) => Math.max(0, e - 60_000), capped);
    const j = free.trace.map((x) => x.i);
    expect(Math.abs((j[25] as number) - (j[5] as number))).toBeLessThan(0.2);
  });

  it('floats held below E are not the cap: a small plan on its setpoint keeps its pressure', () => {
    // $24 a day, the guards holding 2 % of it (floats of a small plan are large beside the
    // 3-minute margin of 50,000): spend at E − margin − floats is where the controller aims.
    const floats = 480_000;
    let state: ControllerState | undefined;
    let forecast: TrafficForecast | undefined;
    let expected = 0;
    const i: number[] = [];
    for (let k = 0; k < 720; k++) {
      const t = DAY.startMs + k * 10_000;
      const c = Math.max(0, expected - 50_000 - floats);
      const r = stepping.step({ plan, day: DAY, nowMs: t, spend: spendOf(c, 0, floats) }, state, forecast);
      state = r.state;
      forecast = r.forecast;
      expected = evaluateCurve(r.params.curve, t + 10_000);
      i.push(integral(r.state));
    }
    // From the first hour on (E above the floats), over the second hour: no step down.
    expect(Math.abs((i[360] as number) - (i[719] as number))).toBeLessThan(0.1);
  });

  it('not in the day’s last hour: there the plan is meant to end on E', () => {
    const capped = run(stepping, DAY.endMs - 40 * 60_000, 60, (_t, e) => e);
    const i = capped.trace.map((x) => x.i);
    expect((i[10] as number) - (i[50] as number)).toBeLessThan(0.5);
  });

  it('the step is a setting: off by default', () => {
    expect(defaultControllerConfig.capStep).toBe(0);
    const off = flat;
    const capped = run(off, DAY.startMs + 6 * H, 60, (_t, e) => e);
    const i = capped.trace.map((x) => x.i);
    expect((i[25] as number) - (i[55] as number)).toBeLessThan(0.5);
    expect(() => createPacingController({ capStep: 1 })).toThrow(/capStep/);
    expect(() => createPacingController({ aheadClamp: 0 })).toThrow(/aheadClamp/);
  });
});
