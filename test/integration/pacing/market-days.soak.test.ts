/**
 * The controller over two simulated days in America/Los_Angeles (the second is the 25-hour
 * fall-back day), on the simulator's engine (the real pacer, publisher and readers, BudgetGuard × 2
 * enforcing the published E(t) on a real redis-server, every notice applied through the real
 * SpendTracker and live counters) and its market model (noon-peak traffic with noise, iPinYou
 * competing prices, second-price auctions, notices delayed up to 60 s and 1 % duplicated). Day 1
 * is a fresh campaign (the built-in prior's shape); on day 2 the curve is shaped by the traffic
 * the controller learned on day 1. The ASAP runs are the `asap` strategy on the same requests.
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
import { costPerImpression, daysOf, expectClean, simulatedDays, soakScenario } from './simulation.js';

const TZ = 'America/Los_Angeles';

/** Ticks at which the demand-limited campaign was published at full speed, out of all. */
const belowTicks = { full: 0, all: 0 };
const B = 1_500_000;

const runs = simulatedDays(() => [
  {
    scenario: soakScenario({
      name: 'market',
      timeZone: TZ,
      start: '2026-10-31',
      days: 2,
      seed: 11,
      accounts: [
        {
          id: 'acc-market',
          campaigns: [
            { id: 'above', budget: B, demand: 3 },
            { id: 'below', budget: B, demand: 0.5 },
            { id: 'tiny', budget: 1_000_000, demand: 5 },
          ],
        },
      ],
    }),
    asap: true,
    onTick: (_now, params) => {
      const p = params.get('c:below/campaign');
      if (!p) return;
      belowTicks.all++;
      if (p.throttle === 1 && p.bidMultiplier === 1) belowTicks.full++;
    },
  },
]);
const paced = () => runs('market');
const asap = () => runs('market', 'asap');

describe('pacing over simulated days (real pacer, readers, guards, tracker and live counters)', () => {
  it('runs clean: counters equal the booked wins, no errors, a 25-hour day included', () => {
    expectClean(paced());
    expectClean(asap());
    expect(dayWindowOf('2026-11-01', TZ).endMs - dayWindowOf('2026-11-01', TZ).startMs).toBe(25 * 3_600_000);
    expect(daysOf(paced(), 'above').map((d) => d.day)).toEqual(['2026-10-31', '2026-11-01']);
  });

  it('demand above budget: ≥ 98 % spent every day, never over the cap', () => {
    for (const d of daysOf(paced(), 'above')) {
      expect(d.spentMicros / d.budgetMicros).toBeGreaterThanOrEqual(0.98);
      expect(d.spentMicros).toBeLessThanOrEqual(d.budgetMicros);
      expect(d.maxOverCapMicros).toBeLessThanOrEqual(0);
    }
  });

  it('demand above budget: tracks the traffic-shaped target within 5 % once it has history', () => {
    const [, ...learned] = daysOf(paced(), 'above');
    expect(learned.length).toBe(1);
    for (const d of learned) expect(d.maxDeviation).toBeLessThanOrEqual(0.05);
  });

  it('demand above budget: pays less per impression than ASAP on the same requests', () => {
    expect(daysOf(asap(), 'above').length).toBe(2);
    expect(costPerImpression(daysOf(paced(), 'above'))).toBeLessThan(
      costPerImpression(daysOf(asap(), 'above')),
    );
    for (const d of daysOf(asap(), 'above')) expect(d.spentMicros).toBeLessThanOrEqual(d.budgetMicros);
  });

  it('demand below budget: bids at full speed, spends what the market allows (as ASAP does), never over the cap', () => {
    // Behind all day, it is published at full speed (throttle 1, multiplier 1) with nothing wound up…
    expect(belowTicks.all).toBeGreaterThan(2 * 8640);
    console.log(JSON.stringify({ belowFullSpeedShare: belowTicks.full / belowTicks.all }));
    expect(belowTicks.full / belowTicks.all).toBeGreaterThan(0.97);
    const p = daysOf(paced(), 'below');
    const a = daysOf(asap(), 'below');
    expect(p.length).toBe(2);
    p.forEach((d, i) => {
      expect(d.spentMicros).toBeLessThanOrEqual(d.budgetMicros);
      expect(d.spentMicros / d.budgetMicros).toBeLessThan(0.6);
      // …so it buys what its ASAP twin buys on the same requests (up to sampling noise: the two
      // draw their bids and win notices from the runs' random streams).
      expect(d.spentMicros).toBeGreaterThanOrEqual(0.93 * (a[i]?.spentMicros ?? Number.POSITIVE_INFINITY));
    });
  });

  it('a $1 budget neither overspends nor starves', () => {
    const days = daysOf(paced(), 'tiny');
    expect(days.length).toBe(2);
    for (const d of days) {
      expect(d.spentMicros).toBeLessThanOrEqual(d.budgetMicros);
      expect(d.spentMicros / d.budgetMicros).toBeGreaterThanOrEqual(0.98);
      expect(d.impressions).toBeLessThan(8640);
    }
    const [, ...learned] = days;
    for (const d of learned) expect(d.maxDeviation).toBeLessThanOrEqual(0.05);
  });
});
