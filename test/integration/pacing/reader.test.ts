/**
 * PacingReader against real Redis with parameters published through the fenced scripts: all arms
 * of a campaign in one response and one remote read; cached lookups are hits; refresh-ahead
 * re-reads hot campaigns after the next publish in one batch so they never miss; parameters older
 * than the maximum age (or of a finished day) give the fail-safe, counted; a malformed hash is
 * counted and served as missing; the guard's curve follows the published curve when fresh and the
 * linear one when stale, never above the plan's budget.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningRedis, startRedis } from '../../../local/emulators/redis.js';
import { campaignBudgets, type ResolvedPlan, resolvePlan } from '../../../shared/budget/model.js';
import { linearExpected } from '../../../shared/budget/pacing.js';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import { encodeCurve, encodePlanParams } from '../../../shared/pacing/codec.js';
import { FAIL_SAFE_THROTTLE } from '../../../shared/pacing/controller/index.js';
import { campaignParamsKey } from '../../../shared/pacing/keys.js';
import { PublishedReads } from '../../../shared/pacing/published-reads.js';
import { ShardPublisher } from '../../../shared/pacing/publisher.js';
import { PacingReader, publishedCurve } from '../../../shared/pacing/reader.js';
import { shardOfAccount } from '../../../shared/pacing/shard.js';
import { evaluateCurve, type PlanPacingParams } from '../../../shared/pacing/types.js';
import { connectRedis, type RedisClient } from '../../../shared/redis/connect.js';
import { BudgetGuard } from '../../../shared/spend/guard.js';
import { Reconciler } from '../../../shared/spend/reconcile.js';
import { ManualClock } from '../../../shared/time/clock.js';
import { memoryLedger } from '../../../sim/engine-parts.js';

const SHARDS = 24;
const TICK = 10_000;
const T0 = Date.UTC(2026, 10, 21, 15, 0, 0);
const DAY = dayWindow(T0, 'UTC');
let server: RunningRedis;
let redis: RedisClient;
let epoch = 1;
/** Last tick claimed per shard (tests publish at the same instants on shared shards). */
const lastTick = new Map<number, number>();

function params(
  planId: string,
  throttle: number,
  multiplier: number,
  curve?: PlanPacingParams['curve'],
): PlanPacingParams {
  return {
    planId,
    day: DAY.day,
    budgetMicros: 100_000_000,
    mode: 'even',
    throttle,
    bidMultiplier: multiplier,
    curve: curve ?? { atMs: [DAY.startMs, DAY.endMs], micros: [0, 100_000_000] },
  };
}

/** Publishes a campaign's plans at `nowMs` through the real claim + publish scripts. */
async function publish(accountId: string, campaignId: string, plans: PlanPacingParams[], nowMs: number) {
  const shard = shardOfAccount(accountId, SHARDS);
  const publisher = new ShardPublisher({ redis, shard, publisherId: 'test/1' });
  const fence = { g: 1, o: 1, e: epoch++ };
  const tick = Math.max(Math.floor(nowMs / TICK), (lastTick.get(shard) ?? 0) + 1);
  lastTick.set(shard, tick);
  expect((await publisher.claim(fence, tick, nowMs)).accepted).toBe(true);
  const fields = ['plans', plans.map((p) => p.planId).join(',')];
  for (const p of plans)
    fields.push(`p:${p.planId}`, encodePlanParams(p, DAY), `e:${p.planId}`, encodeCurve(p.curve));
  await publisher.publish({
    fence,
    tick,
    nowMs,
    campaigns: [{ campaignId, mode: 'F', fields }],
  });
}

beforeAll(async () => {
  server = await startRedis();
  redis = connectRedis({
    mode: 'standalone',
    nodes: [{ host: '127.0.0.1', port: Number(server.nodes[0]?.split(':')[1]) }],
    tls: false,
  });
});
afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
});

