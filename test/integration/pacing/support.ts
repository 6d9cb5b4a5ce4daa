/**
 * Shared set-up of the pacing integration tests: budgets in a shard (written through the
 * repository, or as the shard index returns them), pacer instances on a manual clock, and the
 * fixed identity of a pacer driven tick by tick.
 */
import { PutParameterCommand, type SSMClient } from '@aws-sdk/client-ssm';
import type { LocalRegion } from '../../../local/region.js';
import type { BudgetPlan } from '../../../shared/budget/model.js';
import { type BudgetItem, BudgetRepository, planKey } from '../../../shared/budget/repository.js';
import { ShardBudgets } from '../../../shared/pacing/budgets-cache.js';
import { PacerControl } from '../../../shared/pacing/control.js';
import type { PacingController } from '../../../shared/pacing/controller/api.js';
import { ShardLease } from '../../../shared/pacing/lease.js';
import { ShardPacer, type TickIdentity, type TickOutcome } from '../../../shared/pacing/pacer.js';
import { readAuditLog } from '../../../shared/pacing/publisher.js';
import { pacerShardKey, shardOfAccount } from '../../../shared/pacing/shard.js';
import { pipelinedSpendSource } from '../../../shared/pacing/spend-source.js';
import type { RedisClient } from '../../../shared/redis/connect.js';
import { leaderOverridePath, pacerInstanceId, parameterPrefix } from '../../../shared/region/resources.js';
import type { Clock } from '../../../shared/time/clock.js';
import { fixedIdentity } from '../../../sim/engine-parts.js';

/** `count` account ids that hash to `shard` of `shards`. */
export function accountsInShard(shard: number, shards: number, count: number, prefix = 'acct'): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < count; i++) {
    const id = `${prefix}-${i}`;
    if (shardOfAccount(id, shards) === shard) out.push(id);
  }
  return out;
}

/** Creates accounts (with an account plan), campaigns (campaign plan) and, on the first campaign, arms A and B. */
export async function seedShard(
  repo: BudgetRepository,
  accountIds: readonly string[],
  campaignsPerAccount: number,
  now: number,
): Promise<string[]> {
  const campaigns: string[] = [];
  for (const accountId of accountIds) {
    await repo.putAccount(
      { accountId, name: accountId, timeZone: 'America/New_York', currency: 'USD' },
      'upsert',
      now,
    );
    await repo.putPlan(
      { level: 'account', accountId, dailyBudgetMicros: 900_000_000, pacingMode: 'even' },
      'upsert',
      now,
    );
    for (let c = 0; c < campaignsPerAccount; c++) {
      const campaignId = `${accountId}-c${c}`;
      campaigns.push(campaignId);
      await repo.putCampaign({ campaignId, accountId, name: campaignId, status: 'active' }, 'upsert', now);
      await repo.putPlan(
        { level: 'campaign', accountId, campaignId, dailyBudgetMicros: 100_000_000, pacingMode: 'even' },
        'upsert',
        now,
      );
      if (c === 0) {
        for (const armId of ['A', 'B']) {
          await repo.putPlan(
            { level: 'arm', accountId, campaignId, armId, dailyBudgetMicros: 40_000_000, pacingMode: 'asap' },
            'upsert',
            now,
          );
        }
      }
    }
  }
  return campaigns;
}

/** What every item of a test shard carries: its version, when it was written and its shard. */
export type ItemStamp = Pick<BudgetItem, 'version' | 'updatedAt' | 'pacerShard'>;

/** A plan as a test writes it: any pacing mode id, known to this version or not. */
export type TestPlan = Omit<BudgetPlan, 'pacingMode'> & { readonly pacingMode: string };

/** A plan's item as the shard index returns it. */
export function planItem(stamp: ItemStamp, plan: TestPlan): BudgetItem {
  return { ...stamp, ...planKey(plan), type: 'plan', ...plan };
}

/** An account (UTC, USD) and its `even` account plan, as the shard index returns them. */
export function accountItems(stamp: ItemStamp, accountId: string, dailyBudgetMicros: number): BudgetItem[] {
  const account = { accountId, name: accountId, timeZone: 'UTC', currency: 'USD' };
  return [
    { ...stamp, pk: `ACCOUNT#${accountId}`, sk: 'ACCOUNT', type: 'account', ...account },
    planItem(stamp, { level: 'account', accountId, dailyBudgetMicros, pacingMode: 'even' }),
  ];
}

