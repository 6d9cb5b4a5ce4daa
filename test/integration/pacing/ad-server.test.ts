/**
 * The ad-server call sequence end to end, exactly as docs/pacing.md shows it: the pacer publishes
 * (real ShardPacer, real budgets table and SSM), the ad server reads the parameters through
 * PacingReader, throttles, multiplies its bid, and asks the BudgetGuard, whose E(t) is the same
 * published curve. Also: a pacer that stops publishing turns the reader's answers into the
 * fail-safe, and the guard's curve into the linear one.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { BudgetRepository } from '../../../shared/budget/repository.js';
import { type BidRequest, paceBid } from '../../../shared/pacing/ad-server.js';
import { FAIL_SAFE_THROTTLE } from '../../../shared/pacing/controller/index.js';
import { createLinearController } from '../../../shared/pacing/controller/linear.js';
import { PacingReader, publishedCurve } from '../../../shared/pacing/reader.js';
import { prng } from '../../../shared/random/prng.js';
import { connectRedis, type RedisClient, redisConfigFromEnv } from '../../../shared/redis/connect.js';
import { BudgetGuard } from '../../../shared/spend/guard.js';
import { SpendLedger } from '../../../shared/spend/ledger.js';
import { Reconciler } from '../../../shared/spend/reconcile.js';
import { ManualClock } from '../../../shared/time/clock.js';
import { accountsInShard, makeInstance, seedShard } from './support.js';

const T0 = Date.UTC(2026, 10, 21, 17, 0, 0);
let region: LocalRegion;
let redis: RedisClient;

beforeAll(async () => {
  region = await startLocalRegion();
  redis = connectRedis(redisConfigFromEnv(region.clientEnv));
});
afterAll(async () => {
  redis?.disconnect();
  await region?.stop();
});

describe('ad server: read params → throttle → bid × multiplier → decide', () => {
  it('bids through the published parameters and the guard’s published curve', async () => {
    const clock = new ManualClock(T0);
    const shards = region.description.settings.pacer.shards;
    const repo = new BudgetRepository({
      client: region.dynamodb,
      tableName: region.tableName('budgets'),
      pacerShards: shards,
    });
    const [accountId] = accountsInShard(2, shards, 1, 'ad');
    const [campaignId] = await seedShard(repo, [accountId as string], 1, T0 - 60_000);
    const pacer = makeInstance({
      region,
      redis,
      shard: 2,
      instance: 0,
      clock,
      controller: createLinearController() as never,
    });
    expect((await pacer.tick(Math.floor(T0 / 10_000))).published).toBe(true);

    // --- the ad server (docs/pacing.md, "Ad-server call sequence") ---------------------------
    const reader = new PacingReader({ redis, clock, shards });
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
    const guard = new BudgetGuard({
      redis,
      clock,
      initPlanDay: (plan, day) => reconciler.reconcile(plan, day),
      curve: publishedCurve(reader),
    });
    const budgets = await repo.getCampaignBudgets(campaignId as string);
    guard.setBudgets(budgets as NonNullable<typeof budgets>);
    await reader.prefetch([{ accountId: accountId as string, campaignId: campaignId as string }]);
    const random = prng(7);
    const request: BidRequest = {
      accountId: accountId as string,
      campaignId: campaignId as string,
      armId: 'A',
      basePriceMicros: 2_000,
    };
    const outcomes = [];
    for (let i = 0; i < 200; i++) {
      outcomes.push(paceBid(reader, guard, request, random));
      if (i % 5 === 0) await guard.idle(); // leases arrive between requests
    }
    // ---------------------------------------------------------------------------------------------
    const bids = outcomes.filter((o) => o.bid);
    expect(bids.length).toBeGreaterThan(100); // throttle 1 from the linear controller: the guard decides
    expect(bids.every((o) => o.bid && o.priceMicros === 2_000 && o.status === 'fresh')).toBe(true);
    expect(reader.metrics.remoteReads).toBe(1); // 200 requests, one remote read

    // The pacer stops; once the parameters are older than the maximum age the fail-safe applies.
    clock.advance(31_000);
    const stale = reader.forBid(accountId as string, campaignId as string, 'A');
    expect(stale).toEqual({ throttle: FAIL_SAFE_THROTTLE, bidMultiplier: 1, status: 'stale' });
    const later = Array.from({ length: 400 }, () => paceBid(reader, guard, request, random));
    const throttled = later.filter((o) => !o.bid && o.reason === 'throttled').length;
    // The stated fail-safe keeps the day's last throttle (1 here) and makes the guard enforce the
    // linear E(t): nothing is throttled, and what is refused is refused by the budget guard.
    expect(throttled).toBe(0);
    expect(later.every((o) => o.bid || o.reason === 'no-budget')).toBe(true);
    await guard.close();
  });
});
