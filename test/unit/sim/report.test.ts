/**
 * The report's aggregates (sim/report.ts): a campaign whose scenario mode only caps (`asap`,
 * `asap-hourly`) is left out of the deviation and max-ahead aggregates — its curve is a ceiling —
 * while its utilisation still counts; the same campaign paced `even` counts in all of them.
 */
import { describe, expect, it } from 'vitest';
import { ceilingOnlyOf, summarise } from '../../../sim/report.js';
import type { PlanDayResult, StrategyRun } from '../../../sim/runner.js';
import { parseScenario } from '../../../sim/scenario.js';

function plan(id: string, spent: number, maxDeviation: number, maxAhead: number): PlanDayResult {
  return {
    plan: `c:${id}/campaign`,
    level: 'campaign',
    campaignId: id,
    day: '2026-03-04',
    scored: true,
    budgetMicros: 1_000_000,
    spentMicros: spent,
    countersMicros: spent,
    chargedMicros: spent,
    impressions: 100,
    clicks: 1,
    maxDeviation,
    rmsDeviation: maxDeviation / 2,
    maxOverCapMicros: 0,
    maxAhead,
    minutesAlive: 1000,
  };
}

const run = {
  strategy: 'paceline',
  plans: [plan('paced', 990_000, 0.02, 0.001), plan('capped', 985_000, 0.4, 0.3)],
  errors: [],
} as unknown as StrategyRun;
const fillable = new Set(['c:paced/campaign|2026-03-04', 'c:capped/campaign|2026-03-04']);
const scenarioWith = (mode: string) =>
  parseScenario({
    name: 'report',
    timeZone: 'America/New_York',
    start: '2026-03-03',
    traffic: { requestsPerDay: 1000, shape: 'flat' },
    accounts: [
      {
        id: 'a',
        campaigns: [
          { id: 'paced', dailyBudget: 1 },
          { id: 'capped', dailyBudget: 1, pacingMode: mode },
        ],
      },
    ],
  });

describe('report aggregates', () => {
  it('leaves a campaign that only caps out of deviation and max-ahead, not out of utilisation', () => {
    for (const mode of ['asap', 'asap-hourly']) {
      const ceilingOnly = ceilingOnlyOf(scenarioWith(mode));
      expect([...ceilingOnly]).toEqual(['capped']);
      const s = summarise(run, fillable, ceilingOnly);
      expect(s.deviationMax).toBe(0.02);
      expect(s.aheadMaxFillable).toBe(0.001);
      expect(s.utilisationMinFillable).toBe(0.985);
      expect(s.fillableCampaignDays).toBe(2);
    }
  });

  it('counts the same campaign paced even or ahead in every aggregate', () => {
    for (const mode of ['even', 'ahead']) {
      const s = summarise(run, fillable, ceilingOnlyOf(scenarioWith(mode)));
      expect(s.deviationMax).toBe(0.4);
      expect(s.aheadMaxFillable).toBe(0.3);
    }
  });
});
