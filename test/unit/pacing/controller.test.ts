/**
 * The pacing controller, pure: single steps (anchoring, modes, budget changes, holds, fail-overs)
 * and closed loops against the market model with an ideal cap (test/unit/pacing/plant.ts):
 * forecast learning, windup, catch-up, tiny budgets, state round trips (a leader change continues
 * bit for bit), and the curve object staying identical while unchanged.
 */
import { describe, expect, it } from 'vitest';
import { type ResolvedPlan, resolvePlan } from '../../../shared/budget/model.js';
import { type DayWindow, dayWindow, dayWindowOf } from '../../../shared/budget/time-zone.js';
import { ControllerConfigError } from '../../../shared/pacing/controller/config.js';
import { PacingInputError } from '../../../shared/pacing/controller/controller.js';
import { curveSlope } from '../../../shared/pacing/controller/curve.js';
import { EMPTY_FORECAST } from '../../../shared/pacing/controller/forecast.js';
import {
  type ControllerState,
  createPacingController,
  type PlanTickInput,
  type TrafficForecast,
} from '../../../shared/pacing/controller/index.js';
import { evaluateCurve, type PlanSpendSnapshot } from '../../../shared/pacing/types.js';
import { SHAPES } from '../../../sim/market/index.js';
import { DAY, H, planOf, spendOf } from './fixture.js';
import { Plant, requestsForDemand, twinTraces } from './plant.js';

const ctl = createPacingController();
/** Without the built-in prior: a plan with nothing learned gets a flat curve (anchoring arithmetic). */
const flat = createPacingController({ builtInShape: null });

function input(plan: ResolvedPlan, nowMs: number, spend: PlanSpendSnapshot, day?: DayWindow): PlanTickInput {
  return { plan, day: day ?? dayWindow(nowMs, plan.timeZone), spend, nowMs };
}

