/**
 * The pacing-quality bounds on sim/scenarios/flight-week.json (see quality.ts) — each flight day
 * held to its own budget, min(cap, what the flight has left ÷ days left) — and the flights' own
 * promises (docs/spend.md, "Flights"): a fillable flight spends ≥ 98 % of its budget, no flight
 * passes its budget by more than 0.5 %, no day its cap by more than 0.5 % (under Paceline and
 * under ASAP), and the days after the two low-traffic days get budgets above the flight's even
 * share (the catch-up, visible in the report's flight rows).
 *
 * One bound is loosened, for a measured and documented gap (docs/pacing-quality.md, "Results"):
 * a fillable campaign-day ≥ 95 % instead of 98 %. On the two days whose traffic falls to a quarter
 * from midnight, without warning in the history, a paced campaign is throttled in the first hours
 * by a forecast of a normal day and ends the day at 95.7 % (news-flight, 2026-03-05); the flight
 * takes the shortfall back on the following days (≥ 98 % of every fillable flight, held below).
 */
import { describe, expect } from 'vitest';
import { flightRows, flightsOf } from '../../../sim/flights.js';
import { loadScenario } from '../../../sim/main.js';
import { ACCEPTANCE, qualityBounds } from './quality.js';

const scenario = loadScenario('sim/scenarios/flight-week.json');
const flights = flightsOf(scenario);
/** The first day after the low-traffic days (Thursday and Friday). */
const AFTER_LOW = '2026-03-07';

describe('simulator: flight-week', () =>
  qualityBounds(
    'flight-week',
    (json, runs) => {
      const asap = runs.find((r) => r.strategy === 'asap');
      for (const run of runs) {
        for (const f of flightRows(run, flights, asap)) {
          const what = `${run.strategy} ${f.campaignId}`;
          expect(f.days.length, what).toBe(7);
          expect(f.overFlight, what).toBeLessThanOrEqual(0.005);
          expect(f.maxDayOverCap, what).toBeLessThanOrEqual(0.005);
        }
      }
      const rows = json.strategies.paceline?.flights ?? [];
      const fillable = rows.filter((f) => f.fillable);
      expect(fillable.length).toBeGreaterThanOrEqual(2);
      for (const f of fillable) {
        expect(f.utilisation, f.campaignId).toBeGreaterThanOrEqual(0.98);
        // The shortfall of the low days raised the next day's budget above the even share.
        const after = f.days.find((d) => d.day === AFTER_LOW);
        expect(after?.budgetMicros, f.campaignId).toBeGreaterThan(f.flightBudgetMicros / 7);
      }
    },
    { ...ACCEPTANCE, utilisationMin: 0.95 },
  ));
