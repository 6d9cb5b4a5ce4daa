/**
 * A dayparted plan in the controller's closed loop (docs/spend.md, "Dayparting"): E(t) rises only
 * while a window is open and spreads the budget over the open hours by their traffic; spend
 * follows it and fills the day inside the windows; the pressure holds while the windows are closed
 * (no windup over the gap); nothing is learned from closed hours; a window change mid-day
 * re-plans the rest of the day through E's value now.
 */
import { describe, expect, it } from 'vitest';
import { parseDaypartText } from '../../../shared/budget/daypart.js';
import { dayWindowOf } from '../../../shared/budget/time-zone.js';
import { curveSlope } from '../../../shared/pacing/controller/curve.js';
import { createPacingController } from '../../../shared/pacing/controller/index.js';
import { evaluateCurve, type PlanPacingParams } from '../../../shared/pacing/types.js';
import { SHAPES } from '../../../sim/market/index.js';
import { DAY, H } from './fixture.js';
import { Plant, requestsForDemand } from './plant.js';

const B = 20_000_000;
const TWO_WINDOWS = parseDaypartText('mon-fri 06:00-10:00; mon-fri 17:00-22:00');
const open = (t: number) => {
  const h = (t - DAY2.startMs) / H;
  return (h >= 6 && h < 10) || (h >= 17 && h < 22);
};
/** Day 1 (Monday 2026-11-16) learns, day 2 (Tuesday) is checked. */
const DAY2 = dayWindowOf('2026-11-17', 'UTC');

/** The plan in a market of `demand` × its budget of full-speed spend a day (`daypart` null: all day). */
function plant(demand = 8, daypart: typeof TWO_WINDOWS | null = TWO_WINDOWS) {
  return new Plant(createPacingController(), {
    budgetMicros: B,
    requestsPerDay: requestsForDemand(demand, B),
    shape: SHAPES.noonPeak,
    ...(daypart ? { daypart } : {}),
  });
}

describe('a dayparted plan in a closed loop', () => {
  it('spends only inside its windows, along a curve flat outside them, and fills the day', () => {
    const p = plant();
    p.run(DAY.startMs, DAY.endMs);
    const ticks: { t: number; params: PlanPacingParams }[] = [];
    p.run(DAY2.startMs, DAY2.endMs, (t, params) => ticks.push({ t, params }));
    let closedRise = 0;
    for (const { t, params } of ticks) if (!open(t)) closedRise += curveSlope(params.curve, t);
    expect(closedRise).toBe(0);
    const last = (ticks.at(-1) as { params: PlanPacingParams }).params;
    expect(evaluateCurve(last.curve, DAY2.startMs + 6 * H)).toBe(0);
    expect(evaluateCurve(last.curve, DAY2.startMs + 22 * H)).toBe(B);
    expect(p.confirmed / B).toBeGreaterThanOrEqual(0.98);
    expect(p.confirmed).toBeLessThanOrEqual(B);
    expect(p.maxDeviation).toBeLessThanOrEqual(0.05);
    expect(p.closedBids).toBeGreaterThan(0);
  });

  it('holds its pressure over the closed gap: the first tick of the evening bids as the last of the morning', () => {
    const p = plant();
    p.run(DAY.startMs, DAY.endMs);
    const byT = new Map<number, PlanPacingParams>();
    p.run(DAY2.startMs, DAY2.startMs + 17 * H + 10_000, (t, params) => byT.set(t, params));
    const closedAt = byT.get(DAY2.startMs + 10 * H + 10_000) as PlanPacingParams;
    const before = byT.get(DAY2.startMs + 17 * H - 10_000) as PlanPacingParams;
    expect(before.throttle).toBe(closedAt.throttle);
    expect(before.bidMultiplier).toBe(closedAt.bidMultiplier);
  });

  it('learns nothing from closed hours: without its windows, the next day follows the traffic there too', () => {
    // A thin market: the windows cannot fill the day, so the plan is behind E when they close.
    const p = plant(1.5);
    p.run(DAY.startMs, DAY.endMs);
    const free = plant(1.5, null);
    free.run(DAY.startMs, DAY.endMs);
    // The daypart goes: day 2 is planned over every hour from what day 1 taught.
    p.setDaypart(undefined);
    const noon = (plant: Plant<unknown, unknown>) => {
      const c = plant.tick(DAY2.startMs).curve;
      return (evaluateCurve(c, DAY2.startMs + 17 * H) - evaluateCurve(c, DAY2.startMs + 10 * H)) / B;
    };
    // Hours 10–17 were closed all of day 1: had they been learned as no demand, their share
    // would be near the 5 % floor; kept at the prior, it is within a few points of an all-day plan's.
    expect(Math.abs(noon(p) - noon(free))).toBeLessThan(0.08);
  });

  it('re-plans the rest of the day when its windows change, through E’s last value', () => {
    const p = plant();
    p.run(DAY.startMs, DAY.endMs);
    p.run(DAY2.startMs, DAY2.startMs + 11 * H);
    const before = p.params as PlanPacingParams;
    const now = DAY2.startMs + 11 * H;
    // Noon to 14:00 opens: hours the plan never bid in, so never learned from (no level 0).
    p.setDaypart(parseDaypartText('mon-fri 06:00-10:00; mon-fri 12:00-14:00'));
    const after = p.tick(now);
    expect(Math.abs(evaluateCurve(after.curve, now) - evaluateCurve(before.curve, now))).toBeLessThanOrEqual(
      1,
    );
    expect(evaluateCurve(after.curve, DAY2.startMs + 12 * H)).toBe(evaluateCurve(after.curve, now));
    expect(evaluateCurve(after.curve, DAY2.startMs + 14 * H)).toBe(B);
    // The two noon hours carry the remainder between them by their (peak) traffic.
    const mid = evaluateCurve(after.curve, DAY2.startMs + 13 * H) - evaluateCurve(after.curve, now);
    const rest = B - evaluateCurve(after.curve, now);
    expect(mid / rest).toBeGreaterThan(0.4);
    expect(mid / rest).toBeLessThan(0.6);
    p.run(now, DAY2.startMs + 15 * H);
    expect(p.confirmed / B).toBeGreaterThanOrEqual(0.98);
  });
});
