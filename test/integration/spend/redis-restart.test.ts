/**
 * Redis restarted mid-day (empty, as an ElastiCache node replaced without persistence): the live
 * counters come back equal to the ledger and no confirmed spend is lost. The restart is detected
 * through the per-plan-day sentinel: the next win notice rebuilds its plan-days from the ledger
 * automatically, the guard re-initialises and re-registers its in-flight amounts (rejoin) while
 * no new budget is leased (rejoin grace), and an operator's forced reconcile gives the same figures.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { BudgetRepository } from '../../../shared/budget/repository.js';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import { connectRedis, type RedisClient, redisConfigFromEnv } from '../../../shared/redis/connect.js';
import { BudgetGuard } from '../../../shared/spend/guard.js';
import { planDayKeys } from '../../../shared/spend/keys.js';
import { SpendLedger } from '../../../shared/spend/ledger.js';
import { readPlanDay } from '../../../shared/spend/live-counters.js';
import { Reconciler } from '../../../shared/spend/reconcile.js';
import { SpendTracker } from '../../../shared/spend/tracker.js';
import { ManualClock } from '../../../shared/time/clock.js';
import { rng, seedBudgets } from './support.js';

const TZ = 'Europe/Berlin';
let region: LocalRegion;
let redis: RedisClient;
let guardRedis: RedisClient;

beforeAll(async () => {
  region = await startLocalRegion();
  const env = region.functionEnv('trackSpend');
  redis = connectRedis(redisConfigFromEnv(env));
  guardRedis = connectRedis(redisConfigFromEnv(env));
  for (const c of [redis, guardRedis]) c.on('error', () => {});
});

afterAll(async () => {
  redis?.disconnect();
  guardRedis?.disconnect();
  await region?.stop();
});

async function waitReady(client: RedisClient): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      await client.ping();
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 25));
    }
  }
  throw new Error('Redis did not come back');
}

describe('Redis restart mid-day', () => {
  it('rebuilds live counters equal to the ledger and loses no spend', async () => {
    const repo = new BudgetRepository({
      client: region.dynamodb,
      tableName: region.tableName('budgets'),
      pacerShards: region.description.settings.pacer.shards,
    });
    await seedBudgets(repo, {
      accountId: 'acc-r',
      timeZone: TZ,
      accountBudgetMicros: 100_000_000,
      campaigns: [{ campaignId: 'cr', budgetMicros: 50_000_000, arms: { X: 20_000_000 } }],
    });
    const budgets = (await repo.getCampaignBudgets('cr'))!;
    // Noon, Berlin time, on a fixed date.
    const clock = new ManualClock(Date.parse('2026-06-15T10:00:00Z'));
    const day = dayWindow(clock.now(), TZ).day;
    const ledger = new SpendLedger({
      client: region.dynamodb,
      tableName: region.tableName('spendLedger'),
      region: region.region,
    });
    const reconcilerFor = (client: RedisClient) =>
      new Reconciler({ redis: client, ledger, clock, campaignsOfAccount: (a) => repo.listCampaignIds(a) });
    const tracker = new SpendTracker({
      redis,
      ledger,
      reconciler: reconcilerFor(redis),
      clock,
      budgets: async (id) => (id === 'cr' ? budgets : undefined),
    });
    const guard = new BudgetGuard({
      redis: guardRedis,
      clock,
      initPlanDay: (plan, d) => reconcilerFor(guardRedis).reconcile(plan, d),
      floatFraction: 0.01,
      onError: (e) => errors.push(e),
    });
    const errors: unknown[] = [];
    guard.setBudgets(budgets);

    const random = rng(7);
    let expectedTotal = 0;
    let expectedArm = 0;
    let bidNo = 0;
    const bidAndWin = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const armId = random() < 0.5 ? 'X' : undefined;
        const price = 1000 + Math.floor(random() * 2000);
        let decision = guard.decide({ campaignId: 'cr', ...(armId ? { armId } : {}), priceMicros: price });
        if (decision !== 'bid') {
          await guard.idle();
          decision = guard.decide({ campaignId: 'cr', ...(armId ? { armId } : {}), priceMicros: price });
        }
        expect(errors).toEqual([]);
        expect(decision).toBe('bid');
        const bidAt = clock.now();
        clock.advance(100);
        if (random() < 0.6) {
          const clearing = Math.floor(price * 0.7);
          await tracker.apply({
            v: 1,
            type: 'win',
            bidId: `r${bidNo}`,
            campaignId: 'cr',
            ...(armId ? { armId } : {}),
            bidAt,
            bidPriceMicros: price,
            at: clock.now(),
            clearingPriceMicros: clearing,
          });
          expectedTotal += clearing;
          if (armId) expectedArm += clearing;
        }
        bidNo++;
      }
      await guard.idle();
    };

    await bidAndWin(150);
    const state = (level: 'account' | 'campaign' | 'arm') =>
      planDayKeys(
        level === 'arm' ? budgets.arms.get('X')! : budgets.common.find((p) => p.level === level)!,
        day,
      ).state;
    expect((await readPlanDay(redis, state('campaign'), clock.now())).confirmedMicros).toBe(expectedTotal);

    await region.redis.restart();
    await waitReady(redis);
    await waitReady(guardRedis);
    expect(await redis.exists(state('campaign'))).toBe(0);

    // Within one settle interval every guard talks to Redis again: it finds the reset, rebuilds
    // from the ledger and re-registers its in-flight amounts; its old floats are void.
    clock.advance(61_000);
    await guard.maintain();
    expect(guard.stats.rejoins).toBeGreaterThanOrEqual(3);
    const rejoined = await readPlanDay(redis, state('campaign'), clock.now());
    expect(rejoined.inFlightMicros).toBeGreaterThan(0);
    expect(rejoined.confirmedMicros).toBe(expectedTotal);
    // Rejoin grace: no new budget is handed out until every live guard could re-register.
    expect(guard.decide({ campaignId: 'cr', priceMicros: 1000 })).toBe('no-budget');
    await guard.idle();
    expect(guard.decide({ campaignId: 'cr', priceMicros: 1000 })).toBe('no-budget');
    clock.advance(2 * 60_000);

    await bidAndWin(150);
    clock.advance(61_000);
    await guard.maintain();
    const ledgerTotal = (await ledger.entries('cr', day)).reduce((a, e) => a + e.clearingPriceMicros, 0);
    expect(ledgerTotal).toBe(expectedTotal);
    for (const level of ['account', 'campaign'] as const) {
      expect((await readPlanDay(redis, state(level), clock.now())).confirmedMicros).toBe(expectedTotal);
    }
    expect((await readPlanDay(redis, state('arm'), clock.now())).confirmedMicros).toBe(expectedArm);

    // An operator's forced reconcile agrees.
    const plan = budgets.common.find((p) => p.level === 'campaign')!;
    const result = await reconcilerFor(redis).reconcile(plan, day, { force: true });
    expect(result).toMatchObject({ installed: true, confirmedMicros: expectedTotal });
    expect((await readPlanDay(redis, state('campaign'), clock.now())).confirmedMicros).toBe(expectedTotal);
    await guard.close();
  });
});
