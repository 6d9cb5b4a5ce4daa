/**
 * `npm run demo`'s pure parts: the seeded budget model is valid, the traffic model behaves as
 * documented, poison records are really rejected by the consumers' decoders, the target is a
 * local region or nothing, and the command line is checked.
 */
import { describe, expect, it } from 'vitest';
import {
  DEMO_HELP,
  DemoUsageError,
  formatEarlyLine,
  formatStats,
  parseDemoArgs,
} from '../../../local/demo/main.js';
import {
  actionRecord,
  auctionOutcome,
  defaultAuctionModel,
  demoBudgets,
  pickCampaign,
  poisonRecord,
  spendRecord,
} from '../../../local/demo/scenario.js';
import { DemoTargetError, demoTargetFromEnv, describeDemoTarget } from '../../../local/demo/target.js';
import { newStats } from '../../../local/demo/traffic.js';
import { validateAccount, validateCampaign, validatePlan } from '../../../shared/budget/model.js';
import { decodeRecord } from '../../../shared/counting/event-decode.js';
import { ActionEventError } from '../../../shared/counting/schema.js';
import { prng } from '../../../shared/random/prng.js';
import { decodeSpendEvent, SpendRecordError } from '../../../shared/spend/events.js';

const NOW = Date.UTC(2026, 10, 23, 12);

describe('demo budget model', () => {
  it('is valid, stable across calls and binds at account level too', () => {
    const { budgets, campaigns } = demoBudgets({ accounts: 4, campaignsPerAccount: 3, prefix: 't' });
    for (const a of budgets.accounts) validateAccount(a);
    for (const c of budgets.campaigns) validateCampaign(c);
    for (const p of budgets.plans) validatePlan(p);
    expect(campaigns).toHaveLength(12);
    expect(new Set(campaigns.map((c) => c.campaignId)).size).toBe(12);
    expect(new Set(budgets.accounts.map((a) => a.timeZone)).size).toBe(4);
    expect(budgets.plans.some((p) => p.pacingMode === 'asap')).toBe(true);
    for (const a of budgets.accounts) {
      const plans = budgets.plans.filter((p) => p.accountId === a.accountId);
      const account = plans.find((p) => p.level === 'account');
      const sum = plans.filter((p) => p.level === 'campaign').reduce((s, p) => s + p.dailyBudgetMicros, 0);
      expect(account?.dailyBudgetMicros).toBeLessThan(sum);
    }
    expect(demoBudgets({ accounts: 4, campaignsPerAccount: 3, prefix: 't' })).toEqual({ budgets, campaigns });
  });
});

describe('demo traffic model', () => {
  it('picks campaigns in proportion to their weights', () => {
    const { campaigns } = demoBudgets();
    const random = prng(1);
    const counts = new Map<string, number>();
    const n = 60_000;
    for (let i = 0; i < n; i++) {
      const c = pickCampaign(campaigns, random);
      counts.set(c.campaignId, (counts.get(c.campaignId) ?? 0) + 1);
    }
    const total = campaigns.reduce((s, c) => s + c.weight, 0);
    for (const c of campaigns) {
      expect((counts.get(c.campaignId) ?? 0) / n).toBeCloseTo(c.weight / total, 2);
    }
  });

  it('clears wins at or below the bid, at the configured win rate, with delays in range', () => {
    const random = prng(2);
    const outcomes = Array.from({ length: 20_000 }, () => auctionOutcome(2_000, defaultAuctionModel, random));
    const wins = outcomes.filter((o) => o.kind === 'win');
    expect(wins.length / outcomes.length).toBeCloseTo(0.3, 1);
    for (const w of wins) {
      expect(w.clearingPriceMicros).toBeGreaterThanOrEqual(1_000);
      expect(w.clearingPriceMicros).toBeLessThanOrEqual(2_000);
    }
    for (const o of outcomes) {
      expect(o.delayMs).toBeGreaterThanOrEqual(200);
      expect(o.delayMs).toBeLessThanOrEqual(3_000);
    }
    expect(auctionOutcome(1, { ...defaultAuctionModel, winRate: 1 }, random)).toMatchObject({
      kind: 'win',
      clearingPriceMicros: 1,
    });
  });

  it('emits records the consumers accept, and poison records they quarantine with a reason', () => {
    const [c] = demoBudgets().campaigns;
    if (!c) throw new Error('no campaign');
    const win = spendRecord({
      v: 1,
      type: 'win',
      bidId: 'b1',
      campaignId: c.campaignId,
      bidAt: NOW - 1_000,
      bidPriceMicros: 2_000,
      at: NOW,
      clearingPriceMicros: 1_500,
    });
    expect(win.partitionKey).toBe(c.campaignId);
    expect(decodeSpendEvent(win.data)).toMatchObject({ type: 'win', clearingPriceMicros: 1_500 });
    const action = actionRecord(c, 'click', 42, NOW, prng(3));
    expect(action.partitionKey).toBe('42');
    expect(decodeRecord(action.data)).toMatchObject({ userId: '42', timestamp: NOW });

    const spendPoison = poisonRecord(0, c, NOW);
    expect(spendPoison.stream).toBe('spend');
    expect(() => decodeSpendEvent(spendPoison.data)).toThrow(SpendRecordError);
    const actionPoison = poisonRecord(1, c, NOW);
    expect(actionPoison.stream).toBe('actions');
    expect(() => decodeRecord(actionPoison.data)).toThrow(ActionEventError);
  });
});

