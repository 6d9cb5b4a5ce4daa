/**
 * The scorer's ideal curve (sim/ideal.ts): the budget spread over the day in proportion to the
 * expected traffic, from the plan's creation; continuous through a budget change.
 */
import { describe, expect, it } from 'vitest';
import { dayWindowOf } from '../../../shared/budget/time-zone.js';
import { IDEAL_PACE, IdealCurve, idealTraffic } from '../../../sim/ideal.js';
import { parseScenario } from '../../../sim/scenario.js';

const H = 3_600_000;
const scenario = (shape: string, events: unknown[] = []) =>
  parseScenario({
    name: 'ideal',
    timeZone: 'America/New_York',
    start: '2026-03-03',
    traffic: { requestsPerDay: 1000, shape, events },
    accounts: [{ id: 'a', campaigns: [{ id: 'c', dailyBudget: 1 }] }],
  });

describe('ideal curve', () => {
  const day = dayWindowOf('2026-03-04', 'America/New_York');

  it('flat traffic: linear in time; noon peak: little at night, most by day', () => {
    const flat = new IdealCurve(idealTraffic(scenario('flat'))(day), day.startMs, 24_000_000);
    expect(flat.at(day.startMs + 6 * H, 24_000_000)).toBeCloseTo(6_000_000, -3);
    expect(flat.at(day.endMs, 24_000_000)).toBeCloseTo(24_000_000, -3);
    const noon = new IdealCurve(idealTraffic(scenario('noonPeak'))(day), day.startMs, 24_000_000);
    expect(noon.at(day.startMs + 6 * H, 24_000_000)).toBeLessThan(3_000_000);
    expect(noon.at(day.startMs + 18 * H, 24_000_000)).toBeGreaterThan(18_000_000);
  });

  it('starts at the plan’s creation and ignores unforeseeable events (spikes, outages)', () => {
    const events = [
      { from: '2026-03-04T10:00:00-05:00', to: '2026-03-04T11:00:00-05:00', factor: 0 },
      { from: '2026-03-04T15:00:00-05:00', to: '2026-03-04T16:00:00-05:00', factor: 5 },
    ];
    const c = new IdealCurve(idealTraffic(scenario('flat', events))(day), day.startMs + 8 * H, 16_000_000);
    const plain = new IdealCurve(idealTraffic(scenario('flat'))(day), day.startMs + 8 * H, 16_000_000);
    expect(c.at(day.startMs + 8 * H, 16_000_000)).toBe(0);
    // Linear from 8:00 over 16 hours, through the outage and the spike alike.
    for (const h of [10, 11, 15, 16, 20]) {
      expect(c.at(day.startMs + h * H, 16_000_000)).toBeCloseTo((h - 8) * 1_000_000, -3);
      expect(c.at(day.startMs + h * H, 16_000_000)).toBe(plain.at(day.startMs + h * H, 16_000_000));
    }
    expect(c.at(day.endMs, 16_000_000)).toBeCloseTo(16_000_000, -3);
  });

  it('a budget change re-anchors at its value, capped at the new budget', () => {
    const c = new IdealCurve(idealTraffic(scenario('flat'))(day), day.startMs, 24_000_000);
    const before = c.at(day.startMs + 12 * H, 24_000_000);
    expect(c.at(day.startMs + 12 * H, 36_000_000)).toBeCloseTo(before, -2);
    expect(c.at(day.endMs, 36_000_000)).toBeCloseTo(36_000_000, -3);
    const cut = new IdealCurve(idealTraffic(scenario('flat'))(day), day.startMs, 24_000_000);
    cut.at(day.startMs + 12 * H, 24_000_000);
    expect(cut.at(day.startMs + 12 * H, 6_000_000)).toBe(6_000_000);
    expect(cut.at(day.endMs, 6_000_000)).toBe(6_000_000);
  });

  it("runs at its mode's pace: ahead reaches the budget after 1 / 1.2 of the traffic", () => {
    const traffic = idealTraffic(scenario('flat'))(day);
    const ahead = new IdealCurve(traffic, day.startMs, 24_000_000, IDEAL_PACE.ahead);
    expect(IDEAL_PACE.even).toBe(1);
    expect(ahead.at(day.startMs + 10 * H, 24_000_000)).toBeCloseTo(12_000_000, -3);
    expect(ahead.at(day.startMs + 20 * H, 24_000_000)).toBe(24_000_000);
    expect(ahead.at(day.startMs + 19 * H, 24_000_000)).toBeLessThan(24_000_000);
  });
});
