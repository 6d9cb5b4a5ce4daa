/**
 * The `ahead` and `asap-hourly` pacing modes (controller/mode-curves.ts, docs/pacing.md "Target
 * curve E(t)" → Modes). `ahead`: its curve as a remapping of `even`'s (120 % of its pace, capped at
 * the budget), re-anchored mid-day, and in a closed loop from its second day on (a forecast learned
 * while it runs ahead): spend follows its curve within 5 % of the budget, ends on the budget, and
 * is 15–25 % ahead of `even` at noon. `asap-hourly`: its curve, and in a closed loop on a market
 * far deeper than its cap no hour spends more than the cap.
 */
import { describe, expect, it } from 'vitest';
import { buildCurve, type ModeCurveInput } from '../../../shared/pacing/controller/curve.js';
import { daySlots } from '../../../shared/pacing/controller/day-slots.js';
import { createPacingController } from '../../../shared/pacing/controller/index.js';
import {
  AHEAD_FACTOR,
  ASAP_HOURLY_FACTOR,
  aheadCurve,
  asapHourlyCurve,
  hourlyCapMicros,
  timeAtValue,
} from '../../../shared/pacing/controller/mode-curves.js';
import { type CurvePoints, evaluateCurve } from '../../../shared/pacing/types.js';
import { SHAPES } from '../../../sim/market/index.js';
import { DAY, H } from './fixture.js';
import { Plant, requestsForDemand } from './plant.js';

const slots = daySlots('UTC', DAY);
const B = 10_000_000;
const weights = slots.hours.map((h) => SHAPES.noonPeak[h] as number);
const input = (fromMs = DAY.startMs, anchorMicros = 0, budgetMicros = B): ModeCurveInput => ({
  slots,
  weights,
  fromMs,
  anchorMicros,
  budgetMicros,
});

function expectValid(curve: CurvePoints, fromMs: number, anchor: number, budget: number): void {
  expect(curve.atMs[0]).toBe(fromMs);
  expect(curve.micros[0]).toBe(anchor);
  expect(curve.atMs.at(-1)).toBe(DAY.endMs);
  expect(curve.micros.at(-1)).toBe(budget);
  for (let i = 1; i < curve.atMs.length; i++) {
    expect(curve.atMs[i] as number).toBeGreaterThan(curve.atMs[i - 1] as number);
    expect(curve.micros[i] as number).toBeGreaterThanOrEqual(curve.micros[i - 1] as number);
    expect(Number.isInteger(curve.micros[i])).toBe(true);
  }
}

describe('ahead', () => {
  it("is even's curve at 120 % of its pace, flat at the budget from the instant it is reached", () => {
    const even = buildCurve(slots, weights, DAY.startMs, 0, B);
    const ahead = aheadCurve(input());
    expectValid(ahead, DAY.startMs, 0, B);
    for (let t = DAY.startMs; t <= DAY.endMs; t += 600_000) {
      const want = Math.min(B, AHEAD_FACTOR * evaluateCurve(even, t));
      expect(Math.abs(evaluateCurve(ahead, t) - want), `at ${(t - DAY.startMs) / H} h`).toBeLessThanOrEqual(
        2,
      );
    }
    const full = timeAtValue(ahead, B);
    expect(full).toBe(timeAtValue(even, B / AHEAD_FACTOR));
    expect(evaluateCurve(ahead, full - 60_000)).toBeLessThan(B);
    expect(full).toBeLessThan(DAY.endMs - H);
  });

  it('re-anchored at 14:00 (a budget raise) runs the rest ahead of the rest', () => {
    const at = DAY.startMs + 14 * H;
    const even = buildCurve(slots, weights, at, 6_000_000, 12_000_000);
    const ahead = aheadCurve(input(at, 6_000_000, 12_000_000));
    expectValid(ahead, at, 6_000_000, 12_000_000);
    const t = DAY.startMs + 18 * H;
    const want = Math.min(12_000_000, 6_000_000 + AHEAD_FACTOR * (evaluateCurve(even, t) - 6_000_000));
    expect(Math.abs(evaluateCurve(ahead, t) - want)).toBeLessThanOrEqual(2);
  });
});

