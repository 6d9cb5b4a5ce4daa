/**
 * The delivery bands the publishing pacer counts once a minute (shared/pacing/delivery-counts.ts),
 * their EMF records (function-wide, behind per reason) and the delivery alarms as CloudWatch
 * evaluates them (`alarmFires`): a plan behind every minute for 30 minutes raises
 * `DeliveryBehind`, a minute on pace in between does not.
 */
import { describe, expect, it } from 'vitest';
import { type BudgetPlan, type ResolvedPlan, resolvePlan } from '../../../shared/budget/model.js';
import { alarmFires, pacerAlarmSpecs } from '../../../shared/pacing/alarms.js';
import {
  behindTotal,
  DELIVERY_MIN_EXPECTED_SHARE,
  deliveryCounts,
} from '../../../shared/pacing/delivery-counts.js';
import { pacerMetricNames } from '../../../shared/pacing/metrics.js';
import type { PlanPacingParams, PlanSpendSnapshot } from '../../../shared/pacing/types.js';
import { defaultPacerSettings } from '../../../shared/region/resources.js';
import { emittedRecords } from './fixture.js';

const DAY_START = Date.UTC(2026, 10, 23);
const DAY_END = DAY_START + 86_400_000;
const NOON = DAY_START + 43_200_000;
const B = 10_000_000;

const plan = (p: Partial<BudgetPlan> & Pick<BudgetPlan, 'level'>): ResolvedPlan =>
  resolvePlan({ accountId: 'acct', campaignId: 'c', dailyBudgetMicros: B, pacingMode: 'even', ...p }, 'UTC');

/** A plan with a linear curve over the day (E(noon) = B / 2), spending `actual`. */
function row(p: ResolvedPlan, actual: number, o: { throttle?: number; inFlight?: number } = {}) {
  const params: PlanPacingParams = {
    planId: p.planId,
    day: '2026-11-23',
    budgetMicros: p.dailyBudgetMicros,
    mode: p.pacingMode,
    throttle: o.throttle ?? 0.5,
    bidMultiplier: 1,
    curve: { atMs: [DAY_START, DAY_END], micros: [0, p.dailyBudgetMicros] },
  };
  const spend: PlanSpendSnapshot = {
    initialised: true,
    confirmedMicros: actual - (o.inFlight ?? 0),
    inFlightMicros: o.inFlight ?? 0,
    leasedMicros: 0,
  };
  return { plan: p, params, spend };
}

function count(rows: ReturnType<typeof row>[], byCampaign: number[][], nowMs = NOON) {
  return deliveryCounts({
    plans: rows.map((r) => ({ plan: r.plan })),
    byCampaign: byCampaign.map((idx) => Int32Array.from(idx)),
    spend: rows.map((r) => r.spend),
    results: rows.map((r) => ({ params: r.params })),
    nowMs,
  });
}

describe('delivery counts', () => {
  it('counts campaign and arm plans per band, behind per reason, each plan once', () => {
    const rows = [
      row(plan({ level: 'campaign', campaignId: 'ok' }), 5_000_000),
      row(plan({ level: 'campaign', campaignId: 'fast' }), 6_000_000),
      row(plan({ level: 'campaign', campaignId: 'lost' }), 1_000_000, { throttle: 1, inFlight: 20_000 }),
      row(plan({ level: 'campaign', campaignId: 'dry' }), 1_000_000, { throttle: 1 }),
      row(plan({ level: 'arm', campaignId: 'dry', armId: 'A' }), 1_000_000),
    ];
    const c = count(rows, [[0], [1], [2], [3, 4], [3, 4]]);
    expect(c).toEqual({
      watched: 5,
      onPace: 1,
      ahead: 1,
      behind: {
        'out-of-window': 0,
        'stale-parameters': 0,
        'account-cap': 0,
        'no-traffic': 1,
        'lost-auctions': 1,
        'catching-up': 1,
      },
    });
    expect(behindTotal(c)).toBe(3);
  });

  it('blames an account plan at its expected spend, and never counts the account plan itself', () => {
    const rows = [
      row(plan({ level: 'account', campaignId: undefined, dailyBudgetMicros: 4 * B }), 19_900_000),
      row(plan({ level: 'campaign', campaignId: 'held' }), 1_000_000),
    ];
    expect(count(rows, [[0, 1]])).toMatchObject({ watched: 1, behind: { 'account-cap': 1 } });
  });

  it('leaves out unpaced modes and plans before 5 % of their budget is expected', () => {
    const asap = row(plan({ level: 'campaign', campaignId: 'a', pacingMode: 'asap' }), 0);
    expect(count([asap], [[0]]).watched).toBe(0);
    const early = row(plan({ level: 'campaign', campaignId: 'e' }), 0);
    const before = DAY_START + Math.floor(DELIVERY_MIN_EXPECTED_SHARE * 86_400_000) - 60_000;
    expect(count([early], [[0]], before).watched).toBe(0);
    expect(count([early], [[0]], before + 120_000)).toMatchObject({
      watched: 1,
      behind: { 'catching-up': 1 },
    });
  });
});

describe('delivery metrics and alarms', () => {
  it('emits the bands function-wide and the behind plans per reason', () => {
    const records = emittedRecords({
      delivery: count([row(plan({ level: 'campaign' }), 1_000_000, { throttle: 1 })], [[0]]),
    });
    const bands = records.find((r) => pacerMetricNames.plansBehind in r);
    expect(bands).toMatchObject({ PlansWatched: 1, PlansBehind: 1, PlansAhead: 0, service: 'pacer' });
    expect(bands).not.toHaveProperty('shard');
    const byReason = records.filter((r) => pacerMetricNames.plansBehindByReason in r);
    expect(byReason.map((r) => [r.reason, r.PlansBehindByReason])).toEqual([
      ['out-of-window', 0],
      ['stale-parameters', 0],
      ['account-cap', 0],
      ['no-traffic', 1],
      ['lost-auctions', 0],
      ['catching-up', 0],
    ]);
  });

  it('raises DeliveryBehind after 30 minutes behind in a row, not with an on-pace minute between', () => {
    const specs = pacerAlarmSpecs(defaultPacerSettings);
    const behind = specs.find((s) => s.id === 'DeliveryBehind');
    const ahead = specs.find((s) => s.id === 'DeliveryAhead');
    if (!behind || !ahead) throw new Error('delivery alarms missing');
    expect(alarmFires(behind, Array(30).fill(1))).toBe(true);
    expect(alarmFires(behind, Array(29).fill(1))).toBe(false);
    const gap = [...Array(20).fill(1), 0, ...Array(20).fill(1)];
    expect(alarmFires(behind, gap)).toBe(false);
    // Missing minutes (no shard published) do not breach.
    expect(alarmFires(behind, [...Array(15).fill(1), undefined, ...Array(15).fill(1)])).toBe(false);
    expect(alarmFires(ahead, Array(15).fill(2))).toBe(true);
    expect(alarmFires(ahead, Array(15).fill(0))).toBe(false);
  });
});