describe('single steps', () => {
  it('a fresh plan anchors E at (now, spend) and spreads the budget flat over the rest of the day', () => {
    const now = DAY.startMs + 14 * H;
    const r = flat.step(input(planOf(10_000_000), now, spendOf(0)), undefined, undefined);
    expect(r.params.curve.atMs[0]).toBe(now);
    expect(r.params.curve.micros[0]).toBe(0);
    expect(evaluateCurve(r.params.curve, DAY.startMs + 19 * H)).toBe(5_000_000);
    expect(evaluateCurve(r.params.curve, DAY.endMs)).toBe(10_000_000);
    // Nothing known of its demand: the initial pressure (−1: shading to e^−1).
    expect(r.params.throttle).toBe(1);
    expect(r.params.bidMultiplier).toBeCloseTo(Math.exp(-1), 4);
    expect(r.params).toMatchObject({
      planId: 'campaign',
      day: '2026-11-16',
      budgetMicros: 10_000_000,
      mode: 'even',
    });
    expect(r.forecast).toBeUndefined();
  });

  it('ASAP: throttle 1, multiplier 1, E = budget for the rest of the day', () => {
    const plan = planOf(5_000_000, 'asap');
    let s: ControllerState | undefined;
    for (let t = DAY.startMs; t < DAY.startMs + H; t += 10_000) {
      const r = ctl.step(input(plan, t, spendOf(4_000_000)), s, undefined);
      s = r.state;
      expect(r.params).toMatchObject({ throttle: 1, bidMultiplier: 1 });
      expect(evaluateCurve(r.params.curve, t)).toBe(5_000_000);
    }
  });

  it('returns the identical curve object while the curve is unchanged, a new one when it changes', () => {
    const plan = planOf(10_000_000);
    let r = ctl.step(input(plan, DAY.startMs, spendOf(0)), undefined, undefined);
    const first = r.params.curve;
    for (let k = 1; k <= 100; k++) {
      r = ctl.step(input(plan, DAY.startMs + k * 10_000, spendOf(k * 1000)), r.state, r.forecast);
      expect(r.params.curve).toBe(first);
    }
    r = ctl.step(
      input(planOf(20_000_000), DAY.startMs + 101 * 10_000, spendOf(101_000)),
      r.state,
      r.forecast,
    );
    expect(r.params.curve).not.toBe(first);
  });

  it('a budget raised mid-day keeps E(now) and spreads the new remainder; a cut below E stops at the new budget', () => {
    const ctl = flat;
    const plan = planOf(24_000_000);
    let r = ctl.step(input(plan, DAY.startMs, spendOf(0)), undefined, undefined);
    const noon = DAY.startMs + 12 * H;
    r = ctl.step(input(plan, noon - 10_000, spendOf(11_500_000)), r.state, r.forecast);
    const eNoon = evaluateCurve(r.params.curve, noon);
    expect(eNoon).toBe(12_000_000);
    const raised = ctl.step(input(planOf(36_000_000), noon, spendOf(11_500_000)), r.state, r.forecast);
    expect(evaluateCurve(raised.params.curve, noon)).toBe(eNoon);
    expect(evaluateCurve(raised.params.curve, DAY.endMs)).toBe(36_000_000);
    expect(evaluateCurve(raised.params.curve, noon + 6 * H)).toBe(24_000_000); // 24 M over 12 h
    expect(raised.state.budgetMicros).toBe(36_000_000);
    // A cut to 18 M: 6 M left after noon, spread over the afternoon.
    const cut = ctl.step(input(planOf(18_000_000), noon, spendOf(11_500_000)), r.state, r.forecast);
    expect(evaluateCurve(cut.params.curve, noon + 6 * H)).toBe(15_000_000);
    // A cut below what E had reached: nothing more to spend, ever, and the controller backs off.
    let low = ctl.step(input(planOf(10_000_000), noon, spendOf(11_500_000)), r.state, r.forecast);
    expect(evaluateCurve(low.params.curve, DAY.endMs - 1)).toBe(10_000_000);
    for (let k = 1; k <= 60; k++) {
      low = ctl.step(
        input(planOf(10_000_000), noon + k * 10_000, spendOf(11_500_000)),
        low.state,
        low.forecast,
      );
    }
    expect(low.params.bidMultiplier * low.params.throttle).toBeLessThan(0.1);
  });

  it('counters unreadable mid-day (Redis reset, not yet rebuilt): holds the previous parameters and state', () => {
    const plan = planOf(10_000_000);
    let r = ctl.step(input(plan, DAY.startMs, spendOf(0)), undefined, undefined);
    for (let k = 1; k < 400; k++)
      r = ctl.step(input(plan, DAY.startMs + k * 10_000, spendOf(k * 200)), r.state, r.forecast);
    const held = ctl.step(
      input(plan, DAY.startMs + 400 * 10_000, spendOf(0, 0, 0, false)),
      r.state,
      r.forecast,
    );
    expect(held.state).toBe(r.state);
    expect(held.params).toEqual(r.params);
    // A step older than the last one (a late duplicate invocation) changes nothing either.
    const late = ctl.step(input(plan, DAY.startMs + 10 * 10_000, spendOf(1)), r.state, r.forecast);
    expect(late.state).toBe(r.state);
  });

  it('a new day re-anchors at its start; the state stays small', () => {
    const plan = planOf(10_000_000);
    let r = ctl.step(input(plan, DAY.endMs - 10_000, spendOf(9_990_000)), undefined, undefined);
    r = ctl.step(input(plan, DAY.endMs, spendOf(0)), r.state, r.forecast);
    expect(r.params.day).toBe('2026-11-17');
    expect(r.params.curve.atMs[0]).toBe(DAY.endMs);
    expect(ctl.encodeState(r.state).length).toBeLessThanOrEqual(150);
  });

  it('rejects invalid settings with the field named', () => {
    expect(() => createPacingController({ minMultiplier: 0 })).toThrow(ControllerConfigError);
    expect(() => createPacingController({ horizonMs: -1 })).toThrow(/horizonMs/);
    expect(() => createPacingController({ alphaDay: 2 })).toThrow(/alphaDay/);
  });
});