describe('in a closed loop', () => {
  const opts = { budgetMicros: B, requestsPerDay: requestsForDemand(3, B), shape: SHAPES.noonPeak };
  /** Day two (a learned forecast) of a plan in `mode`: its spend at noon and its max deviation. */
  function dayTwo(mode: 'even' | 'ahead') {
    const plant = new Plant(createPacingController(), { ...opts, mode });
    plant.run(DAY.startMs, DAY.startMs + 24 * H);
    let noon = 0;
    plant.run(DAY.startMs + 24 * H, DAY.startMs + 48 * H, (t) => {
      if (t === DAY.startMs + 36 * H) noon = plant.confirmed;
    });
    return { noon, spent: plant.confirmed, maxDeviation: plant.maxDeviation };
  }

  it('each mode follows its curve within 5 % and spends its budget; ahead is 15–25 % ahead at noon', () => {
    const even = dayTwo('even');
    const ahead = dayTwo('ahead');
    for (const r of [even, ahead]) {
      expect(r.maxDeviation).toBeLessThanOrEqual(0.05);
      expect(r.spent / B).toBeGreaterThanOrEqual(0.98);
      expect(r.spent / B).toBeLessThanOrEqual(1.005);
    }
    expect(ahead.noon / even.noon).toBeGreaterThanOrEqual(1.15);
    expect(ahead.noon / even.noon).toBeLessThanOrEqual(1.25);
  });
});

describe('asap-hourly', () => {
  const cap = hourlyCapMicros(B, DAY);

  it('rises at the cap rate from its anchor, flat at the budget once reached', () => {
    expect(cap).toBe(Math.floor((ASAP_HOURLY_FACTOR * B) / 24));
    const curve = asapHourlyCurve({
      slots,
      weights: undefined,
      fromMs: DAY.startMs + 3 * H,
      anchorMicros: 0,
      budgetMicros: B,
    });
    expectValid(curve, DAY.startMs + 3 * H, 0, B);
    // An hour after the anchor: the cap (to a micro: the knot at the budget is rounded up).
    expect(cap - evaluateCurve(curve, DAY.startMs + 4 * H)).toBeGreaterThanOrEqual(0);
    expect(cap - evaluateCurve(curve, DAY.startMs + 4 * H)).toBeLessThanOrEqual(1);
    expect(timeAtValue(curve, B)).toBe(DAY.startMs + 3 * H + Math.ceil((B * H) / cap));
  });

  it('in a closed loop no hour spends more than the cap, and the day spends its budget', () => {
    // Demand 30 × the budget (about 1.8 budgets an hour at noon, far above the cap of 0.42), and
    // almost no traffic until 06:00: a cap on the running total would let 07:00 spend the six
    // hours' caps at once.
    const plant = new Plant(createPacingController(), {
      budgetMicros: B,
      mode: 'asap-hourly',
      requestsPerDay: requestsForDemand(30, B),
      shape: SHAPES.noonPeak,
      events: [{ fromMs: DAY.startMs, toMs: DAY.startMs + 6 * H, factor: 0.01 }],
    });
    const atHour: number[] = [];
    plant.run(DAY.startMs, DAY.endMs, (t) => {
      if ((t - DAY.startMs) % H === 0) atHour.push(plant.confirmed + plant.inFlight);
    });
    atHour.push(plant.confirmed + plant.inFlight);
    const perHour = atHour.slice(1).map((v, h) => v - (atHour[h] as number));
    for (const [h, spent] of perHour.entries()) expect(spent, `hour ${h}`).toBeLessThanOrEqual(cap);
    // The cap binds: some hours spend nearly all of it.
    expect(Math.max(...perHour)).toBeGreaterThanOrEqual(0.95 * cap);
    expect(plant.confirmed / B).toBeGreaterThanOrEqual(0.98);
    expect(plant.confirmed).toBeLessThanOrEqual(B);
  });
});
