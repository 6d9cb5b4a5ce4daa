/**
 * The pacing-quality acceptance on one shipped scenario, as tests: the scenario's days run once per
 * file (Paceline, with its history days, and ASAP, which defines the fillable campaigns, on the
 * same seed, on a real redis-server), then Paceline must
 * - spend ≥ 98 % of the budget of every fillable campaign-day;
 * - overspend ≤ 0.5 % on every scored plan-day ($1 budgets, account and arm plans included);
 * - stay within 5 % of the budget of the published target curve on every fillable campaign-day;
 * - keep the median over fillable campaign-days of their max-ahead (spend beyond a clairvoyant
 *   traffic-following curve, sim/ideal.ts) ≤ 1 % of the budget;
 * - pay less per impression than ASAP (on some scenarios by a stated margin);
 * - book every win exactly once (live counters = booked spend) with no guard / tracker errors.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { RunningRedis } from '../../../local/emulators/redis.js';
import type { RedisClient } from '../../../shared/redis/connect.js';
import { loadScenario, simulate } from '../../../sim/main.js';
import type { SimJson } from '../../../sim/report.js';
import type { StrategyRun } from '../../../sim/runner.js';
import { redisForFile } from '../pacing/simulation.js';

/**
 * The acceptance bounds (DESIGN.md "Pacing quality"). A scenario may only loosen them for a measured, documented gap
 * (docs/pacing-quality.md "Results"), never silently.
 */
export interface Bounds {
  readonly utilisationMin: number;
  readonly deviationMax: number;
  /** Median over fillable campaign-days of their max-ahead, fraction of the budget. */
  readonly aheadMedianMax: number;
  /** Cost per impression at most this fraction of ASAP's (1: merely below it). */
  readonly costVsAsapMax: number;
}

/** The acceptance bounds. */
export const ACCEPTANCE: Bounds = {
  utilisationMin: 0.98,
  deviationMax: 0.05,
  aheadMedianMax: 0.01,
  costVsAsapMax: 1,
};

/**
 * Declares the bounds tests of `sim/scenarios/<name>.json`; `series`: keep every plan-day's
 * 10-minute series for `extra`.
 */
export function qualityBounds(
  name: string,
  extra?: (json: SimJson, runs: readonly StrategyRun[]) => void,
  bounds: Bounds = ACCEPTANCE,
  series = false,
): void {
  let server: RunningRedis | undefined;
  let redis: RedisClient | undefined;
  let result: { json: SimJson; runs: StrategyRun[] } | undefined;
  /** Plans whose budget changes during the scenario (`PlanDayResult.plan` keys). */
  let cutPlans = new Set<string>();
  beforeAll(async () => {
    ({ server, redis } = await redisForFile());
    const scenario = loadScenario(`sim/scenarios/${name}.json`);
    cutPlans = new Set(
      scenario.budgetChanges.map((c) =>
        c.campaignId === undefined
          ? `a:${c.accountId}/account`
          : `c:${c.campaignId}/${c.armId === undefined ? 'campaign' : `arm:${c.armId}`}`,
      ),
    );
    result = await simulate(scenario, {
      strategies: ['paceline'],
      redis,
      ...(series ? { series: true } : {}),
    });
    console.log(JSON.stringify(result.json));
  }, 3_600_000);
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });
  const get = () => {
    if (!result) throw new Error('The simulation did not run (see the beforeAll error).');
    return result;
  };

  it(`${name}: Paceline meets the pacing-quality bounds, beside ASAP on the same seed`, () => {
    const { json } = get();
    const p = json.strategies.paceline;
    const a = json.strategies.asap;
    if (!p || !a) throw new Error('both strategies must have run');
    expect(p.fillableCampaignDays).toBeGreaterThan(0);
    expect(p.utilisationMinFillable).toBeGreaterThanOrEqual(bounds.utilisationMin);
    expect(p.campaignsUnder95Fillable).toBe(0);
    expect(p.overspendMax).toBeLessThanOrEqual(0.005);
    expect(p.campaignsOverBudget).toBe(0);
    expect(p.deviationMax).toBeLessThanOrEqual(bounds.deviationMax);
    expect(p.aheadMedianFillable).toBeLessThanOrEqual(bounds.aheadMedianMax);
    expect(p.costPerImpression).toBeLessThan(a.costPerImpression);
    expect(p.costPerImpression).toBeLessThanOrEqual(bounds.costVsAsapMax * a.costPerImpression);
  });

  it(`${name}: ASAP (the guard alone) does not overspend either`, () => {
    const asap = get().runs.find((r) => r.strategy === 'asap');
    if (!asap) throw new Error('asap did not run');
    // Overspend is measured against the budget in force at the day's end; a plan cut mid-day
    // below what ASAP had already spent under its old budget shows as over it although no bid
    // exceeded the budget in force when it was made (docs/pacing-quality.md "The report"): those
    // plans are left out here. Paceline is held to the bound on every plan (above).
    for (const p of asap.plans) {
      if (!p.scored || cutPlans.has(p.plan)) continue;
      expect(
        (p.spentMicros - p.budgetMicros) / p.budgetMicros,
        `asap ${p.plan} ${p.day}`,
      ).toBeLessThanOrEqual(0.005);
    }
  });

  it(`${name}: every win booked exactly once, no background errors`, () => {
    for (const run of get().runs) {
      expect(run.errors).toEqual([]);
      for (const p of run.plans)
        expect(p.countersMicros, `${run.strategy} ${p.plan} ${p.day}`).toBe(p.spentMicros);
    }
  });

  if (extra) it(`${name}: scenario-specific checks`, () => extra(get().json, get().runs));
}
