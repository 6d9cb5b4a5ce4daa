/**
 * Shard membership without a scan (dynalite, the real SDK): every BudgetRepository write tags its
 * item with `<N>:<fnv1a32(account) mod N>`; a shard's cache loads only its accounts through the
 * `by-pacer-shard` index, picks up a change at the next refresh (one query of the overlap window,
 * not the shard), catches a write stamped far in the past at the next full reload, keeps serving
 * through a DynamoDB outage, and follows a re-shard.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main as budgetsCli } from '../../../cli/budgets.js';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { BudgetRepository, BudgetShardingError } from '../../../shared/budget/repository.js';
import { ShardBudgets } from '../../../shared/pacing/budgets-cache.js';
import { pacerShardKey, shardOfAccount } from '../../../shared/pacing/shard.js';
import { ManualClock } from '../../../shared/time/clock.js';

const N = 4;
let region: LocalRegion;
let repo: BudgetRepository;
const T0 = Date.UTC(2026, 10, 21, 12, 0, 0);

function cacheFor(shard: number, clock: ManualClock, shards = N): ShardBudgets {
  return new ShardBudgets({
    source: (since, start) => repo.shardItemsPage(pacerShardKey(shard, shards), since, start),
    clock,
    fullReloadMs: 300_000,
    overlapMs: 60_000,
  });
}

beforeAll(async () => {
  region = await startLocalRegion();
  repo = new BudgetRepository({
    client: region.dynamodb,
    tableName: region.tableName('budgets'),
    pacerShards: N,
  });
  for (let a = 0; a < 12; a++) {
    const accountId = `acc-${a}`;
    await repo.putAccount({ accountId, name: accountId, timeZone: 'UTC', currency: 'USD' }, 'upsert', T0);
    await repo.putPlan(
      { level: 'account', accountId, dailyBudgetMicros: 50_000_000, pacingMode: 'even' },
      'upsert',
      T0,
    );
    for (let c = 0; c < 3; c++) {
      const campaignId = `${accountId}-c${c}`;
      await repo.putCampaign({ campaignId, accountId, name: campaignId, status: 'active' }, 'upsert', T0);
      await repo.putPlan(
        { level: 'campaign', accountId, campaignId, dailyBudgetMicros: 10_000_000, pacingMode: 'even' },
        'upsert',
        T0,
      );
      if (c === 0) {
        await repo.putPlan(
          {
            level: 'arm',
            accountId,
            campaignId,
            armId: 'A',
            dailyBudgetMicros: 4_000_000,
            pacingMode: 'asap',
          },
          'upsert',
          T0,
        );
      }
    }
  }
}, 60_000);

afterAll(async () => {
  await region?.stop();
});

describe('shard membership', () => {
  it('loads exactly the campaigns of the accounts hashed to the shard, with their plans', async () => {
    const seen = new Set<string>();
    for (let shard = 0; shard < N; shard++) {
      const cache = cacheFor(shard, new ManualClock(T0));
      const outcome = await cache.refresh();
      expect(outcome.kind).toBe('full');
      for (const b of cache.campaigns()) {
        expect(shardOfAccount(b.account.accountId, N)).toBe(shard);
        expect(b.common.map((p) => p.level).sort()).toEqual(['account', 'campaign']);
        if (b.campaign.campaignId.endsWith('-c0')) expect([...b.arms.keys()]).toEqual(['A']);
        seen.add(b.campaign.campaignId);
      }
    }
    expect(seen.size).toBe(36); // every campaign in exactly one shard
  });

  it('picks up a budget change at the next refresh, reading only the overlap window', async () => {
    const clock = new ManualClock(T0 + 120_000);
    const accountId = 'acc-5';
    const shard = shardOfAccount(accountId, N);
    const cache = cacheFor(shard, clock);
    await cache.refresh();
    clock.advance(10_000);
    await repo.putPlan(
      {
        level: 'campaign',
        accountId,
        campaignId: 'acc-5-c1',
        dailyBudgetMicros: 99_000_000,
        pacingMode: 'asap',
      },
      'update',
      clock.now(),
    );
    const outcome = await cache.refresh();
    expect(outcome).toMatchObject({ kind: 'incremental', applied: 1, campaignsChanged: 1 });
    const plan = cache.campaign('acc-5-c1')?.common.find((p) => p.level === 'campaign');
    expect(plan).toMatchObject({ dailyBudgetMicros: 99_000_000, pacingMode: 'asap' });
    // Steady state: the query starts one overlap before the newest change, not at the shard's start.
    clock.advance(10_000);
    await repo.putPlan(
      {
        level: 'arm',
        accountId,
        campaignId: 'acc-5-c0',
        armId: 'A',
        dailyBudgetMicros: 5_000_000,
        pacingMode: 'even',
      },
      'update',
      clock.now(),
    );
    expect(await cache.refresh()).toMatchObject({
      kind: 'incremental',
      read: 2,
      applied: 1,
      campaignsChanged: 1,
    });
    expect(cache.campaign('acc-5-c0')?.arms.get('A')?.dailyBudgetMicros).toBe(5_000_000);
    // Nothing new: the next incremental query reads the overlap again and applies nothing.
    clock.advance(10_000);
    expect(await cache.refresh()).toMatchObject({ kind: 'incremental', applied: 0, campaignsChanged: 0 });
  });

  it('an account change (time zone) rebuilds every campaign of the account', async () => {
    const clock = new ManualClock(T0 + 200_000);
    const accountId = 'acc-7';
    const cache = cacheFor(shardOfAccount(accountId, N), clock);
    await cache.refresh();
    await repo.putAccount(
      { accountId, name: accountId, timeZone: 'Pacific/Auckland', currency: 'USD' },
      'update',
      clock.now(),
    );
    const outcome = await cache.refresh();
    expect(outcome.campaignsChanged).toBe(3);
    for (let c = 0; c < 3; c++) {
      expect(cache.campaign(`${accountId}-c${c}`)?.common[0]?.timeZone).toBe('Pacific/Auckland');
    }
  });

  it('catches a write stamped before the overlap window at the next full reload', async () => {
    const clock = new ManualClock(T0 + 400_000);
    const accountId = 'acc-2';
    const cache = cacheFor(shardOfAccount(accountId, N), clock);
    await cache.refresh();
    // A writer whose clock is 10 minutes behind.
    await repo.putPlan(
      {
        level: 'campaign',
        accountId,
        campaignId: 'acc-2-c2',
        dailyBudgetMicros: 1_000_000,
        pacingMode: 'even',
      },
      'update',
      clock.now() - 600_000,
    );
    clock.advance(10_000);
    expect((await cache.refresh()).applied).toBe(0);
    clock.advance(300_000);
    const full = await cache.refresh();
    expect(full.kind).toBe('full');
    expect(cache.campaign('acc-2-c2')?.common.find((p) => p.level === 'campaign')?.dailyBudgetMicros).toBe(
      1_000_000,
    );
  });

  it('keeps serving its cache while DynamoDB is unreachable', async () => {
    const clock = new ManualClock(T0 + 900_000);
    const cache = cacheFor(0, clock);
    await cache.refresh();
    const before = cache.campaigns().length;
    await region.dynamoEmulator.suspend();
    try {
      clock.advance(10_000);
      await expect(cache.refresh()).rejects.toThrow();
      expect(cache.campaigns()).toHaveLength(before);
    } finally {
      await region.dynamoEmulator.resume();
    }
    clock.advance(10_000);
    await expect(cache.refresh()).resolves.toMatchObject({ kind: 'incremental' });
  });

  it('refuses to write without a shard count, saying where N comes from', async () => {
    const bare = new BudgetRepository({ client: region.dynamodb, tableName: region.tableName('budgets') });
    await expect(
      bare.putAccount({ accountId: 'x', name: 'x', timeZone: 'UTC', currency: 'USD' }),
    ).rejects.toThrow(BudgetShardingError);
    await expect(
      bare.putAccount({ accountId: 'x', name: 'x', timeZone: 'UTC', currency: 'USD' }),
    ).rejects.toThrow(/PACER_SHARDS/);
  });

  it('re-sharding (budgets reshard --shards 8) re-tags every item so the new layout finds all campaigns', async () => {
    const result = (await budgetsCli(['reshard', '--shards', '8'], region.clientEnv)) as { retagged: number };
    expect(result.retagged).toBeGreaterThan(0);
    const seen = new Set<string>();
    for (let shard = 0; shard < 8; shard++) {
      const cache = cacheFor(shard, new ManualClock(Date.now()), 8);
      await cache.refresh();
      for (const b of cache.campaigns()) {
        expect(shardOfAccount(b.account.accountId, 8)).toBe(shard);
        seen.add(b.campaign.campaignId);
      }
    }
    expect(seen.size).toBe(36);
    // Idempotent: a second run has nothing left to re-tag.
    expect((await repo.reshard(8, Date.now() + 1)).retagged).toBe(0);
    await repo.reshard(N, Date.now() + 2);
  });
});