describe('state encoding', () => {
  it('round-trips every state of a simulated day exactly, within 150 bytes, budgets up to $10 M', () => {
    for (const budget of [1_000_000, 10_000_000_000_000]) {
      const plant = new Plant(ctl, {
        budgetMicros: budget,
        requestsPerDay: requestsForDemand(3, Math.min(budget, 5_000_000)),
        shape: SHAPES.noonPeak,
      });
      let longest = 0;
      plant.run(DAY.startMs, DAY.startMs + 6 * H, () => {
        const s = plant.state as ControllerState;
        const text = ctl.encodeState(s);
        longest = Math.max(longest, text.length);
        expect(ctl.decodeState(text)).toEqual(s);
      });
      expect(longest).toBeLessThanOrEqual(150);
    }
  });

  it('rejects text that is not a state', () => {
    const s = ctl.step(input(planOf(1_000_000), DAY.startMs, spendOf(0)), undefined, undefined).state;
    const good = ctl.encodeState(s);
    for (const bad of [
      '',
      'x',
      good.replace(/^1e/, '2e'),
      `${good},1`,
      good.replace(/,\d+$/, ',1.5'),
      good.replace(/,/, ',,'),
      `${good},`,
      good.replace(/,\d+$/, ''),
      good.replace(/,\d+$/, ',-'),
      good.replace(/,\d+$/, ',12345678901234567'),
      good.replace(/,\d+$/, ',1 '),
      good.replace(/^1e,/, '1e;'),
      good.replace(/^1e/, '1E'),
    ]) {
      expect(ctl.decodeState(bad)).toBeUndefined();
    }
  });
});

