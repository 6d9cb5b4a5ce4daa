/**
 * The shard pacer's tick against a real local region (dynalite, redis-server, the SSM endpoint),
 * three instances of one shard driven tick by tick on a manual clock: one publisher per tick,
 * parameters every ad server can decode (all arms in one hash), failover within lease TTL + one
 * tick, no jump in published parameters at a leader change (state continued from Redis), the
 * leader override working while DynamoDB is unreachable and handing back on `auto`, no publishing
 * while the region's publish switch names another region, fail-safe parameters (counted) for
 * a controller output that cannot be published, and (contract v2) continuing publishes that write
 * a campaign only beyond the deadband or at its bounded republish while readers stay fresh from
 * the shard's claim hash.
 */
import { PutParameterCommand } from '@aws-sdk/client-ssm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { BudgetRepository } from '../../../shared/budget/repository.js';
import { decodeCampaignHash, decodeShardPublish, effectivePublish } from '../../../shared/pacing/codec.js';
import type { PacingController } from '../../../shared/pacing/controller/api.js';
import { createPacingController, FAIL_SAFE_THROTTLE } from '../../../shared/pacing/controller/index.js';
import { createLinearController } from '../../../shared/pacing/controller/linear.js';
import { shardKeys } from '../../../shared/pacing/keys.js';
import { PacingReader } from '../../../shared/pacing/reader.js';
import { connectRedis, type RedisClient, redisConfigFromEnv } from '../../../shared/redis/connect.js';
import { AUTO_LEADER, parameterPrefix } from '../../../shared/region/resources.js';
import { ManualClock } from '../../../shared/time/clock.js';
import {
  accountsInShard,
  type InstanceOptions,
  makeInstance,
  publishersByTick,
  seedShard,
  setOverride,
  type TestInstance,
} from './support.js';

const TICK = 10_000;
const TTL = 25_000;
const T0 = Date.UTC(2026, 10, 21, 15, 0, 0); // a minute boundary
let region: LocalRegion;
let redis: RedisClient;
let campaigns: string[];
/** Each test uses its own shard of the 4 (keys, leases and audit stream are per shard). */
const SHARDS = 4;

/** A controller whose state counts its steps and shows the count in the throttle. */
const counting: PacingController<unknown, unknown> = (() => {
  const linear = createLinearController();
  return {
    name: 'counting',
    step(input, previous) {
      const n = ((previous as { n: number } | undefined)?.n ?? 0) + 1;
      const base = linear.step(input, undefined, undefined);
      return { params: { ...base.params, throttle: n / 10_000 }, state: { n }, forecast: undefined };
    },
    encodeState: (s) => String((s as { n: number }).n),
    decodeState: (raw) => ({ n: Number(raw) }),
    encodeForecast: () => '',
    decodeForecast: () => undefined,
  };
})();

beforeAll(async () => {
  region = await startLocalRegion();
  redis = connectRedis(redisConfigFromEnv(region.clientEnv));
  const repo = new BudgetRepository({
    client: region.dynamodb,
    tableName: region.tableName('budgets'),
    pacerShards: SHARDS,
  });
  campaigns = [];
  for (let shard = 0; shard < SHARDS; shard++) {
    campaigns.push(
      ...(await seedShard(repo, accountsInShard(shard, SHARDS, 2, `s${shard}`), 3, T0 - 60_000)),
    );
  }
}, 60_000);

afterAll(async () => {
  redis?.disconnect();
  await region?.stop();
});

function trio(
  shard: number,
  clock: ManualClock,
  controller: PacingController<unknown, unknown> = createPacingController() as PacingController<
    unknown,
    unknown
  >,
  extra: Pick<InstanceOptions, 'deadband' | 'republishTicks'> = {},
): TestInstance[] {
  return [0, 1, 2].map((instance) =>
    makeInstance({
      region,
      redis,
      shard,
      instance,
      clock,
      controller,
      tickMs: TICK,
      leaseTtlMs: TTL,
      ...extra,
    }),
  );
}

