/**
 * The full-speed comparison (sim/full-speed.ts): only intervals in which the paced run bid at
 * throttle 1 and multiplier 1 at both ends and ASAP had not reached its cap count, only for
 * fillable campaign-days the paced run left short.
 */
import { describe, expect, it } from 'vitest';
import type { PlanDayResult } from '../../../sim/engine/types.js';
import { fullSpeedAgainstAsap } from '../../../sim/full-speed.js';
import { campaignDay } from './plan-day.js';

type Sample = [number, number, number, number, number];
const M = 600_000;

const day = (id: string, spent: number, series: Sample[]) => campaignDay(id, spent, { series });

// [t, spent, E, throttle, multiplier]
const paced = [
  day('short', 900_000, [
    [0, 0, 0, 1, 1],
    [M, 100_000, 0, 1, 1], // full speed at both ends: counted
    [2 * M, 150_000, 0, 0.5, 1], // throttled: this interval and the next are not
    [3 * M, 250_000, 0, 1, 1],
    [4 * M, 350_000, 0, 1, 1], // full speed, but ASAP is at its cap by then
  ]),
  day('filled', 990_000, [
    [0, 0, 0, 1, 1],
    [M, 400_000, 0, 1, 1],
  ]),
  day('unfillable', 500_000, [
    [0, 0, 0, 1, 1],
    [M, 400_000, 0, 1, 1],
  ]),
];
const asap = [
  day('short', 995_000, [
    [0, 0, 0, 1, 1],
    [M, 125_000, 0, 1, 1],
    [2 * M, 300_000, 0, 1, 1],
    [3 * M, 600_000, 0, 1, 1],
    [4 * M, 990_000, 0, 1, 1],
  ]),
  day('filled', 995_000, [
    [0, 0, 0, 1, 1],
    [M, 500_000, 0, 1, 1],
  ]),
  day('unfillable', 600_000, [
    [0, 0, 0, 1, 1],
    [M, 500_000, 0, 1, 1],
  ]),
];
const fillable = new Set(['c:short/campaign|2026-03-04', 'c:filled/campaign|2026-03-04']);

describe('full speed against ASAP', () => {
  it('counts the intervals at full speed with ASAP still spending, for short fillable days only', () => {
    const r = fullSpeedAgainstAsap({ plans: paced }, { plans: asap }, fillable);
    expect(r.rows).toEqual([
      {
        campaignId: 'short',
        day: '2026-03-04',
        budgetMicros: 1_000_000,
        intervals: 1,
        pacedMicros: 100_000,
        asapMicros: 125_000,
      },
    ]);
    expect(r.ratio).toBe(0.8);
  });

  it('has no ratio without series or without a short fillable day', () => {
    const bare = paced.map(({ series: _s, ...p }) => p as PlanDayResult);
    expect(fullSpeedAgainstAsap({ plans: bare }, { plans: asap }, fillable).ratio).toBeNull();
    expect(fullSpeedAgainstAsap({ plans: paced }, { plans: asap }, fillable, 0.5).rows).toEqual([]);
  });
});
