/**
 * The regional dashboard's "spend vs target, top campaigns" series: the publishing pacer reports
 * the shard's largest campaign plans with spend and E(t), and emits them as EMF metrics with a
 * campaign dimension (the names the stack's dashboard widget queries).
 */
import { describe, expect, it } from 'vitest';
import { type ResolvedPlan, resolvePlan } from '../../../shared/budget/model.js';
import { pacerMetricNames, spendTargetMetricNames } from '../../../shared/pacing/metrics.js';
import { topCampaignPoints } from '../../../shared/pacing/pacer.js';
import type { PlanPacingParams, PlanSpendSnapshot } from '../../../shared/pacing/types.js';
import { emittedRecords } from './fixture.js';

const DAY_START = Date.UTC(2026, 10, 23);
const DAY_END = DAY_START + 86_400_000;

function campaign(id: string, budget: number): ResolvedPlan {
  return resolvePlan(
    { level: 'campaign', accountId: 'acct', campaignId: id, dailyBudgetMicros: budget, pacingMode: 'even' },
    'UTC',
  );
}

function params(plan: ResolvedPlan): PlanPacingParams {
  return {
    planId: plan.planId,
    day: '2026-11-23',
    budgetMicros: plan.dailyBudgetMicros,
    mode: 'even',
    throttle: 1,
    bidMultiplier: 1,
    curve: { atMs: [DAY_START, DAY_END], micros: [0, plan.dailyBudgetMicros] },
  };
}

const spendOf = (confirmed: number, inFlight: number): PlanSpendSnapshot => ({
  initialised: true,
  confirmedMicros: confirmed,
  inFlightMicros: inFlight,
  leasedMicros: 999,
});

describe('top campaigns of a tick', () => {
  it('keeps the k largest campaign plans, largest first, with spend (confirmed + in flight) and E(t)', () => {
    const budgets = [5, 50, 20, 80, 10, 80, 1, 30].map((b) => b * 1_000_000);
    const plans = budgets.map((b, i) => ({ plan: campaign(`c${i}`, b) }));
    const account = resolvePlan(
      { level: 'account', accountId: 'acct', dailyBudgetMicros: 900_000_000, pacingMode: 'even' },
      'UTC',
    );
    plans.push({ plan: account }); // the largest budget, but not a campaign plan
    const spend = plans.map((_, i) => spendOf(i * 1000, 7));
    const results = plans.map((p) => ({ params: params(p.plan) }));
    const noon = DAY_START + 43_200_000;
    const top = topCampaignPoints(plans, spend, results, noon, 3);
    expect(top.map((t) => t.campaignId)).toEqual(['c3', 'c5', 'c1']);
    expect(top[0]).toEqual({
      campaignId: 'c3',
      budgetMicros: 80_000_000,
      spendMicros: 3007,
      targetMicros: 40_000_000,
    });
    expect(topCampaignPoints(plans, spend, results, noon, 20)).toHaveLength(8);
  });

  it('emits spend and target per campaign with a campaign dimension, once per tick', () => {
    const records = emittedRecords({
      topCampaigns: [
        { campaignId: 'big', budgetMicros: 9, spendMicros: 1200, targetMicros: 1500 },
        { campaignId: 'small', budgetMicros: 1, spendMicros: 10, targetMicros: 11 },
      ],
    }).filter((r) => spendTargetMetricNames.spend in r);
    expect(
      records.map((r) => [r.campaign, r[spendTargetMetricNames.spend], r[spendTargetMetricNames.target]]),
    ).toEqual([
      ['big', 1200, 1500],
      ['small', 10, 11],
    ]);
  });
  it('emits the allocation authority age function-wide when the tick followed an authority', () => {
    const emitted = (allocation: unknown): Record<string, unknown>[] =>
      emittedRecords({
        campaignsPaced: 0,
        topCampaigns: [],
        ...(allocation ? { sharing: { allocation } } : {}),
      }).filter((r) => pacerMetricNames.allocationAuthorityAge in r);
    const records = emitted({ authorityAgeMs: 95_000 });
    expect(records).toHaveLength(1);
    // the alarm's dimensions: service only (no shard, no instance)
    expect(records[0]).toMatchObject({ [pacerMetricNames.allocationAuthorityAge]: 95, service: 'pacer' });
    expect(records[0]).not.toHaveProperty('shard');
    // one region (no allocation outcome) or no authority followed: nothing (missing data is fine)
    expect(emitted(undefined)).toEqual([]);
    expect(emitted({ writes: 0 })).toEqual([]);
  });
});
