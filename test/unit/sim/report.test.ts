/**
 * The report's aggregates (sim/report.ts): a campaign whose scenario mode only caps (`asap`,
 * `asap-hourly`) is left out of the deviation and max-ahead aggregates — its curve is a ceiling —
 * while its utilisation still counts; the same campaign paced `even` counts in all of them. Lost
 * bids are split between our own bids and the market over the fillable campaign-days.
 */
import { describe, expect, it } from 'vitest';
import { campaignRows, ceilingOnlyOf, summarise } from '../../../sim/report.js';
import type { PlanDayResult, StrategyRun } from '../../../sim/runner.js';
import { parseScenario } from '../../../sim/scenario.js';
import { campaignDay } from './plan-day.js';

function plan(id: string, spent: number, maxDeviation: number, maxAhead: number): PlanDayResult {
  return campaignDay(id, spent, {
    impressions: 100,
    clicks: 1,
    maxDeviation,
    rmsDeviation: maxDeviation / 2,
    maxAhead,
    minutesAlive: 1000,
  });
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

  it('splits the lost bids of the fillable campaign-days between our own bids and the market', () => {
    const losing = (id: string, spent: number, own: number, market: number): PlanDayResult => ({
      ...plan(id, spent, 0.01, 0),
      lostToOwn: own,
      lostToMarket: market,
    });
    // 100 impressions each: paced bid 100 + 60 + 40 times, small 100 + 100 + 0, unfillable 100 + 0 + 900.
    const counted = {
      strategy: 'paceline',
      plans: [
        losing('paced', 990_000, 60, 40),
        losing('small', 995_000, 100, 0),
        losing('deep', 400_000, 0, 900),
      ],
      errors: [],
    } as unknown as StrategyRun;
    const fill = new Set(['c:paced/campaign|2026-03-04', 'c:small/campaign|2026-03-04']);
    const s = summarise(counted, fill);
    expect(s.lostToOwnShareFillable).toBe(0.4); // (60 + 100) ÷ (200 + 200)
    expect(s.lostToMarketShareFillable).toBe(0.1); // 40 ÷ 400: the unfillable one's 900 not counted
    const rows = campaignRows(counted, fill);
    expect(rows.map((r) => r.lostToOwnShare)).toEqual([0.3, 0.5, 0]);
    // Results without the figures (an older run's JSON) give no share rather than a wrong one.
    expect(summarise(run, fillable).lostToOwnShareFillable).toBeNull();
  });
});
