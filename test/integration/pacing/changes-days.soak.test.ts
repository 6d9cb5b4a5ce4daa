/**
 * The controller over three simulated days in Europe/Berlin (the third is the 23-hour
 * spring-forward day), on the simulator's engine like market-days.soak.test.ts (the real pacer,
 * publisher and readers, BudgetGuard × 2 on real Redis, the real SpendTracker and live counters,
 * the market model), in three worlds of their own (a world's auction kind and traffic events are
 * its market's):
 *
 * - a budget raised (×1.5) or cut (×0.5) at local noon of day 3 is honoured from then on: E(t)
 *   keeps its value at noon and spreads the new remainder over the afternoon; spend follows the
 *   new curve within 5 % and ends at the new budget (≥ 98 %, never above);
 * - first-price auctions: shading lowers the cost per impression below ASAP's on the same
 *   requests while tracking the target;
 * - a campaign whose traffic stops for 5 hours (it cannot spend) winds nothing up: when traffic
 *   returns it catches up to E(t) under the cap, then returns to its usual bid multiplier.
 */
import { describe, expect, it } from 'vitest';
import { dayWindowOf } from '../../../shared/budget/time-zone.js';
import { evaluateCurve } from '../../../shared/pacing/types.js';
import {
  costPerImpression,
  daysOf,
  expectClean,
  type SoakWorldSpec,
  simulatedDays,
  soakScenario,
} from './simulation.js';

const TZ = 'Europe/Berlin';
const DAY3 = dayWindowOf('2026-03-29', TZ);
const END = DAY3.endMs;
/** Local noon of the 23-hour day (clocks jumped from 02:00 to 03:00 that morning). */
const NOON3 = DAY3.startMs + 11 * 3_600_000;
const OUTAGE = { fromMs: DAY3.startMs + 5 * 3_600_000, toMs: DAY3.startMs + 10 * 3_600_000 };
const B = 1_500_000;

/** The outage campaign's multiplier, throttle and gap below E per tick of days 2 and 3. */
const outageTrace: { at: number; multiplier: number; throttle: number; gap: number }[] = [];
const days = { timeZone: TZ, start: '2026-03-27', days: 3 } as const;
const world = (name: string, seed: number, campaigns: SoakWorldSpec['accounts'][number]['campaigns']) => ({
  ...days,
  name,
  seed,
  accounts: [{ id: `acc-${name}`, campaigns }],
});

