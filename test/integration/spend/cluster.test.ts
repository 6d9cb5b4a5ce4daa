/**
 * Cluster mode (a real 3-node redis-server cluster, as ElastiCache runs): every spend script
 * touches one hash slot, so account plans (slot of `{a:…}`) and campaign/arm plans (slot of
 * `{c:…}`) living on different nodes still give exact counters, rebuilds work, and the guard
 * leases from every node.
 */
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { BudgetRepository } from '../../../shared/budget/repository.js';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import { connectRedis, type RedisClient, redisConfigFromEnv, slotOf } from '../../../shared/redis/connect.js';
import { BudgetGuard } from '../../../shared/spend/guard.js';
import { planDayKeys } from '../../../shared/spend/keys.js';
import { SpendLedger } from '../../../shared/spend/ledger.js';
import { readPlanDay } from '../../../shared/spend/live-counters.js';
import { Reconciler } from '../../../shared/spend/reconcile.js';
import { SpendTracker } from '../../../shared/spend/tracker.js';
import { ManualClock } from '../../../shared/time/clock.js';
import { seedBudgets } from './support.js';

let region: LocalRegion;
let redis: RedisClient;

beforeAll(async () => {
  region = await startLocalRegion({ redisMode: 'cluster' });
  redis = connectRedis(redisConfigFromEnv(region.functionEnv('trackSpend')));
});
afterAll(async () => {
  redis?.disconnect();
  await region?.stop();
});

describe('spend in cluster mode', () => {
  it('keeps exact counters for plans on different nodes and leases from each', async () => {
    expect(redis).toBeInstanceOf(Cluster);
    const repo = new BudgetRepository({
      client: region.dynamodb,
      tableName: region.tableName('budgets'),
      pacerShards: region.description.settings.pacer.shards,
    });
    const campaigns = ['k1', 'k2', 'k3', 'k4'];
    await seedBudgets(repo, {
      accountId: 'acc-k',
      timeZone: 'America/Los_Angeles',
      accountBudgetMicros: 1_000_000_000,
      campaigns: campaigns.map((campaignId) => ({
        campaignId,
        budgetMicros: 100_000_000,
        arms: { A: 50_000_000 },
      })),
    });
    const budgets = new Map(
      await Promise.all(campaigns.map(async (c) => [c, (await repo.getCampaignBudgets(c))!] as const)),
    );
    const clock = new ManualClock(Date.parse('2026-11-21T20:00:00Z'));
    const day = dayWindow(clock.now(), 'America/Los_Angeles').day;
    const ledger = new SpendLedger({
      client: region.dynamodb,
      tableName: region.tableName('spendLedger'),
      region: region.region,
    });
    const reconciler = new Reconciler({
      redis,
      ledger,
      clock,
      campaignsOfAccount: (a) => repo.listCampaignIds(a),
    });
    const tracker = new SpendTracker({
      redis,
      ledger,
      reconciler,
      clock,
      budgets: async (id) => budgets.get(id),
    });
    const errors: unknown[] = [];
    const guard = new BudgetGuard({
      redis,
      clock,
      initPlanDay: (p, d) => reconciler.reconcile(p, d),
      floatFraction: 0.01,
      onError: (e) => errors.push(e),
    });
    for (const b of budgets.values()) guard.setBudgets(b);

    // The plans really are spread over several nodes.
    const cluster = redis as Cluster;
    const keys = [...budgets.values()]
      .flatMap((b) => [...b.common, ...b.arms.values()])
      .map((p) => planDayKeys(p, day).state);
    const nodes = new Set(keys.map((k) => cluster.slots[slotOf(k)]?.[0]));
    expect(nodes.size).toBeGreaterThan(1);

    const expected = new Map<string, number>();
    let total = 0;
    for (let i = 0; i < 200; i++) {
      const campaignId = campaigns[i % campaigns.length]!;
      const armId = i % 3 === 0 ? 'A' : undefined;
      const bid = { campaignId, ...(armId ? { armId } : {}), priceMicros: 2000 };
      if (guard.decide(bid) !== 'bid') {
        await guard.idle();
        expect(guard.decide(bid)).toBe('bid');
      }
      const clearing = 1000 + i;
      const win = {
        v: 1 as const,
        type: 'win' as const,
        bidId: `k${i}`,
        campaignId,
        ...(armId ? { armId } : {}),
      };
      const event = {
        ...win,
        bidAt: clock.now(),
        bidPriceMicros: 2000,
        at: clock.now() + 500,
        clearingPriceMicros: clearing,
      };
      await tracker.apply(event);
      await tracker.apply(event); // duplicate notice
      expected.set(campaignId, (expected.get(campaignId) ?? 0) + clearing);
      if (armId) expected.set(`${campaignId}/A`, (expected.get(`${campaignId}/A`) ?? 0) + clearing);
      total += clearing;
      clock.advance(50);
    }
    await guard.idle();
    for (const [campaignId, b] of budgets) {
      const campaignPlan = b.common.find((p) => p.level === 'campaign')!;
      expect(
        (await readPlanDay(redis, planDayKeys(campaignPlan, day).state, clock.now())).confirmedMicros,
      ).toBe(expected.get(campaignId));
      const arm = b.arms.get('A')!;
      expect((await readPlanDay(redis, planDayKeys(arm, day).state, clock.now())).confirmedMicros).toBe(
        expected.get(`${campaignId}/A`),
      );
    }
    const accountPlan = budgets.get('k1')!.common.find((p) => p.level === 'account')!;
    const accountKey = planDayKeys(accountPlan, day).state;
    expect((await readPlanDay(redis, accountKey, clock.now())).confirmedMicros).toBe(total);
    // A forced rebuild of the account plan (reads every campaign's ledger) agrees.
    expect(await reconciler.reconcile(accountPlan, day, { force: true })).toMatchObject({
      installed: true,
      confirmedMicros: total,
    });
    expect((await readPlanDay(redis, accountKey, clock.now())).confirmedMicros).toBe(total);
    expect(errors).toEqual([]);
    await guard.close();
  });
});
