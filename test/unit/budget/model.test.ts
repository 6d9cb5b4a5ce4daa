/**
 * Budget model: validation gives field-named errors; plan ids/scopes keep all plans of a campaign
 * in the campaign's hash slot and account plans in the account's; the plans of a bid are the
 * account + campaign plans plus its arm's plan; E(t) is linear over 23/24/25-hour days.
 */
import { describe, expect, it } from 'vitest';
import {
  BudgetValidationError,
  campaignBudgets,
  plansForBid,
  validateAccount,
  validatePlan,
} from '../../../shared/budget/model.js';
import { defaultCurve, linearExpected } from '../../../shared/budget/pacing.js';
import { dayWindowOf } from '../../../shared/budget/time-zone.js';
import { planDayKeys } from '../../../shared/spend/keys.js';

const account = { accountId: 'a1', name: 'A', timeZone: 'America/Los_Angeles', currency: 'USD' };
const campaign = { campaignId: 'c1', accountId: 'a1', name: 'C', status: 'active' as const };

describe('budget model', () => {
  it('validates with errors naming the field', () => {
    expect(() => validateAccount({ ...account, timeZone: 'PST8' + 'X' })).toThrow(/timeZone/);
    expect(() => validateAccount({ ...account, accountId: 'a{1}' })).toThrow(BudgetValidationError);
    expect(() =>
      validatePlan({
        level: 'campaign',
        accountId: 'a1',
        campaignId: 'c1',
        dailyBudgetMicros: 1.5,
        pacingMode: 'even',
      }),
    ).toThrow(/dailyBudgetMicros.*integer micros/);
    expect(() =>
      validatePlan({
        level: 'arm',
        accountId: 'a1',
        campaignId: 'c1',
        dailyBudgetMicros: 1,
        pacingMode: 'even',
      }),
    ).toThrow(/armId/);
    expect(() =>
      validatePlan({
        level: 'campaign',
        accountId: 'a1',
        campaignId: 'c1',
        dailyBudgetMicros: 1,
        pacingMode: 'fast' as 'even',
      }),
    ).toThrow(/pacingMode/);
  });

  it('selects every plan that applies to a bid, with slot-friendly keys', () => {
    const b = campaignBudgets(account, campaign, [
      { level: 'account', accountId: 'a1', dailyBudgetMicros: 100, pacingMode: 'asap' },
      { level: 'campaign', accountId: 'a1', campaignId: 'c1', dailyBudgetMicros: 50, pacingMode: 'even' },
      {
        level: 'arm',
        accountId: 'a1',
        campaignId: 'c1',
        armId: 'A',
        dailyBudgetMicros: 20,
        pacingMode: 'even',
      },
      { level: 'campaign', accountId: 'a1', campaignId: 'other', dailyBudgetMicros: 50, pacingMode: 'even' },
    ]);
    expect(plansForBid(b, undefined).map((p) => p.planId)).toEqual(['account', 'campaign']);
    expect(plansForBid(b, 'A').map((p) => p.planId)).toEqual(['account', 'campaign', 'arm:A']);
    expect(plansForBid(b, 'Z').map((p) => p.planId)).toEqual(['account', 'campaign']);
    const keys = plansForBid(b, 'A').map((p) => planDayKeys(p, '2026-11-21').state);
    expect(keys).toEqual([
      'pl:1:{a:a1}:account:2026-11-21',
      'pl:1:{c:c1}:campaign:2026-11-21',
      'pl:1:{c:c1}:arm:A:2026-11-21',
    ]);
  });

  it('resolves every plan to the same fields, whatever the stored item carried', () => {
    // Stored items carry extra attributes (the repository's type, shard, version); account plans
    // have no campaign id. The resolved plan has the plan's fields only, one set for all levels.
    const stored = [
      {
        level: 'account',
        accountId: 'a1',
        dailyBudgetMicros: 9,
        pacingMode: 'even',
        type: 'plan',
        pacerShard: 3,
      },
      {
        pacingMode: 'asap',
        dailyBudgetMicros: 5,
        campaignId: 'c1',
        accountId: 'a1',
        level: 'campaign',
        v: 7,
      },
      {
        level: 'arm',
        accountId: 'a1',
        campaignId: 'c1',
        armId: 'A',
        dailyBudgetMicros: 2,
        pacingMode: 'even',
      },
    ] as unknown as Parameters<typeof campaignBudgets>[2];
    const b = campaignBudgets(account, campaign, stored);
    const plans = [...b.common, ...b.arms.values()];
    expect(plans.map((p) => Object.keys(p))).toEqual(Array(3).fill(Object.keys(plans[0] as object)));
    expect(JSON.parse(JSON.stringify(plans))).toEqual([
      {
        level: 'account',
        accountId: 'a1',
        dailyBudgetMicros: 9,
        pacingMode: 'even',
        timeZone: account.timeZone,
        planId: 'account',
        scope: 'a:a1',
      },
      {
        level: 'campaign',
        accountId: 'a1',
        campaignId: 'c1',
        dailyBudgetMicros: 5,
        pacingMode: 'asap',
        timeZone: account.timeZone,
        planId: 'campaign',
        scope: 'c:c1',
      },
      {
        level: 'arm',
        accountId: 'a1',
        campaignId: 'c1',
        armId: 'A',
        dailyBudgetMicros: 2,
        pacingMode: 'even',
        timeZone: account.timeZone,
        planId: 'arm:A',
        scope: 'c:c1',
      },
    ]);
  });

  it('E(t) is linear over the local day, including a 25-hour day', () => {
    const day = dayWindowOf('2026-11-01', 'America/Los_Angeles');
    const mid = day.startMs + (day.endMs - day.startMs) / 2;
    expect(linearExpected(1_000_000, day, day.startMs)).toBe(0);
    expect(linearExpected(1_000_000, day, mid)).toBe(500_000);
    expect(linearExpected(1_000_000, day, day.endMs)).toBe(1_000_000);
    const asap = campaignBudgets(account, campaign, [
      { level: 'campaign', accountId: 'a1', campaignId: 'c1', dailyBudgetMicros: 7, pacingMode: 'asap' },
    ]).common[0]!;
    expect(defaultCurve.expectedMicros(asap, day, day.startMs + 1)).toBe(7);
  });
});