describe('closed loops (market model, ideal cap)', () => {
  const days = (n: number, plant: Plant<ControllerState, TrafficForecast>, from = DAY.startMs) => {
    const out: { util: number; dev: number; cpi: number }[] = [];
    for (let d = 0; d < n; d++) {
      const start = from + d * 24 * H;
      plant.impressions = 0;
      plant.charged = 0;
      plant.run(start, start + 24 * H);
      out.push({
        util: plant.confirmed / plant.plan.dailyBudgetMicros,
        dev: plant.maxDeviation,
        cpi: plant.charged / Math.max(1, plant.impressions),
      });
    }
    return out;
  };

  it('learns the traffic shape: the day-2 curve follows noon-peak traffic and is tracked within 5 %', () => {
    const plant = new Plant(ctl, {
      budgetMicros: 20_000_000,
      requestsPerDay: requestsForDemand(3, 20_000_000),
      shape: SHAPES.noonPeak,
    });
    const [d1, d2, d3] = days(3, plant);
    console.log(JSON.stringify({ learned: [d1, d2, d3] }));
    expect(d1?.util).toBeGreaterThanOrEqual(0.98);
    for (const d of [d2, d3]) {
      expect(d?.util).toBeGreaterThanOrEqual(0.98);
      expect(d?.dev).toBeLessThanOrEqual(0.05);
    }
    // The learned curve plans far more spend per hour at noon than at 03:30, as the traffic does
    // (noon-peak shape: 1.0 vs 0.1); a flat curve would plan the same.
    const c = plant.params?.curve;
    if (!c) throw new Error('no params');
    const noon = DAY.startMs + 2 * 24 * H + 12 * H;
    const night = DAY.startMs + 2 * 24 * H + 3.5 * H;
    const ratio = curveSlope(c, noon) / curveSlope(c, night);
    expect(ratio).toBeGreaterThan(5);
    expect(ratio).toBeLessThan(20);
    expect(plant.forecast).not.toBe(EMPTY_FORECAST);
  });

  it('a leader change (state and forecast through their encodings) continues bit for bit', () => {
    const opts = {
      budgetMicros: 10_000_000,
      requestsPerDay: requestsForDemand(3, 10_000_000),
      shape: SHAPES.noonPeak,
    };
    const a = new Plant(ctl, opts);
    const b = new Plant(ctl, opts);
    // Every 97th tick a new leader takes over from what was stored.
    const traces = twinTraces(a, b, { from: DAY.startMs, to: DAY.startMs + 30 * H }, 97, () => {
      b.state = ctl.decodeState(ctl.encodeState(b.state as ControllerState));
      if (b.forecast) b.forecast = ctl.decodeForecast(ctl.encodeForecast(b.forecast));
    });
    expect(traces.b).toEqual(traces.a);
    expect(ctl.encodeState(b.state as ControllerState)).toBe(ctl.encodeState(a.state as ControllerState));
  });

  it('a lost forecast re-anchors through E(now): the target does not jump', () => {
    const plant = new Plant(ctl, {
      budgetMicros: 10_000_000,
      requestsPerDay: requestsForDemand(3, 10_000_000),
      shape: SHAPES.noonPeak,
    });
    plant.run(DAY.startMs, DAY.startMs + 36 * H);
    const now = DAY.startMs + 36 * H;
    const before = evaluateCurve(plant.params!.curve, now);
    const s = ctl.decodeState(ctl.encodeState(plant.state as ControllerState));
    const r = ctl.step(
      input(plant.plan, now, spendOf(plant.confirmed, plant.inFlight)),
      s,
      undefined, // the forecast is gone
    );
    expect(r.state.anchorSec).toBe(Math.floor(now / 1000));
    expect(Math.abs(evaluateCurve(r.params.curve, now) - before)).toBeLessThanOrEqual(
      Math.ceil(curveSlope(plant.params!.curve, now) * 10_000) + 1,
    );
    expect(evaluateCurve(r.params.curve, dayWindow(now, 'UTC').endMs)).toBe(10_000_000);
  });

  it('no windup: hours without traffic pin it at full speed; when traffic returns it catches up and settles', () => {
    const outage = { fromMs: DAY.startMs + 24 * H + 5 * H, toMs: DAY.startMs + 24 * H + 10 * H };
    const plant = new Plant(ctl, {
      budgetMicros: 20_000_000,
      requestsPerDay: requestsForDemand(3, 20_000_000),
      shape: SHAPES.noonPeak,
      events: [{ ...outage, factor: 0 }],
    });
    const gRef: number[] = [];
    const gAfter: number[] = [];
    const integral: number[] = [];
    plant.run(DAY.startMs, DAY.startMs + 48 * H, (t, p) => {
      const g = p.throttle * p.bidMultiplier;
      if (t >= DAY.startMs + 14 * H && t < DAY.startMs + 16 * H) gRef.push(g);
      if (t >= outage.toMs + 4 * H && t < outage.toMs + 6 * H) gAfter.push(g);
      if (t >= outage.fromMs + 0.5 * H && t < outage.toMs) {
        integral.push((plant.state as ControllerState).integral);
        expect(p.throttle).toBe(1);
        expect(p.bidMultiplier).toBe(1);
      }
    });
    // The integral never exceeds the output limit (0) however long it is pinned there.
    expect(Math.max(...integral)).toBeLessThanOrEqual(0);
    const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] as number;
    expect(median(gAfter)).toBeLessThan(1.5 * median(gRef));
    expect(median(gAfter)).toBeGreaterThan(0.5 * median(gRef));
    expect(plant.confirmed / 20_000_000).toBeGreaterThanOrEqual(0.98);
  });

  it('catch-up: a day that started late on spend still ends ≥ 98 % (end-of-day push)', () => {
    // Demand 1.3×: little slack, traffic shaped, fresh campaign on a flat curve (no prior) — it
    // falls behind at night and must make it up by day.
    const plant = new Plant(flat, {
      budgetMicros: 20_000_000,
      requestsPerDay: requestsForDemand(1.3, 20_000_000),
      shape: SHAPES.noonPeak,
    });
    const [d1] = days(1, plant);
    expect(d1?.dev).toBeGreaterThan(0.05); // it really was behind
    expect(d1?.util).toBeGreaterThanOrEqual(0.96);
    expect(plant.confirmed).toBeLessThanOrEqual(20_000_000);
  });

  it('demand below budget: full speed all day, spends what there is, under the cap', () => {
    const plant = new Plant(ctl, {
      budgetMicros: 20_000_000,
      requestsPerDay: requestsForDemand(0.5, 20_000_000),
      shape: SHAPES.noonPeak,
    });
    let pinned = 0;
    let ticks = 0;
    plant.run(DAY.startMs + 2 * H, DAY.startMs + 24 * H, (_t, p) => {
      ticks++;
      if (p.throttle === 1 && p.bidMultiplier === 1) pinned++;
    });
    expect(pinned / ticks).toBeGreaterThan(0.95);
    expect(plant.confirmed).toBeLessThan(0.6 * 20_000_000);
  });

  it('a $1 budget with far fewer impressions than ticks neither overspends nor starves', () => {
    const plant = new Plant(ctl, {
      budgetMicros: 1_000_000,
      requestsPerDay: requestsForDemand(5, 1_000_000),
      shape: SHAPES.noonPeak,
    });
    for (const d of days(3, plant)) {
      expect(d.util).toBeGreaterThanOrEqual(0.98);
      expect(d.util).toBeLessThanOrEqual(1);
    }
    expect(plant.impressions).toBeLessThan(8640);
  });

  it('shading makes impressions cheaper than ASAP on the same requests (second and first price)', () => {
    for (const auction of ['second-price', 'first-price'] as const) {
      const opts = {
        budgetMicros: 20_000_000,
        requestsPerDay: requestsForDemand(3, 20_000_000),
        shape: SHAPES.noonPeak,
        auction,
      };
      const paced = days(2, new Plant(ctl, opts));
      const asap = days(2, new Plant(ctl, { ...opts, mode: 'asap' }));
      expect(paced[1]?.cpi).toBeLessThan(0.85 * (asap[1]?.cpi ?? 0));
    }
  });

  it('DST: a 25-hour day is paced to its last hour', () => {
    const tz = 'America/Los_Angeles';
    const fall = dayWindowOf('2026-11-01', tz);
    const plant = new Plant(ctl, {
      budgetMicros: 10_000_000,
      timeZone: tz,
      requestsPerDay: requestsForDemand(3, 10_000_000),
      shape: SHAPES.noonPeak,
    });
    plant.run(fall.startMs - 24 * H, fall.endMs);
    expect(plant.params?.day).toBe('2026-11-01');
    expect(plant.params?.curve.atMs.at(-1)).toBe(fall.endMs);
    expect(plant.confirmed / 10_000_000).toBeGreaterThanOrEqual(0.98);
    expect(plant.maxDeviation).toBeLessThanOrEqual(0.05);
  });

  it('forecast writes are spread: at most one per plan and hour, at a per-plan tick', () => {
    const changes = new Map<string, number[]>();
    for (const id of ['p1', 'p2', 'p3']) {
      const plant = new Plant(ctl, {
        budgetMicros: 5_000_000,
        requestsPerDay: requestsForDemand(3, 5_000_000),
        shape: SHAPES.flat,
      });
      plant.plan = resolvePlan({ ...plant.plan, campaignId: id }, 'UTC');
      let last = plant.forecast;
      const at: number[] = [];
      plant.run(DAY.startMs, DAY.startMs + 8 * H, (t) => {
        if (plant.forecast !== last) at.push(t);
        last = plant.forecast;
      });
      changes.set(id, at);
    }
    for (const at of changes.values()) {
      expect(at.length).toBeGreaterThanOrEqual(4);
      for (let i = 1; i < at.length; i++)
        expect((at[i] as number) - (at[i - 1] as number)).toBeGreaterThanOrEqual(H - 10_000);
    }
    const offsets = [...changes.values()].map((at) => (at[1] as number) % H);
    expect(new Set(offsets).size).toBe(3);
  });
});