/** An active campaign, as the shard index returns it. */
export function campaignItem(stamp: ItemStamp, accountId: string, campaignId: string): BudgetItem {
  const campaign = { campaignId, accountId, status: 'active' };
  return { ...stamp, pk: `CAMPAIGN#${campaignId}`, sk: 'CAMPAIGN', type: 'campaign', ...campaign };
}

/**
 * Instance `i` of `shard` (`s<shard>-i<i>`, process `test`) in region `test`: it holds the lease at
 * `epoch` on every tick, or follows (undefined); no lease table or SSM behind it.
 */
export function testIdentity(shard: number, i: number, epoch: number | undefined): TickIdentity {
  return fixedIdentity({
    instanceId: `s${shard}-i${i}`,
    publisherId: `s${shard}-i${i}/test`,
    publisherRegion: 'test',
    epoch,
  });
}

/** A pacer instance as one process would run it. */
export interface TestInstance {
  readonly instanceId: string;
  readonly pacer: ShardPacer;
  readonly lease: ShardLease;
  readonly control: PacerControl;
  readonly publisherId: string;
  tick(tick: number): Promise<TickOutcome>;
}

/** Options of {@link makeInstance}. */
export interface InstanceOptions {
  readonly region: LocalRegion;
  readonly redis: RedisClient;
  readonly shard: number;
  readonly instance: number;
  readonly clock: Clock;
  readonly controller: PacingController<unknown, unknown>;
  readonly tickMs?: number;
  readonly leaseTtlMs?: number;
  /** Distinguishes processes of one instance. @default 'p' */
  readonly nonce?: string;
  /** ShardPacer's publish deadband. @default the pacer's */
  readonly deadband?: { readonly throttle: number; readonly multiplier: number };
  /** ShardPacer's bounded republish, ticks. @default the pacer's */
  readonly republishTicks?: number;
}

/** One pacer instance (own budgets cache, lease, control reader) against a local region. */
export function makeInstance(o: InstanceOptions): TestInstance {
  const shards = o.region.description.settings.pacer.shards;
  const repo = new BudgetRepository({ client: o.region.dynamodb, tableName: o.region.tableName('budgets') });
  const instanceId = pacerInstanceId(o.shard, o.instance);
  const tickMs = o.tickMs ?? 10_000;
  const pacer = new ShardPacer({
    shard: o.shard,
    region: o.region.region,
    redis: o.redis,
    controller: o.controller,
    budgets: new ShardBudgets({
      source: (since, start) => repo.shardItemsPage(pacerShardKey(o.shard, shards), since, start),
      clock: o.clock,
    }),
    spend: pipelinedSpendSource(o.redis),
    clock: o.clock,
    tickMs,
    ...(o.deadband ? { deadband: o.deadband } : {}),
    ...(o.republishTicks ? { republishTicks: o.republishTicks } : {}),
  });
  const lease = new ShardLease({
    client: o.region.dynamodb,
    tableName: o.region.tableName('leases'),
    shard: o.shard,
    instanceId,
    processId: o.nonce ?? 'p',
    invocationStartMs: o.clock.now(),
    ttlMs: o.leaseTtlMs ?? 25_000,
    clock: o.clock,
  });
  const control = new PacerControl({
    ssm: o.region.ssm,
    region: o.region.region,
    shard: o.shard,
    clock: o.clock,
  });
  const publisherId = `${instanceId}/${o.nonce ?? 'p'}`;
  return {
    instanceId,
    pacer,
    lease,
    control,
    publisherId,
    tick: (tick) => pacer.runTick(tick, { instanceId, publisherId, lease, control }),
  };
}

/** Sets a shard's leader override (`auto` or an instance id). */
export async function setOverride(
  ssm: SSMClient,
  region: string,
  shard: number,
  value: string,
): Promise<void> {
  await ssm.send(
    new PutParameterCommand({
      Name: `${parameterPrefix(region)}${leaderOverridePath(shard)}`,
      Value: value,
      Overwrite: true,
      Type: 'String',
    }),
  );
}

/** Accepted claims per tick from the shard's audit stream (the server's record of who published). */
export async function publishersByTick(redis: RedisClient, shard: number): Promise<Map<number, string[]>> {
  const out = new Map<number, string[]>();
  for (const e of await readAuditLog(redis, shard)) {
    if (e.kind !== 'claim' || !e.accepted) continue;
    out.set(e.tick, [...(out.get(e.tick) ?? []), e.publisher]);
  }
  return out;
}