/** The campaign hash decoded with the freshness a reader gives it (the shard's claim hash). */
async function readPublished(shard: number, campaignId: string) {
  const own = decodeCampaignHash(await redis.hgetall(shardKeys(shard).campaign(campaignId)));
  const [pt, pat, rp] = await redis.hmget(shardKeys(shard).claim, 'pt', 'pat', 'rp');
  return { own, effective: own && effectivePublish(own, decodeShardPublish({ pt, pat, rp })) };
}

async function runTicks(instances: readonly TestInstance[], clock: ManualClock, count: number) {
  const outcomes = [];
  for (let i = 0; i < count; i++) {
    const tick = Math.floor(clock.now() / TICK);
    outcomes.push(await Promise.all(instances.map((x) => x.tick(tick))));
    clock.advance(TICK);
  }
  return outcomes;
}

describe('shard pacer, three instances', () => {
  it('publishes every tick from exactly one instance, every arm of a campaign in one decodable hash', async () => {
    const shard = 0;
    const clock = new ManualClock(T0);
    const instances = trio(shard, clock);
    const rounds = await runTicks(instances, clock, 6);
    for (const round of rounds) {
      expect(round.filter((o) => o.published)).toHaveLength(1);
      expect(round.every((o) => o.campaignsPaced === 6)).toBe(true); // followers compute too
    }
    const byTick = await publishersByTick(redis, shard);
    expect([...byTick.values()].every((p) => p.length === 1)).toBe(true);
    expect(byTick.size).toBe(6);
    const campaignId = campaigns.find((c) => c.startsWith('s0-') && c.endsWith('-c0')) as string;
    const published = (await readPublished(shard, campaignId)).effective;
    expect([...(published?.plans.keys() ?? [])]).toEqual(['account', 'campaign', 'arm:A', 'arm:B']);
    expect(published?.plans.get('arm:A')).toMatchObject({
      throttle: 1,
      bidMultiplier: 1,
      mode: 'asap',
      budgetMicros: 40_000_000,
    });
    expect(published?.tick).toBe(Math.floor((T0 + 5 * TICK) / TICK));
    const day = published?.plans.get('campaign')?.dayWindow;
    expect(day?.endMs).toBe(published?.plans.get('campaign')?.curve.atMs.at(-1));
  });

  it('fails over when the leader stops: another instance publishes within lease TTL + one tick', async () => {
    const shard = 1;
    const clock = new ManualClock(T0);
    const instances = trio(shard, clock);
    const first = await runTicks(instances, clock, 2);
    const leader = first[1]?.find((o) => o.published)?.instanceId;
    const survivors = instances.filter((x) => x.instanceId !== leader);
    const diedAt = clock.now();
    let takeoverAt: number | undefined;
    for (let i = 0; i < 6 && takeoverAt === undefined; i++) {
      const tick = Math.floor(clock.now() / TICK);
      const round = await Promise.all(survivors.map((x) => x.tick(tick)));
      if (round.some((o) => o.published)) takeoverAt = clock.now();
      clock.advance(TICK);
    }
    expect(takeoverAt).toBeDefined();
    // The dead leader last renewed one tick before `diedAt`.
    expect((takeoverAt as number) - (diedAt - TICK)).toBeLessThanOrEqual(TTL + TICK);
    const byTick = await publishersByTick(redis, shard);
    expect([...byTick.values()].every((p) => p.length === 1)).toBe(true);
  });

  it('continues the published controller state at a leader change (no jump)', async () => {
    const shard = 2;
    const clock = new ManualClock(T0);
    // Deadband 0: every change is published at once (this test is about the state, not the deadband).
    const exact = { deadband: { throttle: 0, multiplier: 0 } };
    const [a, b, c] = trio(shard, clock, counting, exact) as [TestInstance, TestInstance, TestInstance];
    // a leads alone for 5 ticks; b and c join later (their own counts lag behind).
    await runTicks([a], clock, 5);
    await runTicks([a, b, c], clock, 1);
    const campaignId = campaigns.find((x) => x.startsWith('s2-')) as string;
    const key = shardKeys(shard).campaign(campaignId);
    const before = decodeCampaignHash(await redis.hgetall(key))?.plans.get('campaign')?.throttle as number;
    expect(before).toBe(6 / 10_000);
    // a dies; the first tick someone else publishes continues from a's 6, not from its own 1–2.
    let after: number | undefined;
    for (let i = 0; i < 6 && after === undefined; i++) {
      const tick = Math.floor(clock.now() / TICK);
      const round = await Promise.all([b, c].map((x) => x.tick(tick)));
      const winner = round.find((o) => o.published);
      if (winner) {
        expect(winner.stateReloaded).toBe(true);
        after = decodeCampaignHash(await redis.hgetall(key))?.plans.get('campaign')?.throttle;
      }
      clock.advance(TICK);
    }
    expect(after).toBe(7 / 10_000);
  });

  it('publishes from the overridden instance while DynamoDB is down, and hands back on auto', async () => {
    const shard = 3;
    const clock = new ManualClock(T0);
    const instances = trio(shard, clock);
    const warm = await runTicks(instances, clock, 2);
    const holder = warm[1]?.find((o) => o.published)?.instanceId as string;
    const named = instances.find((x) => x.instanceId !== holder) as TestInstance;
    await region.dynamoEmulator.suspend();
    let overrideTick: number;
    try {
      await setOverride(region.ssm, region.region, shard, named.instanceId);
      overrideTick = Math.floor(clock.now() / TICK);
      const during = await runTicks(instances, clock, 3);
      for (const round of during) {
        expect(round.filter((o) => o.published).map((o) => o.instanceId)).toEqual([named.instanceId]);
        expect(round.every((o) => o.lease.event === 'unavailable')).toBe(true);
      }
    } finally {
      await region.dynamoEmulator.resume();
    }
    await setOverride(region.ssm, region.region, shard, AUTO_LEADER);
    const back = await runTicks(instances, clock, 3);
    for (const round of back) expect(round.filter((o) => o.published)).toHaveLength(1);
    expect(back[0]?.find((o) => o.published)?.instanceId).not.toBe(named.instanceId);
    // Every tick from the start had exactly one publisher: none with two, none without one.
    const byTick = await publishersByTick(redis, shard);
    const first = Math.floor(T0 / TICK);
    for (let t = first; t < first + 8; t++) expect(byTick.get(t)?.length, `tick ${t}`).toBe(1);
    expect(byTick.get(overrideTick)?.[0]).toBe(named.publisherId);
  });

  it('publishes nothing while the region’s publish switch names another region', async () => {
    const shard = 0;
    const clock = new ManualClock(T0 + 3_600_000);
    const instances = trio(shard, clock);
    const name = `${parameterPrefix(region.region)}publisher-region`;
    await region.ssm.send(
      new PutParameterCommand({ Name: name, Value: 'us-west-2', Overwrite: true, Type: 'String' }),
    );
    try {
      const rounds = await runTicks(instances, clock, 2);
      for (const round of rounds) {
        expect(round.some((o) => o.isLeader || o.published)).toBe(false);
        expect(round.every((o) => o.campaignsPaced === 6)).toBe(true);
      }
    } finally {
      await region.ssm.send(
        new PutParameterCommand({ Name: name, Value: region.region, Overwrite: true, Type: 'String' }),
      );
    }
    // The switch's version is the fence's generation: back home, the new generation publishes.
    const again = await runTicks(instances, clock, 1);
    expect(again[0]?.find((o) => o.published)?.fence?.g).toBe(3);
  });

  it('publishes fail-safe parameters (counted) for a controller output it cannot publish', async () => {
    const shard = 1;
    const clock = new ManualClock(T0 + 7_200_000);
    const broken: PacingController<unknown, unknown> = {
      ...createPacingController(),
      name: 'broken',
      step(input) {
        const ok = createLinearController().step(input, undefined, undefined);
        return { ...ok, params: { ...ok.params, throttle: Number.NaN } };
      },
    };
    const [x] = trio(shard, clock, broken) as [TestInstance];
    // x may need the lease to expire: the earlier test's survivors held it.
    clock.advance(TTL);
    const [outcome] = (await runTicks([x], clock, 1))[0] as [Awaited<ReturnType<TestInstance['tick']>>];
    expect(outcome.published).toBe(true);
    expect(outcome.invalidParams).toBe(outcome.plansPaced);
    const campaignId = campaigns.find((c) => c.startsWith('s1-')) as string;
    const p = decodeCampaignHash(await redis.hgetall(shardKeys(shard).campaign(campaignId)))?.plans.get(
      'campaign',
    );
    expect(p?.throttle).toBe(FAIL_SAFE_THROTTLE);
  });

  it('writes a campaign only beyond the deadband or at its republish slot; readers stay fresh from the claim', async () => {
    const shard = 3;
    const clock = new ManualClock(T0 + 12_000_000);
    // Throttle 0.5 + n / 10,000 after n steps: it moves 0.0001 a tick, under the 0.00025 deadband.
    const creeping: PacingController<unknown, unknown> = {
      ...counting,
      name: 'creeping',
      step(input, previous) {
        const n = ((previous as { n: number } | undefined)?.n || 0) + 1;
        const base = createLinearController().step(input, undefined, undefined);
        return { params: { ...base.params, throttle: 0.5 + n / 10_000 }, state: { n }, forecast: undefined };
      },
    };
    const deadband = 0.00025;
    const [x] = trio(shard, clock, creeping, {
      deadband: { throttle: deadband, multiplier: 0 },
      republishTicks: 3,
    }) as [TestInstance];
    clock.advance(TTL); // the earlier test's instances held the lease
    const campaignId = campaigns.find((c) => c.startsWith('s3-')) as string;
    let firstThrottle: number | undefined;
    let hashWrites = 0;
    const ticks = 9;
    for (let k = 0; k < ticks; k++) {
      const tick = Math.floor(clock.now() / TICK);
      const [outcome] = (await runTicks([x], clock, 1))[0] as [Awaited<ReturnType<TestInstance['tick']>>];
      expect(outcome.published).toBe(true);
      const { own, effective } = await readPublished(shard, campaignId);
      const throttle = own?.plans.get('campaign')?.throttle as number;
      // The first publish of a new publisher writes every field exactly.
      firstThrottle ??= throttle;
      const computed = (firstThrottle as number) + k / 10_000;
      expect(Math.abs(throttle - computed), `tick ${k}`).toBeLessThanOrEqual(deadband + 1e-9);
      if (own?.tick === tick) hashWrites++;
      // Bounded republish: the hash is never more than republishTicks ticks behind.
      expect(tick - (own?.tick as number), `tick ${k}`).toBeLessThan(3);
      // The claim hash vouches for the shard's last completed publish: fresh, this tick.
      expect(effective?.tick).toBe(tick);
      // An ad server's reader (a new one each tick: one remote read) sees the same.
      const reader = new PacingReader({ redis, clock, shards: SHARDS, tickMs: TICK, maxAgeMs: 3 * TICK });
      const fromReader = await reader.get(campaignId.split('-c')[0] as string, campaignId);
      expect(fromReader).toMatchObject({ status: 'fresh', tick });
      expect(fromReader.plans.get('campaign')?.throttle).toBe(throttle);
      expect(reader.metrics).toMatchObject({ remoteReads: 1, shardReads: 1 });
    }
    // No per-tick rewrite of every hash: some ticks left this campaign untouched.
    expect(hashWrites).toBeGreaterThan(1);
    expect(hashWrites).toBeLessThan(ticks);
  });

  it('warms a cold process from the Redis budgets snapshot while DynamoDB is unreachable', async () => {
    const clock = new ManualClock(T0 + 9_000_000);
    const [cold] = trio(2, clock) as [TestInstance];
    const [colder] = trio(0, clock) as [TestInstance];
    // Shard 0's snapshot is gone (never published, or Redis lost it): nothing to pace from.
    await redis.del(shardKeys(0).budgets);
    await region.dynamoEmulator.suspend();
    try {
      const warm = await cold.tick(Math.floor(clock.now() / TICK));
      expect(warm.budgets).toMatchObject({ ok: false, fromSnapshot: true });
      expect(warm.campaignsPaced).toBe(6);
      const none = await colder.tick(Math.floor(clock.now() / TICK));
      expect(none.published).toBe(false);
      expect(none.skippedReason).toMatch(/no budgets loaded/);
    } finally {
      await region.dynamoEmulator.resume();
    }
  });
});