describe('bad input', () => {
  it('refuses a tick outside its plan-day or a budget that is not one, naming the field', () => {
    const plan = planOf(1_000_000);
    expect(() => ctl.step(input(plan, DAY.endMs, spendOf(0), DAY), undefined, undefined)).toThrow(
      PacingInputError,
    );
    expect(() => ctl.step(input(plan, DAY.startMs, spendOf(0), DAY), undefined, undefined)).not.toThrow();
    expect(() =>
      ctl.step({ ...input(plan, DAY.startMs, spendOf(0)), budgetMicros: Number.NaN }, undefined, undefined),
    ).toThrow(/budgetMicros/);
  });

  it('a corrupt spend read (NaN, negative) holds the last parameters instead of publishing NaN', () => {
    const plan = planOf(10_000_000);
    let r = ctl.step(input(plan, DAY.startMs, spendOf(0)), undefined, undefined);
    for (let k = 1; k < 100; k++)
      r = ctl.step(input(plan, DAY.startMs + k * 10_000, spendOf(k * 500)), r.state, r.forecast);
    for (const bad of [spendOf(Number.NaN), spendOf(-5), spendOf(10, 0, -1)]) {
      const h = ctl.step(input(plan, DAY.startMs + 100 * 10_000, bad), r.state, r.forecast);
      expect(h.state).toBe(r.state);
      expect(Number.isFinite(h.params.throttle) && Number.isFinite(h.params.bidMultiplier)).toBe(true);
    }
    // On a plan-day's first tick there is nothing to hold: it starts from zero spend.
    const fresh = ctl.step(input(plan, DAY.startMs + 7 * H, spendOf(Number.NaN)), undefined, undefined);
    expect(fresh.state.anchorMicros).toBe(0);
    expect(ctl.decodeState(ctl.encodeState(fresh.state))).toEqual(fresh.state);
  });

  it('a zero budget publishes a flat zero curve and the lowest pressure, without NaN', () => {
    const plan = planOf(0);
    let r = ctl.step(input(plan, DAY.startMs, spendOf(0)), undefined, undefined);
    for (let k = 1; k < 60; k++)
      r = ctl.step(input(plan, DAY.startMs + k * 10_000, spendOf(0)), r.state, r.forecast);
    expect(evaluateCurve(r.params.curve, DAY.startMs + 12 * H)).toBe(0);
    expect(Number.isFinite(r.params.throttle)).toBe(true);
    expect(ctl.decodeState(ctl.encodeState(r.state))).toEqual(r.state);
  });
});