const runs = simulatedDays(() => [
  {
    scenario: soakScenario({
      ...world('changes', 21, [
        { id: 'raise', budget: B, demand: 4 },
        { id: 'cut', budget: B, demand: 3 },
      ]),
      budgetChanges: [
        { atMs: NOON3, campaign: 'raise', budget: 1.5 * B },
        { atMs: NOON3, campaign: 'cut', budget: 0.5 * B },
      ],
    }),
  },
  {
    scenario: soakScenario({
      ...world('first', 23, [{ id: 'first', budget: B, demand: 3 }]),
      auction: 'first-price',
    }),
    asap: true,
  },
  {
    scenario: soakScenario({
      ...world('outage', 24, [{ id: 'outage', budget: B, demand: 3 }]),
      events: [{ ...OUTAGE, factor: 0 }],
    }),
    onTick: (now, params, spend) => {
      if (now < DAY3.startMs - 86_400_000) return;
      const p = params.get('c:outage/campaign');
      const s = spend.get('c:outage/campaign');
      if (!p || !s) return;
      const gap = (evaluateCurve(p.curve, now) - s.confirmedMicros - s.inFlightMicros) / B;
      outageTrace.push({ at: now, multiplier: p.bidMultiplier, throttle: p.throttle, gap });
    },
  },
]);
describe('budget changes, first price and a traffic outage over simulated days', () => {
  it('runs clean on a 23-hour day: counters equal the booked wins, no guard errors', () => {
    for (const name of ['changes', 'first', 'outage']) expectClean(runs(name));
    expectClean(runs('first', 'asap'));
    expect(DAY3.endMs - DAY3.startMs).toBe(23 * 3_600_000);
    expect(daysOf(runs('changes'), 'raise').map((d) => d.day)).toEqual([
      '2026-03-27',
      '2026-03-28',
      '2026-03-29',
    ]);
  });

  it('a budget raised at noon is honoured from then on', () => {
    const [d1, d2, d3] = daysOf(runs('changes'), 'raise');
    for (const d of [d1, d2]) expect((d?.spentMicros ?? 0) / B).toBeGreaterThanOrEqual(0.98);
    expect(d3?.budgetMicros).toBe(1.5 * B);
    expect((d3?.spentMicros ?? 0) / (1.5 * B)).toBeGreaterThanOrEqual(0.98);
    expect(d3?.spentMicros).toBeLessThanOrEqual(1.5 * B);
    expect(d3?.maxDeviationAfterChange).toBeLessThanOrEqual(0.05);
  });

  it('a budget cut at noon is honoured from then on', () => {
    const d3 = daysOf(runs('changes'), 'cut')[2];
    expect(d3?.budgetMicros).toBe(0.5 * B);
    expect(d3?.spentMicros).toBeLessThanOrEqual(0.5 * B);
    expect((d3?.spentMicros ?? 0) / (0.5 * B)).toBeGreaterThanOrEqual(0.98);
    expect(d3?.maxDeviationAfterChange).toBeLessThanOrEqual(0.05);
    expect(d3?.maxOverCapMicros).toBeLessThanOrEqual(0);
  });

  it('first price: tracks the target and pays less per impression than ASAP', () => {
    const days = daysOf(runs('first'), 'first');
    expect(days.length).toBe(3);
    for (const d of days) {
      expect(d.spentMicros / d.budgetMicros).toBeGreaterThanOrEqual(0.98);
      expect(d.spentMicros).toBeLessThanOrEqual(d.budgetMicros);
    }
    for (const d of days.slice(1)) expect(d.maxDeviation).toBeLessThanOrEqual(0.05);
    expect(costPerImpression(days)).toBeLessThan(
      0.9 * costPerImpression(daysOf(runs('first', 'asap'), 'first')),
    );
  });

  it('a campaign that cannot spend for 5 hours catches up under the cap and winds nothing up', () => {
    const d3 = daysOf(runs('outage'), 'outage')[2];
    expect(d3?.spentMicros).toBeLessThanOrEqual(B);
    expect((d3?.spentMicros ?? 0) / B).toBeGreaterThanOrEqual(0.98);
    const during = outageTrace.filter((t) => t.at >= OUTAGE.fromMs && t.at < OUTAGE.toMs);
    // It fell behind while it could not spend (pinned at full speed, nothing to integrate)…
    expect(Math.max(...during.map((t) => t.gap))).toBeGreaterThan(0.05);
    const pinned = during.filter((t) => t.at >= OUTAGE.fromMs + 1_800_000);
    expect(pinned.length).toBeGreaterThan(1500);
    expect(pinned.every((t) => t.multiplier === 1 && t.throttle === 1)).toBe(true);
    // …caught up within a few hours of the traffic's return (back to its usual working gap below
    // E: the margin plus the guards' floats, ~1–2 % of the budget by day)…
    const caughtUp = outageTrace.find((t) => t.at > OUTAGE.toMs && t.gap <= 0.02);
    expect(caughtUp).toBeDefined();
    const at = caughtUp?.at ?? END;
    expect(at - OUTAGE.toMs).toBeLessThan(3 * 3_600_000);
    // …and an hour later shades as it did at the same hours the day before: no integral left over.
    const window = (from: number) => outageTrace.filter((t) => t.at >= from && t.at < from + 3_600_000);
    const after = window(at + 3_600_000);
    const before = window(at + 3_600_000 - 86_400_000);
    expect(after.length).toBeGreaterThan(300);
    expect(before.length).toBeGreaterThan(300);
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
    const m0 = median(before.map((t) => t.multiplier * t.throttle));
    const m1 = median(after.map((t) => t.multiplier * t.throttle));
    console.log(
      JSON.stringify({ outage: { caughtUpAfterMin: (at - OUTAGE.toMs) / 60_000, dayBefore: m0, after: m1 } }),
    );
    expect(m1).toBeLessThan(1.5 * m0);
    expect(m1).toBeGreaterThan(0.5 * m0);
  });
});
