/**
 * The controller over two simulated days in America/Los_Angeles (the second is the 25-hour
 * fall-back day), driven by the market model (noon-peak traffic with noise, iPinYou competing
 * prices, second-price auctions, notices delayed up to 60 s and 1 % duplicated), with the real
 * BudgetGuard (2 instances) enforcing the published E(t) on a real redis-server and every notice
 * applied through the real SpendTracker and live counters. Day 1 is a fresh campaign (flat curve);
 * on day 2 the curve is shaped by the traffic the controller learned on day 1.
 *
 * - demand above budget (3×): spends ≥ 98 % every day, never over the cap, tracks the
 *   traffic-shaped target within 5 % of the budget, and pays less per impression than the same
 *   campaign run ASAP on the same requests;
 * - demand below budget (0.5×): spends what the market allows (as much as its ASAP twin), never
 *   over the cap, no windup;
 * - a $1 budget (fewer impressions a day than ticks): neither overspends nor starves.
 */
import { describe, expect, it } from 'vitest';
import { dayWindowOf } from '../../../shared/budget/time-zone.js';
import { campaign, costPerImpression, daysOf, expectClean, simulatedDays } from './simulation.js';

const TZ = 'America/Los_Angeles';
const START = dayWindowOf('2026-10-31', TZ).startMs;
const END = dayWindowOf('2026-11-01', TZ).endMs;

/** Ticks at which the demand-limited campaign was published at full speed, out of all. */
const belowTicks = { full: 0, all: 0 };
const base = { timeZone: TZ, budget: 1_500_000 };

const run = simulatedDays(() => ({
  startMs: START,
  endMs: END,
  onTick: (_now, params) => {
    const p = params.get('c:below/campaign');
    if (!p) return;
    belowTicks.all++;
    if (p.throttle === 1 && p.bidMultiplier === 1) belowTicks.full++;
  },
  accounts: [
    {
      id: 'acc-market',
      timeZone: TZ,
      campaigns: [
        campaign('above', { ...base, demand: 3, seed: 11 }),
        campaign('above-asap', { ...base, demand: 3, seed: 11, pacingMode: 'asap' }),
        campaign('below', { ...base, demand: 0.5, seed: 12 }),
        campaign('below-asap', { ...base, demand: 0.5, seed: 12, pacingMode: 'asap' }),
        campaign('tiny', { ...base, budget: 1_000_000, demand: 5, seed: 13 }),
      ],
    },
  ],
}));

describe('pacing over simulated days (real guard, tracker and live counters)', () => {
  it('runs clean: counters equal the booked wins, no guard errors, a 25-hour day included', () => {
    expectClean(run());
    expect(dayWindowOf('2026-11-01', TZ).endMs - dayWindowOf('2026-11-01', TZ).startMs).toBe(25 * 3_600_000);
    expect(daysOf(run(), 'above').map((d) => d.day)).toEqual(['2026-10-31', '2026-11-01']);
  });

  it('demand above budget: ≥ 98 % spent every day, never over the cap', () => {
    for (const d of daysOf(run(), 'above')) {
      expect(d.spentMicros / d.budgetMicros).toBeGreaterThanOrEqual(0.98);
      expect(d.spentMicros).toBeLessThanOrEqual(d.budgetMicros);
      expect(d.maxOverCapMicros).toBeLessThanOrEqual(0);
    }
  });

  it('demand above budget: tracks the traffic-shaped target within 5 % once it has history', () => {
    const [, ...learned] = daysOf(run(), 'above');
    for (const d of learned) expect(d.maxDeviation).toBeLessThanOrEqual(0.05);
  });

  it('demand above budget: pays less per impression than ASAP on the same requests', () => {
    const paced = costPerImpression(daysOf(run(), 'above'));
    const asap = costPerImpression(daysOf(run(), 'above-asap'));
    expect(paced).toBeLessThan(asap);
    for (const d of daysOf(run(), 'above-asap')) expect(d.spentMicros).toBeLessThanOrEqual(d.budgetMicros);
  });

  it('demand below budget: bids at full speed, spends what the market allows (as ASAP does), never over the cap', () => {
    // Behind all day, it is pinned at full speed (throttle 1, multiplier 1) with nothing wound up…
    expect(belowTicks.full / belowTicks.all).toBeGreaterThan(0.97);
    const paced = daysOf(run(), 'below');
    const asap = daysOf(run(), 'below-asap');
    paced.forEach((d, i) => {
      expect(d.spentMicros).toBeLessThanOrEqual(d.budgetMicros);
      expect(d.spentMicros / d.budgetMicros).toBeLessThan(0.6);
      // …so it buys what its ASAP twin buys on the same requests (up to sampling noise: the two
      // draw their bids and win notices from one random stream).
      expect(d.spentMicros).toBeGreaterThanOrEqual(0.93 * (asap[i]?.spentMicros ?? 0));
    });
  });

  it('a $1 budget neither overspends nor starves', () => {
    for (const d of daysOf(run(), 'tiny')) {
      expect(d.spentMicros).toBeLessThanOrEqual(d.budgetMicros);
      expect(d.spentMicros / d.budgetMicros).toBeGreaterThanOrEqual(0.98);
      expect(d.impressions).toBeLessThan(8640);
    }
    const [, ...learned] = daysOf(run(), 'tiny');
    for (const d of learned) expect(d.maxDeviation).toBeLessThanOrEqual(0.05);
  });
});