describe('state text at the limits of its integers', () => {
  /** The format written with template strings: what encodeState's byte writer must reproduce. */
  const reference = (s: ControllerState) => {
    const pend = s.pendSlot < 0 ? -1 : s.pendSlot + (s.pendPrevDay ? 32 : 0);
    const ints = [
      s.anchorSec,
      s.anchorMicros,
      s.budgetMicros,
      s.shape,
      s.integral,
      s.pressure,
      s.lastSec,
      s.lastCommitted,
      s.lastExpected,
      s.leasedAvg,
      s.accSlot,
      s.accSpend,
      s.accGain,
      // The seconds field carries the ticks with spend (+1) in its millions; −1: not counted.
      s.accEvents < 0 ? s.accSeconds : s.accSeconds + 1_000_000 * (s.accEvents + 1),
    ];
    return `1${s.mode === 'asap' ? 'a' : 'e'},${s.day.replaceAll('-', '')},${ints.join(',')},${pend},${s.pendLevel},${s.pendCover}`;
  };
  const base = ctl.step(input(planOf(1_000_000), DAY.startMs, spendOf(0)), undefined, undefined).state;

  it('writes every value as String(n) does: 0, −0, 9, 10, 10^8 ± 1, 2^31, 2^53 − 1, negatives', () => {
    const values = [
      0,
      -0,
      1,
      9,
      10,
      99_999_999,
      100_000_000,
      100_000_001,
      2 ** 31,
      2 ** 53 - 1,
      -1,
      -(2 ** 53 - 1),
      -100_000_000,
    ];
    for (const v of values) {
      for (const field of ['anchorMicros', 'lastCommitted', 'accGain', 'integral'] as const) {
        const s = { ...base, [field]: v } as ControllerState;
        expect(ctl.encodeState(s)).toBe(reference(s));
      }
    }
    const s = {
      ...base,
      mode: 'asap',
      pendSlot: 7,
      pendPrevDay: true,
      pendLevel: 123,
      pendCover: 32,
    } as ControllerState;
    expect(ctl.encodeState(s)).toBe(reference(s));
    expect(ctl.decodeState(ctl.encodeState(s))).toEqual(s);
  });

  it('writes a value that is not a safe integer as String(n) does (visible, not wrong digits)', () => {
    for (const v of [1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      const s = { ...base, lastCommitted: v } as ControllerState;
      expect(ctl.encodeState(s)).toBe(reference(s));
      expect(ctl.decodeState(ctl.encodeState(s))).toBeUndefined();
    }
    // 2^53 is not a safe integer either: written as `${n}` writes it.
    const big = { ...base, lastCommitted: 2 ** 53 } as ControllerState;
    expect(ctl.encodeState(big)).toBe(reference(big));
  });
});
