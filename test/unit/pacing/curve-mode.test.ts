/**
 * Pacing mode `curve` (shared/budget/plan-curve.ts, controller/mode-curves.ts `customCurve`): the
 * plan's own 24- or 96-point curve as E(t) on the buyer's local clock (a 23-hour day keeps it),
 * its errors, a closed loop that follows it within 5 % of the budget, a curve change mid-day that
 * re-plans the rest through E's value now, and the fail-safe that is the curve itself.
 */
import { describe, expect, it } from 'vitest';
import { type BudgetPlan, resolvePlan, validatePlan } from '../../../shared/budget/model.js';
import { PlanCurveError, parsePlanCurveText, planCurveProblem } from '../../../shared/budget/plan-curve.js';
import { dayWindowOf } from '../../../shared/budget/time-zone.js';
import { createPacingController } from '../../../shared/pacing/controller/index.js';
import { planFailSafeCurve } from '../../../shared/pacing/curve-windows.js';
import { evaluateCurve } from '../../../shared/pacing/types.js';
import { SHAPES } from '../../../sim/market/index.js';
import { DAY, H } from './fixture.js';
import { Plant, requestsForDemand } from './plant.js';

const B = 24_000_000;
/** Evening-heavy: 2 % an hour until 16:00, then 8.5 % an hour to midnight. */
const EVENING = Array.from({ length: 24 }, (_, h) => (h < 16 ? 0.02 : 0.085));
const plan = (extra: Partial<BudgetPlan> = {}): BudgetPlan => ({
  level: 'campaign',
  accountId: 'a',
  campaignId: 'c',
  dailyBudgetMicros: B,
  pacingMode: 'curve',
  curve: EVENING,
  ...extra,
});

describe('a plan curve', () => {
  it('is read from JSON or one number per line, and refused with what is wrong', () => {
    expect(parsePlanCurveText(JSON.stringify(EVENING))).toEqual(EVENING);
    expect(parsePlanCurveText(`# hourly\n${EVENING.join('\n')}\n`)).toEqual(EVENING);
    expect(() => parsePlanCurveText('[0.5, 0.5]')).toThrow(/24 points .* or 96 .*, got 2/);
    expect(() => parsePlanCurveText(JSON.stringify(EVENING.map((x) => x * 2)))).toThrow(/sum to 2, not 1/);
    expect(() => parsePlanCurveText('[1, -1, 1')).toThrow(PlanCurveError);
    expect(planCurveProblem([...EVENING.slice(0, 23), 'x'])).toMatch(/point 23 .* is not a share/);
    expect(() => validatePlan(plan({ curve: undefined }))).toThrow(
      /curve: curve paces to the plan's own curve and none is given/,
    );
    expect(() => validatePlan(plan({ pacingMode: 'even' }))).toThrow(/curve: a curve is for --pacing curve/);
    expect(validatePlan(plan()).curve).toBe(EVENING);
  });

  it('is E(t) over the local clock: the fail-safe is the curve itself, also on a 23-hour day', () => {
    const r = resolvePlan(plan(), 'UTC');
    const c = planFailSafeCurve(r, DAY, B);
    expect(evaluateCurve(c, DAY.startMs + 16 * H)).toBe(Math.round(0.32 * B));
    expect(evaluateCurve(c, DAY.startMs + 20 * H)).toBe(Math.round(0.66 * B));
    expect(evaluateCurve(c, DAY.endMs)).toBe(B);
    // New York's spring-forward day: 02:00 is skipped, its 2 % goes to the other hours in proportion.
    const ny = resolvePlan(plan(), 'America/New_York');
    const short = dayWindowOf('2026-03-08', 'America/New_York');
    const s = planFailSafeCurve(ny, short, B);
    const at16 = evaluateCurve(s, Date.parse('2026-03-08T16:00:00-04:00')) / B;
    expect(at16).toBeCloseTo(0.3 / 0.98, 6);
    expect(evaluateCurve(s, short.endMs)).toBe(B);
  });
});

describe('a curve plan in a closed loop', () => {
  const plant = () =>
    new Plant(createPacingController(), {
      budgetMicros: B,
      mode: 'curve',
      curve: EVENING,
      requestsPerDay: requestsForDemand(6, B),
      shape: SHAPES.noonPeak,
    });

  it('follows its own curve within 5 % of the budget, not the traffic, and spends it', () => {
    const p = plant();
    p.run(DAY.startMs, DAY.endMs);
    expect(p.maxDeviation).toBeLessThanOrEqual(0.05);
    expect(p.confirmed / B).toBeGreaterThanOrEqual(0.98);
    // By 16:00 it has spent its curve's 32 %, where traffic-shaped even would be past half.
    const c = (p.params as { curve: Parameters<typeof evaluateCurve>[0] }).curve;
    expect(evaluateCurve(c, DAY.startMs + 16 * H) / B).toBeCloseTo(0.32, 2);
  });

  it('re-plans the rest of the day when its curve changes, through E’s last value', () => {
    const p = plant();
    p.run(DAY.startMs, DAY.startMs + 10 * H);
    const now = DAY.startMs + 10 * H;
    // E's last value: at the last tick, 10 s before.
    const before = evaluateCurve(
      (p.params as { curve: Parameters<typeof evaluateCurve>[0] }).curve,
      now - 10_000,
    );
    // Everything left goes into 12:00-14:00.
    p.setCurve(Array.from({ length: 24 }, (_, h) => (h === 12 || h === 13 ? 0.5 : 0)));
    const after = p.tick(now).curve;
    expect(Math.abs(evaluateCurve(after, now) - before)).toBeLessThanOrEqual(1);
    expect(evaluateCurve(after, DAY.startMs + 12 * H)).toBe(evaluateCurve(after, now));
    expect(evaluateCurve(after, DAY.startMs + 14 * H)).toBe(B);
  });
});