describe('PacingReader', () => {
  it('returns every arm of a campaign in one response and serves later lookups from the cache', async () => {
    const clock = new ManualClock(T0 + 1_000);
    await publish(
      'acc-r1',
      'camp-r1',
      [
        params('account', 0.9, 1),
        params('campaign', 0.5, 0.8),
        params('arm:A', 0.25, 0.9),
        params('arm:B', 1, 0.7),
      ],
      clock.now(),
    );
    const reader = new PacingReader({ redis, clock, shards: SHARDS });
    const first = await reader.get('acc-r1', 'camp-r1');
    expect(first.status).toBe('fresh');
    expect([...first.plans.keys()]).toEqual(['account', 'campaign', 'arm:A', 'arm:B']);
    expect(reader.metrics).toMatchObject({ remoteReads: 1, misses: 1 });
    for (let i = 0; i < 1000; i++) reader.lookup('camp-r1');
    expect(reader.metrics.remoteReads).toBe(1);
    // Combined for a bid: each plan is its own gate, so throttles multiply and so do multipliers
    // (combineForBid; docs/pacing.md "Several plans per bid").
    const a = reader.forBid('acc-r1', 'camp-r1', 'A');
    expect(a.status).toBe('fresh');
    expect(a.throttle).toBeCloseTo(0.9 * 0.5 * 0.25, 12);
    expect(a.bidMultiplier).toBeCloseTo(1 * 0.8 * 0.9, 12);
    const b = reader.forBid('acc-r1', 'camp-r1', 'B');
    expect(b.throttle).toBeCloseTo(0.9 * 0.5 * 1, 12);
    expect(b.bidMultiplier).toBeCloseTo(1 * 0.8 * 0.7, 12);
    const none = reader.forBid('acc-r1', 'camp-r1');
    expect(none.throttle).toBeCloseTo(0.9 * 0.5, 12);
    expect(none.bidMultiplier).toBeCloseTo(0.8, 12);
  });

  it('refreshes hot campaigns after the next publish in one batch, so they never miss', async () => {
    const clock = new ManualClock(T0 + 1_000);
    const ids = Array.from({ length: 50 }, (_, i) => [`acc-h${i}`, `camp-h${i}`] as const);
    for (const [a, c] of ids) await publish(a, c, [params('campaign', 0.4, 1)], clock.now());
    const reader = new PacingReader({ redis, clock, shards: SHARDS, settleMs: 2_000 });
    await reader.prefetch(ids.map(([accountId, campaignId]) => ({ accountId, campaignId })));
    const readsAfterPrefetch = reader.metrics.remoteReads;
    for (const [, c] of ids) expect(reader.lookup(c)?.plans.get('campaign')?.throttle).toBe(0.4);
    // Next tick: the pacer publishes new throttles; the reader refreshes settleMs after the boundary.
    clock.set(T0 + TICK + 500);
    for (const [a, c] of ids) await publish(a, c, [params('campaign', 0.6, 1)], clock.now());
    clock.set(T0 + TICK + 2_000);
    await reader.refreshDue();
    expect(reader.metrics.remoteReads - readsAfterPrefetch).toBe(50); // one batch of the hot set
    const misses = reader.metrics.misses;
    for (const [, c] of ids) {
      const p = reader.lookup(c);
      expect(p?.plans.get('campaign')?.throttle).toBe(0.6);
    }
    expect(reader.metrics.misses).toBe(misses);
  });

  it('reads batches from the reply bytes as the client would; an unchanged curve is not parsed again', async () => {
    const clock = new ManualClock(T0 + 1_000);
    const curve = { atMs: [DAY.startMs, T0, DAY.endMs], micros: [0, 40_000_000, 100_000_000] };
    const ids = Array.from({ length: 20 }, (_, i) => [`acc-raw${i}`, `camp-raw${i}`] as const);
    for (const [a, c] of ids)
      await publish(a, c, [params('account', 0.9, 1), params('campaign', 0.3, 0.7, curve)], clock.now());
    const endListeners = redis.listenerCount('end');
    const raw = new PacingReader({ redis, clock, shards: SHARDS });
    const viaClient = new PacingReader({ redis, clock, shards: SHARDS, rawReads: false });
    const campaigns = ids.map(([accountId, campaignId]) => ({ accountId, campaignId }));
    await raw.prefetch(campaigns);
    await viaClient.prefetch(campaigns);
    for (const [, c] of ids) expect(raw.lookup(c)).toEqual(viaClient.lookup(c));
    const before = raw.lookup('camp-raw0')?.plans.get('campaign')?.curve;
    expect(before).toEqual(curve);
    // Next tick: new throttles, the same curves (the pacer rewrites the hash, the `e:` text is equal).
    clock.set(T0 + TICK + 500);
    for (const [a, c] of ids)
      await publish(a, c, [params('account', 0.8, 1), params('campaign', 0.2, 0.6, curve)], clock.now());
    clock.set(T0 + TICK + 2_000);
    await raw.refreshDue();
    await viaClient.refreshDue();
    for (const [, c] of ids) expect(raw.lookup(c)).toEqual(viaClient.lookup(c));
    const after = raw.lookup('camp-raw0')?.plans.get('campaign');
    expect(after?.throttle).toBe(0.2);
    expect(after?.curve).toBe(before);
    expect(raw.metrics).toMatchObject({ decodeErrors: 0, misses: 0 });
    raw.close();
    viaClient.close();
    // Its sockets closed, the reader leaves nothing on the client (no listener per reader).
    expect(redis.listenerCount('end')).toBe(endListeners);
  });

  it('readers sharing their reads: one read of each hash per tick for all, each its own cache', async () => {
    const clock = new ManualClock(T0 + 1_000);
    const ids = Array.from({ length: 20 }, (_, i) => [`acc-sh${i}`, `camp-sh${i}`] as const);
    for (const [a, c] of ids)
      await publish(a, c, [params('account', 0.9, 1), params('campaign', 0.3, 0.7)], clock.now());
    const shared = new PublishedReads({ redis });
    const a = new PacingReader({ redis, clock, shards: SHARDS, reads: shared });
    const b = new PacingReader({ redis, clock, shards: SHARDS, reads: shared });
    // The reference: a reader of its own, through the client.
    const alone = new PacingReader({ redis, clock, shards: SHARDS, rawReads: false });
    const all = ids.map(([accountId, campaignId]) => ({ accountId, campaignId }));
    const claims = new Set(ids.map(([acc]) => shardOfAccount(acc, SHARDS))).size;
    const hgetalls = async () => {
      const line = (await redis.info('commandstats'))
        .split('\n')
        .find((l) => l.startsWith('cmdstat_hgetall:'));
      return Number(/calls=(\d+)/.exec(line ?? '')?.[1] ?? 0);
    };
    let before = await hgetalls();
    // Issued together (as at a tick boundary): 15 + 15 campaigns, 10 of them asked by both.
    await Promise.all([a.prefetch(all.slice(0, 15)), b.prefetch(all.slice(5))]);
    expect(await hgetalls()).toBe(before + 20 + claims);
    expect(shared.metrics).toEqual({ reads: 1, hashesRead: 20 });
    await alone.prefetch(all);
    for (const [, c] of ids.slice(0, 15)) expect(a.lookup(c)).toEqual(alone.lookup(c));
    for (const [, c] of ids.slice(5)) expect(b.lookup(c)).toEqual(alone.lookup(c));
    // Each reader keeps its own cache: b never looked up camp-sh0.
    expect(b.lookup('camp-sh0')).toBeUndefined();

    // Next tick: three campaigns rewritten (a throttle of the same text length, a longer one, a new
    // multiplier); the other 17 hashes are not rewritten.
    clock.set(T0 + TICK + 500);
    await publish(
      'acc-sh1',
      'camp-sh1',
      [params('account', 0.9, 1), params('campaign', 0.4, 0.7)],
      clock.now(),
    );
    await publish(
      'acc-sh7',
      'camp-sh7',
      [params('account', 0.9, 1), params('campaign', 0.35, 0.7)],
      clock.now(),
    );
    await publish(
      'acc-sh12',
      'camp-sh12',
      [params('account', 0.9, 1), params('campaign', 0.3, 0.5)],
      clock.now(),
    );
    clock.set(T0 + TICK + 2_000);
    before = await hgetalls();
    await Promise.all([a.refreshDue(), b.refreshDue()]);
    expect(await hgetalls()).toBe(before + 20 + claims);
    await alone.refreshDue();
    expect(shared.metrics).toEqual({ reads: 2, hashesRead: 40 });
    for (const [, c] of ids.slice(0, 15)) expect(a.lookup(c)).toEqual(alone.lookup(c));
    for (const [, c] of ids.slice(5)) expect(b.lookup(c)).toEqual(alone.lookup(c));
    expect(a.forBid('acc-sh1', 'camp-sh1').throttle).toBeCloseTo(0.9 * 0.4, 12);
    expect(b.forBid('acc-sh7', 'camp-sh7').throttle).toBeCloseTo(0.9 * 0.35, 12);
    expect(b.forBid('acc-sh12', 'camp-sh12').bidMultiplier).toBeCloseTo(0.5, 12);
    expect(a.forBid('acc-sh3', 'camp-sh3').throttle).toBeCloseTo(0.9 * 0.3, 12);
    for (const r of [a, b, alone]) r.close();
    shared.close();
  });

  it('keeps a campaign looked up once a minute cached (default idle window): no misses, its own throttle', async () => {
    const clock = new ManualClock(T0 + 1_000);
    await publish('acc-sparse', 'camp-sparse', [params('campaign', 0.05, 0.5)], clock.now());
    const reader = new PacingReader({ redis, clock, shards: SHARDS });
    await reader.prefetch([{ accountId: 'acc-sparse', campaignId: 'camp-sparse' }]);
    const misses = reader.metrics.misses;
    // 20 minutes: the pacer publishes every tick, the reader refreshes after each one, and the
    // campaign's bid requests come once every 90 s (a small campaign at night, one of two servers).
    for (let t = 1; t <= 120; t++) {
      clock.set(T0 + t * TICK + 500);
      await publish('acc-sparse', 'camp-sparse', [params('campaign', 0.05, 0.5)], clock.now());
      clock.set(T0 + t * TICK + 2_000);
      await reader.refreshDue();
      if (t % 9 === 0) {
        expect(reader.forBid('acc-sparse', 'camp-sparse')).toEqual({
          throttle: 0.05,
          bidMultiplier: 0.5,
          status: 'fresh',
        });
      }
    }
    expect(reader.metrics.misses).toBe(misses);
  });

  it('reads a campaign it does not hold before the guard leases (prepare), so the cap is the published curve', async () => {
    const clock = new ManualClock(T0 + 1_000);
    // A back-loaded curve: 10 % of the budget by 15:00, far below the linear fail-safe (62.5 %).
    const curve = { atMs: [DAY.startMs, T0 + 3_600_000, DAY.endMs], micros: [0, 10_000_000, 100_000_000] };
    await publish('acc-p', 'camp-p', [params('campaign', 0.1, 0.5, curve)], clock.now());
    const reader = new PacingReader({ redis, clock, shards: SHARDS });
    const plan = resolvePlan(
      {
        level: 'campaign',
        accountId: 'acc-p',
        campaignId: 'camp-p',
        dailyBudgetMicros: 100_000_000,
        pacingMode: 'even',
      },
      'UTC',
    );
    const target = publishedCurve(reader);
    const now = clock.now();
    // Not cached: without prepare the guard would lease from the linear fail-safe.
    expect(target.expectedMicros(plan, DAY, now)).toBe(linearExpected(100_000_000, DAY, now));
    await target.prepare?.(plan, DAY, now);
    expect(target.expectedMicros(plan, DAY, now)).toBe(evaluateCurve(curve, now));
    // Through a real guard on a cold reader: the first lease is bounded by the published E(t).
    const budgets = campaignBudgets(
      { accountId: 'acc-p', name: 'acc-p', timeZone: 'UTC', currency: 'USD' },
      { campaignId: 'camp-p', accountId: 'acc-p', name: 'camp-p', status: 'active' },
      [
        {
          level: 'campaign',
          accountId: 'acc-p',
          campaignId: 'camp-p',
          dailyBudgetMicros: 100_000_000,
          pacingMode: 'even',
        },
      ],
    );
    const reconciler = new Reconciler({
      redis,
      ledger: memoryLedger(),
      clock,
      campaignsOfAccount: async () => [],
    });
    const guard = new BudgetGuard({
      redis,
      clock,
      curve: publishedCurve(new PacingReader({ redis, clock, shards: SHARDS })),
      floatFraction: 0.2, // wants 20 M: more than the published E(now) allows, less than linear
      initPlanDay: (p, day) => reconciler.reconcile(p, day),
    });
    guard.setBudgets(budgets);
    await guard.warmUp('camp-p');
    expect(guard.localState(budgets.common[0] as ResolvedPlan, DAY.day)?.float).toBe(
      evaluateCurve(curve, now),
    );
    await guard.close();
  });

  it('serves the fail-safe (linear E(t), the day’s last throttle) when parameters are too old, counted', async () => {
    const clock = new ManualClock(T0 + 1_000);
    await publish(
      'acc-s',
      'camp-s',
      [params('campaign', 1, 1.2, { atMs: [DAY.startMs, DAY.endMs], micros: [100_000_000, 100_000_000] })],
      clock.now(),
    );
    const reader = new PacingReader({ redis, clock, shards: SHARDS, maxAgeMs: 30_000 });
    await reader.get('acc-s', 'camp-s');
    clock.advance(30_001); // the pacer stopped publishing
    const p = reader.lookup('camp-s');
    expect(p?.status).toBe('stale');
    expect(p?.plans.get('campaign')).toMatchObject({ throttle: FAIL_SAFE_THROTTLE, bidMultiplier: 1 });
    expect(reader.forBid('acc-s', 'camp-s')).toEqual({
      throttle: FAIL_SAFE_THROTTLE,
      bidMultiplier: 1,
      status: 'stale',
    });
    expect(reader.metrics.staleServes).toBeGreaterThanOrEqual(2);
    // The guard's curve falls back to linear for the stale plan, not the published asap curve.
    const plan = resolvePlan(
      {
        level: 'campaign',
        accountId: 'acc-s',
        campaignId: 'camp-s',
        dailyBudgetMicros: 100_000_000,
        pacingMode: 'even',
      },
      'UTC',
    );
    expect(publishedCurve(reader).expectedMicros(plan, DAY, clock.now())).toBe(
      linearExpected(100_000_000, DAY, clock.now()),
    );
  });

  it('gives the guard the published curve while fresh, capped at the plan’s own budget', async () => {
    const clock = new ManualClock(T0 + 1_000);
    // A front-loaded curve: 60 % of the budget by noon.
    const noon = DAY.startMs + 12 * 3_600_000;
    const curve = { atMs: [DAY.startMs, noon, DAY.endMs], micros: [0, 60_000_000, 100_000_000] };
    await publish('acc-c', 'camp-c', [params('campaign', 1, 1, curve)], clock.now());
    const reader = new PacingReader({ redis, clock, shards: SHARDS });
    await reader.get('acc-c', 'camp-c');
    const plan = resolvePlan(
      {
        level: 'campaign',
        accountId: 'acc-c',
        campaignId: 'camp-c',
        dailyBudgetMicros: 100_000_000,
        pacingMode: 'even',
      },
      'UTC',
    );
    const at = T0 + 1_000; // 15:00
    const expected = 60_000_000 + Math.floor((40_000_000 * (at - noon)) / (DAY.endMs - noon));
    expect(publishedCurve(reader).expectedMicros(plan, DAY, at)).toBe(expected);
    // The budget was cut below the curve since the publish: never above the plan's budget.
    const cut = { ...plan, dailyBudgetMicros: 50_000_000 };
    expect(publishedCurve(reader).expectedMicros(cut, DAY, at)).toBe(50_000_000);
  });

  it('takes freshness from the shard’s completed publish (v2); a hash no longer rewritten ages from its write + rp', async () => {
    const accountId = 'acc-v2';
    const shard = shardOfAccount(accountId, SHARDS);
    const publisher = new ShardPublisher({ redis, shard, publisherId: 'test/v2' });
    const fence = { g: 1, o: 1, e: epoch++ };
    const rp = 70_000;
    const t0 = T0 + 5_000_000;
    let tick = Math.max(Math.floor(t0 / TICK), (lastTick.get(shard) ?? 0) + 1);
    const fields = (p: PlanPacingParams) => [
      'plans',
      p.planId,
      `p:${p.planId}`,
      encodePlanParams(p, DAY),
      `e:${p.planId}`,
      encodeCurve(p.curve),
    ];
    const publishAt = async (nowMs: number, campaignId: string) => {
      expect((await publisher.claim(fence, tick, nowMs)).accepted).toBe(true);
      const out = await publisher.publish({
        fence,
        tick,
        nowMs,
        campaigns: [{ campaignId, mode: 'F', fields: fields(params('campaign', 0.4, 1)) }],
        republishMs: rp,
      });
      expect(out.rejectedBatches).toBe(0);
      lastTick.set(shard, tick);
      return tick++;
    };
    // camp-v2 is written once; afterwards the shard keeps publishing (another campaign only).
    await publishAt(t0, 'camp-v2');
    let last = 0;
    for (let k = 1; k <= 6; k++) last = await publishAt(t0 + k * TICK, 'camp-v2-other');
    const clock = new ManualClock(t0 + 6 * TICK + 1_000);
    const fresh = await new PacingReader({ redis, clock, shards: SHARDS, maxAgeMs: 30_000 }).get(
      accountId,
      'camp-v2',
    );
    // 61 s after its own write, but vouched for by the shard's publish 1 s ago.
    expect(fresh).toMatchObject({ status: 'fresh', tick: last, ageMs: 1_000 });
    expect(fresh.plans.get('campaign')?.throttle).toBe(0.4);
    // Under v1 the same hash would be 61 s old: stale. Still not rewritten 12 ticks later: it is
    // no longer paced, and ages from its write + rp (70 s) into the fail-safe.
    for (let k = 7; k <= 12; k++) await publishAt(t0 + k * TICK, 'camp-v2-other');
    clock.set(t0 + 12 * TICK + 1_000);
    const reader = new PacingReader({ redis, clock, shards: SHARDS, maxAgeMs: 30_000 });
    const stale = await reader.get(accountId, 'camp-v2');
    expect(stale).toMatchObject({ status: 'stale', ageMs: 12 * TICK + 1_000 - rp });
    expect(reader.metrics).toMatchObject({ remoteReads: 1, shardReads: 1, staleServes: 1 });
  });

  it('counts a malformed hash and serves it as missing; an unknown campaign gets the fail-safe throttle', async () => {
    const clock = new ManualClock(T0 + 1_000);
    await redis.hset(campaignParamsKey('acc-bad', 'camp-bad', SHARDS), {
      v: '1',
      t: 'x',
      at: '',
      f: 'nope',
      plans: 'campaign',
    });
    const reader = new PacingReader({ redis, clock, shards: SHARDS });
    const p = await reader.get('acc-bad', 'camp-bad');
    expect(p.status).toBe('missing');
    expect(reader.metrics.decodeErrors).toBe(1);
    expect(reader.forBid('acc-none', 'camp-none')).toEqual({
      throttle: FAIL_SAFE_THROTTLE,
      bidMultiplier: 1,
      status: 'missing',
    });
  });
});
