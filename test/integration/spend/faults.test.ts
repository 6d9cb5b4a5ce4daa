/**
 * docs/reliability.md, faults 2 (spend half), 4 and 5, against real Redis and dynalite:
 * - a plan-day's notice-dedup hash lost alone (evicted / deleted) while its state survives: 50
 *   redelivered wins must not be counted again (the state counts the dedup fields it must find,
 *   a mismatch drops the sentinel and the plan-day is rebuilt from the ledger);
 * - absurd times (tomorrow, 2200, 2001, a notice from the future) are quarantined with a reason,
 *   never booked;
 * - after a Redis restart, one rebuild per plan-day however many records and processes find the
 *   reset at once (ledger reads counted);
 * - a notice goes to all its plans (account, campaign, arm) at once, and one plan failing (its
 *   state key clobbered by another writer) neither stops the others nor is swallowed: the record
 *   fails, and its retry adds only what was missing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { plansForBid } from '../../../shared/budget/model.js';
import { BudgetRepository } from '../../../shared/budget/repository.js';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import { DeadLetterStore } from '../../../shared/quarantine/dead-letter-store.js';
import { connectRedis, type RedisClient, redisConfigFromEnv } from '../../../shared/redis/connect.js';
import type { SpendEvent, WinEvent } from '../../../shared/spend/events.js';
import { planDayKeys } from '../../../shared/spend/keys.js';
import { type LedgerStore, SpendLedger } from '../../../shared/spend/ledger.js';
import { readPlanDay } from '../../../shared/spend/live-counters.js';
import { Reconciler } from '../../../shared/spend/reconcile.js';
import { SpendTracker } from '../../../shared/spend/tracker.js';
import { systemClock } from '../../../shared/time/clock.js';
import { type KinesisHandler, loadKinesisHandler } from '../../support/lambda.js';
import { batches, encode, lambdaContext, seedBudgets } from './support.js';

const TZ = 'America/New_York';
const DAY = 86_400_000;
let region: LocalRegion;
let handler: KinesisHandler;
let redis: RedisClient;
let repo: BudgetRepository;
let ledger: SpendLedger;

beforeAll(async () => {
  region = await startLocalRegion();
  handler = await loadKinesisHandler(region, 'trackSpend');
  redis = connectRedis(redisConfigFromEnv(region.functionEnv('trackSpend')));
  redis.on('error', () => {});
  repo = new BudgetRepository({
    client: region.dynamodb,
    tableName: region.tableName('budgets'),
    pacerShards: region.description.settings.pacer.shards,
  });
  ledger = new SpendLedger({
    client: region.dynamodb,
    tableName: region.tableName('spendLedger'),
    region: region.region,
  });
  await seedBudgets(repo, {
    accountId: 'acc-f',
    timeZone: TZ,
    accountBudgetMicros: 100_000_000_000,
    campaigns: [
      { campaignId: 'cf1', budgetMicros: 10_000_000_000, arms: { A: 5_000_000_000 } },
      { campaignId: 'cf2', budgetMicros: 10_000_000_000 },
    ],
  });
});

afterAll(async () => {
  redis?.disconnect();
  await region?.stop();
});

async function run(events: readonly SpendEvent[]): Promise<void> {
  for (const event of batches(encode(events), 100)) {
    const out = await handler(event, lambdaContext);
    expect(out.batchItemFailures).toEqual([]);
  }
}

function wins(campaignId: string, prefix: string, n: number, armId?: string): WinEvent[] {
  const now = Date.now();
  return Array.from({ length: n }, (_, i) => ({
    v: 1,
    type: 'win',
    bidId: `${prefix}${i}`,
    campaignId,
    ...(armId ? { armId } : {}),
    bidAt: now - 60_000 + i,
    bidPriceMicros: 2_000,
    at: now - 30_000 + i,
    clearingPriceMicros: 1_000 + i,
  }));
}

const planOf = async (campaignId: string, level: 'account' | 'campaign') =>
  (await repo.getCampaignBudgets(campaignId))?.common.find((p) => p.level === level);

describe('partial eviction of a plan-day', () => {
  it('notice-dedup hash deleted alone: 50 redelivered wins are not counted twice', async () => {
    const events = wins('cf2', 'pe', 50);
    const total = events.reduce((a, e) => a + e.clearingPriceMicros, 0);
    await run(events);
    const day = dayWindow(events[0]?.bidAt ?? 0, TZ).day;
    const campaign = planDayKeys((await planOf('cf2', 'campaign'))!, day);
    const account = planDayKeys((await planOf('cf2', 'account'))!, day);
    expect((await readPlanDay(redis, campaign.state, Date.now())).confirmedMicros).toBe(total);
    await redis.del(campaign.notices);
    await run(events);
    expect((await readPlanDay(redis, campaign.state, Date.now())).confirmedMicros).toBe(total);
    // The account plan's group was intact: untouched by the rebuild of the campaign's.
    const accountBefore = (await readPlanDay(redis, account.state, Date.now())).confirmedMicros;
    await redis.del(account.notices);
    await run(events);
    expect((await readPlanDay(redis, account.state, Date.now())).confirmedMicros).toBe(accountBefore);
    expect((await ledger.entries('cf2', day)).reduce((a, e) => a + e.clearingPriceMicros, 0)).toBe(total);
  });
});

describe('absurd spend times', () => {
  it('are quarantined with a reason saying what to check, and never booked', async () => {
    const now = Date.now();
    const base = { v: 1, campaignId: 'cf1', bidPriceMicros: 2_000 } as const;
    const cases: [SpendEvent, string][] = [
      [{ ...base, type: 'bid', bidId: 't-bid-tomorrow', bidAt: now + DAY }, 'spend.bid-in-future'],
      [
        {
          ...base,
          type: 'win',
          bidId: 't-2200',
          bidAt: Date.parse('2200-01-01T00:00:00Z'),
          at: Date.parse('2200-01-01T00:00:05Z'),
          clearingPriceMicros: 1000,
        },
        'spend.bid-in-future',
      ],
      [
        {
          ...base,
          type: 'win',
          bidId: 't-2001',
          bidAt: Date.parse('2001-09-10T00:00:00Z'),
          at: Date.parse('2001-09-10T00:00:05Z'),
          clearingPriceMicros: 1000,
        },
        'spend.bid-too-old',
      ],
      [
        {
          ...base,
          type: 'win',
          bidId: 't-notice-future',
          bidAt: now - 1000,
          at: now + 3_600_000,
          clearingPriceMicros: 1000,
        },
        'spend.notice-in-future',
      ],
      [
        {
          ...base,
          type: 'win',
          bidId: 't-tomorrow',
          bidAt: now + DAY,
          at: now + DAY + 1000,
          clearingPriceMicros: 1000,
        },
        'spend.bid-in-future',
      ],
    ];
    await run(cases.map(([e]) => e));
    const letters = await new DeadLetterStore({
      client: region.dynamodb,
      tableName: region.tableName('deadLetters'),
    }).list('track-spend');
    for (const [event, reason] of cases) {
      const letter = letters.find((l) => Buffer.from(l.data).toString().includes(`"${event.bidId}"`));
      expect(letter?.reasonCode, event.bidId).toBe(reason);
      expect(letter?.reason).toMatch(/check/);
      expect(await ledger.entries('cf1', dayWindow(event.bidAt, TZ).day)).toEqual([]);
    }
  });
});

describe('rebuild stampede after a Redis restart', () => {
  it('rebuilds each plan-day once across 2 processes and 200 concurrent records', async () => {
    const reads: string[] = [];
    const counting: LedgerStore = {
      record: (e) => ledger.record(e),
      markPlanDayStarted: (...a) => ledger.markPlanDayStarted(...a),
      entries: (campaignId, day, armId) => {
        reads.push(`${campaignId}/${day}/${armId ?? '*'}`);
        return ledger.entries(campaignId, day, armId);
      },
    };
    const env = region.functionEnv('trackSpend');
    const processes = [0, 1].map(() => {
      const client = connectRedis(redisConfigFromEnv(env));
      client.on('error', () => {});
      const reconciler = new Reconciler({
        redis: client,
        ledger: counting,
        clock: systemClock,
        campaignsOfAccount: (a) => repo.listCampaignIds(a),
      });
      const tracker = new SpendTracker({
        redis: client,
        ledger: counting,
        reconciler,
        clock: systemClock,
        budgets: (id) => repo.getCampaignBudgets(id),
      });
      return { client, tracker };
    });
    const before = [...wins('cf1', 'st', 40), ...wins('cf1', 'sa', 40, 'A'), ...wins('cf2', 'sb', 40)];
    for (const e of before) await processes[0]?.tracker.apply(e);
    await region.redis.restart();
    for (const p of processes) await p.client.ping().catch(() => p.client.ping());
    reads.length = 0;
    // Redeliveries and new wins of all four plan-days (account, cf1, cf1/A, cf2), all at once.
    const after = [
      ...before,
      ...wins('cf1', 'su', 30),
      ...wins('cf1', 'sv', 20, 'A'),
      ...wins('cf2', 'sw', 30),
    ];
    await Promise.all(after.map((e, i) => processes[i % 2]?.tracker.apply(e)));
    // One Query per campaign-day partition a plan reads: account (cf1, cf2), cf1, cf1/A, cf2.
    expect(reads.sort()).toEqual(
      [
        `cf1/${dayOf(before)}/*`,
        `cf1/${dayOf(before)}/*`,
        `cf1/${dayOf(before)}/A`,
        `cf2/${dayOf(before)}/*`,
        `cf2/${dayOf(before)}/*`,
      ].sort(),
    );
    // Every plan-day equals its ledger: nothing lost or doubled by the concurrent rebuilds.
    const day = dayOf(before);
    const ledgerSum = async (c: string, arm?: string) =>
      (await ledger.entries(c, day, arm)).reduce((a, e) => a + e.clearingPriceMicros, 0);
    const b1 = (await repo.getCampaignBudgets('cf1'))!;
    const c2 = (await planOf('cf2', 'campaign'))!;
    const confirmed = async (plan: Parameters<typeof planDayKeys>[0]) =>
      (await readPlanDay(redis, planDayKeys(plan, day).state, Date.now())).confirmedMicros;
    expect(await confirmed(b1.arms.get('A')!)).toBe(await ledgerSum('cf1', 'A'));
    expect(await confirmed(b1.common.find((p) => p.level === 'campaign')!)).toBe(await ledgerSum('cf1'));
    expect(await confirmed(c2)).toBe(await ledgerSum('cf2'));
    expect(await confirmed(b1.common.find((p) => p.level === 'account')!)).toBe(
      (await ledgerSum('cf1')) + (await ledgerSum('cf2')),
    );
    expect(await ledgerSum('cf1', 'A')).toBe(
      after
        .filter((e) => e.armId === 'A')
        .reduce((a, e) => a + (e.type === 'win' ? e.clearingPriceMicros : 0), 0),
    );
    for (const p of processes) p.client.disconnect();
  });
});

describe('callers of one rebuild', () => {
  it("resume in the order they called, the starter first (the simulator's determinism needs it)", async () => {
    const plan = (await planOf('cf2', 'campaign'))!;
    const day = `2031-01-0${1 + (Date.now() % 9)}`;
    const reconciler = new Reconciler({
      redis,
      ledger,
      clock: systemClock,
      campaignsOfAccount: (a) => repo.listCampaignIds(a),
    });
    const order: string[] = [];
    const call = (name: string) =>
      reconciler.reconcile(plan, day).then((r) => {
        order.push(`${name}:${r.installed}`);
      });
    // Started in one synchronous run: the two joiners find the starter's flight running.
    await Promise.all([call('starter'), call('joiner1'), call('joiner2')]);
    expect(order).toEqual(['starter:true', 'joiner1:false', 'joiner2:false']);
    expect(reconciler.ledgerReads).toBe(1);
    expect((await readPlanDay(redis, planDayKeys(plan, day).state, Date.now())).epoch).toBeDefined();
  });
});

function dayOf(events: readonly SpendEvent[]): string {
  return dayWindow(events[0]?.bidAt ?? 0, TZ).day;
}

describe('one notice, several plans', () => {
  it('is sent to every plan at once; a plan that fails fails the record, and the retry adds only what is missing', async () => {
    const client = connectRedis(redisConfigFromEnv(region.functionEnv('trackSpend')));
    client.on('error', () => {});
    const tracker = new SpendTracker({
      redis: client,
      ledger,
      reconciler: new Reconciler({
        redis: client,
        ledger,
        clock: systemClock,
        campaignsOfAccount: (a) => repo.listCampaignIds(a),
      }),
      clock: systemClock,
      budgets: (id) => repo.getCampaignBudgets(id),
    });
    // Each plan's apply counted while in flight (a wrapper on the client's script would recurse:
    // ioredis's auto-pipeline copies the client's script methods).
    type ApplyToPlan = (...args: unknown[]) => Promise<unknown>;
    const internals = tracker as unknown as { applyToPlan: ApplyToPlan };
    const applyToPlan = internals.applyToPlan.bind(tracker);
    let inFlight = 0;
    let most = 0;
    internals.applyToPlan = (...args) => {
      most = Math.max(most, ++inFlight);
      return applyToPlan(...args).finally(() => inFlight--);
    };
    try {
      // cf1 arm A: account, campaign and arm plans.
      const [first, second] = wins('cf1', 'mp', 2, 'A') as [WinEvent, WinEvent];
      await tracker.apply(first);
      expect(most).toBe(3);
      const day = dayWindow(first.bidAt, TZ).day;
      const budgets = (await repo.getCampaignBudgets('cf1'))!;
      const keysOf = (level: string) => {
        const plan = plansForBid(budgets, 'A').find((p) => p.level === level);
        return planDayKeys(plan!, day);
      };
      const confirmed = async (level: string) =>
        (await readPlanDay(client, keysOf(level).state, Date.now())).confirmedMicros;
      const before = { account: await confirmed('account'), arm: await confirmed('arm') };
      // Another writer clobbers the campaign plan's state with a string: its script fails.
      const campaignState = keysOf('campaign').state;
      await client.set(campaignState, 'not a hash');
      await expect(tracker.apply(second)).rejects.toThrow(/WRONGTYPE/);
      // The other plans were not stopped by it.
      expect(await confirmed('account')).toBe(before.account + second.clearingPriceMicros);
      expect(await confirmed('arm')).toBe(before.arm + second.clearingPriceMicros);
      // The key repaired (a reset: rebuilt from the ledger), the retried record adds the win to
      // the campaign plan and nothing again to the others.
      await client.del(campaignState);
      await tracker.apply(second);
      expect(await confirmed('account')).toBe(before.account + second.clearingPriceMicros);
      expect(await confirmed('arm')).toBe(before.arm + second.clearingPriceMicros);
      const entries = await ledger.entries('cf1', day);
      expect(await confirmed('campaign')).toBe(entries.reduce((a, e) => a + e.clearingPriceMicros, 0));
    } finally {
      client.disconnect();
    }
  });
});
