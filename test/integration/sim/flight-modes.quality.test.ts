/**
 * The pacing-quality bounds on sim/scenarios/flight-modes.json (see quality.ts) — each flight day
 * held to its own budget and curve — and the flight modes' promises (docs/spend.md, "Flights"):
 * two flights alike in budget, cap, targeting and valuation, one `even` and one `front-loaded`,
 * both spend ≥ 98 % of the flight and never pass it or a day's cap by more than 0.5 %; the
 * front-loaded one has spent 1.15–1.35 × what the even one has by the end of the flight's first
 * half (its schedule is due 1.25 ×), its day budgets fall day by day, and the even one's do not.
 */
import { describe, expect } from 'vitest';
import { flightRows, flightsOf } from '../../../sim/flights.js';
import { loadScenario } from '../../../sim/main.js';
import { qualityBounds } from './quality.js';

const scenario = loadScenario('sim/scenarios/flight-modes.json');
const flights = flightsOf(scenario);

describe('simulator: flight-modes', () =>
  qualityBounds('flight-modes', (json, runs) => {
    const asap = runs.find((r) => r.strategy === 'asap');
    for (const run of runs) {
      for (const f of flightRows(run, flights, asap)) {
        const what = `${run.strategy} ${f.campaignId}`;
        expect(f.overFlight, what).toBeLessThanOrEqual(0.005);
        expect(f.maxDayOverCap, what).toBeLessThanOrEqual(0.005);
      }
    }
    const rows = json.strategies.paceline?.flights ?? [];
    const even = rows.find((f) => f.campaignId === 'news-even-flight');
    const front = rows.find((f) => f.campaignId === 'news-front-flight');
    if (!even || !front) throw new Error('both flights must be in the report');
    for (const f of [even, front]) expect(f.utilisation, f.campaignId).toBeGreaterThanOrEqual(0.98);
    // The first half of five days: two days and half the third.
    const half = (f: typeof even) =>
      f.days.slice(0, 2).reduce((x, d) => x + d.spentMicros, 0) + (f.days[2]?.spentMicros ?? 0) / 2;
    const lead = half(front) / half(even);
    expect(lead).toBeGreaterThanOrEqual(1.15);
    expect(lead).toBeLessThanOrEqual(1.35);
    for (let k = 1; k < front.days.length; k++)
      expect(front.days[k]?.budgetMicros).toBeLessThan(front.days[k - 1]?.budgetMicros as number);
    const evenShare = even.flightBudgetMicros / even.days.length;
    for (const d of even.days) expect(Math.abs(d.budgetMicros - evenShare) / evenShare).toBeLessThan(0.02);
  }));