const LOCAL = {
  AWS_REGION: 'us-west-2',
  AWS_ENDPOINT_URL_DYNAMODB: 'http://127.0.0.1:4000',
  AWS_ENDPOINT_URL_KINESIS: 'http://127.0.0.1:4001',
  REDIS_NODES: '127.0.0.1:6390',
  REDIS_MODE: 'standalone',
};

describe('demo target', () => {
  it('is the local region of the environment, printed first', () => {
    const t = demoTargetFromEnv(LOCAL);
    expect(t.region).toBe('us-west-2');
    expect(describeDemoTarget(t)).toBe(
      'Target: local us-west-2 (dynamodb http://127.0.0.1:4000, kinesis http://127.0.0.1:4001, redis standalone 127.0.0.1:6390)',
    );
  });

  it('refuses with one line saying how to choose when no local region is set, or AWS is', () => {
    const cases: Record<string, string | undefined>[] = [
      {},
      { AWS_REGION: 'us-east-1', AWS_PROFILE: 'prod' },
      { ...LOCAL, AWS_ENDPOINT_URL_KINESIS: undefined },
      { ...LOCAL, REDIS_MODE: 'sharded' },
      { ...LOCAL, AWS_ENDPOINT_URL_DYNAMODB: 'https://dynamodb.us-east-1.amazonaws.com' },
      { ...LOCAL, PACELINE_TARGET: 'aws' },
      { ...LOCAL, AWS_ENDPOINT_URL_KINESIS: 'not a url' },
    ];
    for (const env of cases) {
      let error: unknown;
      try {
        demoTargetFromEnv(env);
      } catch (e) {
        error = e;
      }
      expect(error, JSON.stringify(env)).toBeInstanceOf(DemoTargetError);
      const message = (error as Error).message;
      expect(message).not.toContain('\n');
      expect(message).toContain('npm start');
      expect(message).toContain('source .paceline/us-east-1.env');
    }
  });
});

describe('demo command line', () => {
  it('has defaults and reads every option', () => {
    expect(parseDemoArgs([])).toMatchObject({
      help: false,
      requestsPerSec: 100,
      poisonEverySec: 30,
      winRate: 0.3,
    });
    expect(
      parseDemoArgs([
        '--rate',
        '12.5',
        '--poison-every',
        '0',
        '--accounts',
        '2',
        '--campaigns',
        '4',
        '--duration',
        '9',
        '--seed',
        '7',
        '--win-rate',
        '0.5',
      ]),
    ).toMatchObject({
      requestsPerSec: 12.5,
      poisonEverySec: 0,
      accounts: 2,
      campaignsPerAccount: 4,
      durationSec: 9,
      seed: 7,
      winRate: 0.5,
    });
    expect(parseDemoArgs(['--help']).help).toBe(true);
    for (const flag of [
      '--rate',
      '--win-rate',
      '--poison-every',
      '--accounts',
      '--campaigns',
      '--duration',
      '--seed',
    ])
      expect(DEMO_HELP).toContain(flag);
  });

  it('refuses bad values and unknown flags with one line', () => {
    for (const argv of [
      ['--rate', 'fast'],
      ['--rate', '-1'],
      ['--win-rate', '2'],
      ['--accounts', '1.5'],
      ['--rate', ''],
      ['--bogus'],
    ]) {
      expect(() => parseDemoArgs(argv), argv.join(' ')).toThrow(DemoUsageError);
    }
  });

  it('reports progress on one line', () => {
    const line = formatStats(
      {
        ...newStats(),
        requests: 10,
        bids: 6,
        throttled: 3,
        noBudget: 1,
        wins: 2,
        losses: 4,
        impressions: 2,
        poison: 1,
        spentMicros: 2_500_000,
      },
      5,
    );
    expect(line).toBe(
      '5 s: 10 requests, 6 bids (3 throttled, 1 no budget), 2 wins $2.50, 4 losses, 0 clicks, 1 poison',
    );
  });

  it('reports the first minutes on one line', () => {
    expect(
      formatEarlyLine({ ...newStats(), noBudget: 7, earlyNoBudget: 2, earlyAllocationNoBudget: 1 }),
    ).toBe(
      "first 3 min: 2 no-budget answers to campaigns under 5 % of their budget, 1 of them the allocation's",
    );
  });
});
