/**
 * A new leader's first tick (docs/pacing.md, "Takeover") against real redis-server, standalone
 * and a 3-node cluster: a follower that computed every tick on its own takes the lease and
 * continues the state its predecessor stored (read in parts beside the spend read), and:
 *
 * - Redis asleep for 2 s (`DEBUG SLEEP 2`) when the takeover tick starts, or falling asleep while
 *   the tick's reads are in flight: the tick still publishes (the raw reads wait for a silent node
 *   up to the pacer's `redisSilenceMs`, 5 s for 10 s ticks), and so does the next one; with a
 *   1 s limit the takeover tick fails and the next tick publishes;
 * - every campaign hash ends as a whole rewrite leaves it (the takeover reads what each holds and
 *   writes the header and the fields that differ);
 * - plans the tick does not step (a paused campaign) keep the state stored for them, not the
 *   follower's own older one;
 * - state and forecast fields of plans that no longer exist are deleted (found by a sweep that
 *   runs only when a hash holds more fields than the reads found);
 * - the budgets snapshot gets only the changes the predecessor may not have mirrored (a follower
 *   holds every change since it started), not the whole shard again;
 * - `close` drops the raw connection the reload opened, not the client (a simulated process
 *   replaced every tick must not pile connections up).
 */
import { Cluster, Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { BudgetItem } from '../../../shared/budget/repository.js';
import { ShardBudgets } from '../../../shared/pacing/budgets-cache.js';
import type { PacingController } from '../../../shared/pacing/controller/api.js';
import { createLinearController } from '../../../shared/pacing/controller/linear.js';
import { shardKeys } from '../../../shared/pacing/keys.js';
import { ShardPacer } from '../../../shared/pacing/pacer.js';
import { pacerShardKey, shardOfAccount } from '../../../shared/pacing/shard.js';
import { rawSpendSource } from '../../../shared/pacing/spend-source.js';
import type { RedisClient } from '../../../shared/redis/connect.js';
import { RawReadTimeoutError } from '../../../shared/redis/resp/errors.js';
import { ManualClock } from '../../../shared/time/clock.js';
import { useRedis } from '../../support/redis.js';
import { accountItems, campaignItem, planItem, testIdentity } from './support.js';

const TICK = 10_000;
const SHARDS = 8;
const T0 = Date.UTC(2026, 10, 21, 15, 0, 0);

/** A controller whose state counts its steps and shows the count in the throttle. */
function countingController(onStep?: () => void): PacingController<unknown, unknown> {
  const linear = createLinearController();
  return {
    name: 'counting',
    step(input, previous) {
      onStep?.();
      const n = ((previous as { n: number } | undefined)?.n ?? 0) + 1;
      const base = linear.step(input, undefined, undefined);
      return { params: { ...base.params, throttle: n / 10_000 }, state: { n }, forecast: { n } };
    },
    encodeState: (s) => String((s as { n: number }).n),
    decodeState: (raw) => ({ n: Number(raw) }),
    // The forecast holds the count of the step that made it (a stand-in for a learned forecast).
    encodeForecast: (f) => `f${(f as { n: number }).n}`,
    decodeForecast: (raw) => ({ n: Number(raw.slice(1)) }),
  };
}

/** Budget items of `campaigns` campaigns in `shard` (10 per account, 1 in 5 with two arms). */
function shardItems(shard: number, campaigns: number, prefix: string): BudgetItem[] {
  const pacerShard = pacerShardKey(shard, SHARDS);
  const accounts: string[] = [];
  for (let i = 0; accounts.length < Math.ceil(campaigns / 10); i++) {
    if (shardOfAccount(`${prefix}-a${i}`, SHARDS) === shard) accounts.push(`${prefix}-a${i}`);
  }
  const stamp = { version: 1, updatedAt: T0 - 3_600_000, pacerShard };
  const items = accounts.flatMap((accountId) => accountItems(stamp, accountId, 1_000_000_000));
  for (let c = 0; c < campaigns; c++) {
    const accountId = accounts[Math.floor(c / 10)] as string;
    const campaignId = `${prefix}-c${c}`;
    items.push(
      campaignItem(stamp, accountId, campaignId),
      planItem(stamp, {
        level: 'campaign',
        accountId,
        campaignId,
        dailyBudgetMicros: 100_000_000,
        pacingMode: 'even',
      }),
    );
    if (c % 5 === 0) {
      for (const armId of ['A', 'B']) {
        items.push(
          planItem(stamp, {
            level: 'arm',
            accountId,
            campaignId,
            armId,
            dailyBudgetMicros: 40_000_000,
            pacingMode: 'even',
          }),
        );
      }
    }
  }
  return items;
}

/** Every master of the deployment (a cluster's three, or the one server). */
function masters(client: RedisClient): Redis[] {
  if (client instanceof Cluster)
    return client.nodes('master').map((n) => new Redis({ host: n.options.host, port: n.options.port }));
  return [new Redis({ host: client.options.host, port: client.options.port })];
}

/** Every master sleeps `seconds` (DEBUG SLEEP); resolves when they are awake again. */
async function sleepAll(client: RedisClient, seconds: number): Promise<void> {
  const nodes = masters(client);
  try {
    await Promise.all(nodes.map((n) => n.call('DEBUG', 'SLEEP', String(seconds))));
  } finally {
    for (const n of nodes) n.disconnect();
  }
}

const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each(['standalone', 'cluster'] as const)('takeover (%s)', (mode) => {
  const r = useRedis(mode, { debugCommand: true });

  /**
   * A shard of `campaigns` campaigns: leader `a` publishes `leads` ticks alone, follower `b`
   * computes the last of them too; returns both, the clock and the next tick.
   */
  const shard = async (
    n: number,
    campaigns: number,
    o: {
      redisSilenceMs: number;
      leads?: number;
      onStep?: () => void;
      afterClaim?: () => Promise<void>;
      /** Both instances' controller. @default countingController */
      controller?: () => PacingController<unknown, unknown>;
    },
  ) => {
    const items = shardItems(n, campaigns, `${mode}${n}`);
    const source = async (since: number) => ({ items: items.filter((i) => i.updatedAt >= since) });
    const clock = new ManualClock(T0);
    const pacer = (controller: PacingController<unknown, unknown>, afterClaim?: () => Promise<void>) => {
      const budgets = new ShardBudgets({ source, clock });
      const made = new ShardPacer({
        shard: n,
        region: 'test',
        redis: r.redis,
        controller,
        budgets,
        spend: rawSpendSource(r.redis, { timeoutMs: o.redisSilenceMs }),
        clock,
        tickMs: TICK,
        redisSilenceMs: o.redisSilenceMs,
        ...(afterClaim ? { afterClaim } : {}),
      });
      return { pacer: made, budgets };
    };
    const a = pacer(o.controller?.() ?? countingController()).pacer;
    // The follower started before any snapshot existed: its budgets come from the index, each
    // item a change it has never mirrored (as in a process that has run for hours).
    const follower = pacer(o.controller?.() ?? countingController(o.onStep), o.afterClaim);
    await follower.budgets.refresh();
    const b = follower.pacer;
    let tick = Math.floor(T0 / TICK);
    const leads = o.leads ?? 3;
    for (let i = 0; i < leads; i++) {
      expect((await a.runTick(tick, testIdentity(n, 0, 1))).published).toBe(true);
      if (i === leads - 1) await b.runTick(tick, testIdentity(n, 1, undefined));
      tick++;
      clock.advance(TICK);
    }
    return { a, b, clock, items, next: () => tick++ };
  };

  /** Every stored state and forecast of the shard (the counts their plans reached). */
  const stored = async (n: number) => ({
    state: await r.redis.hgetall(shardKeys(n).state),
    forecast: await r.redis.hgetall(shardKeys(n).forecast),
  });

  it('publishes the takeover tick while Redis sleeps 2 s as it starts, and the next tick', async () => {
    const n = 0;
    const { b, clock, next } = await shard(n, 3_000, { redisSilenceMs: 5_000 });
    const sleeping = sleepAll(r.redis, 2);
    await wait(50);
    const t0 = performance.now();
    const o = await b.runTick(next(), testIdentity(n, 1, 2));
    const took = performance.now() - t0;
    await sleeping;
    expect(o.published).toBe(true);
    expect(o.stateReloaded).toBe(true);
    expect(o.plansPaced).toBe(3_000 + 1_200 + 300);
    expect(took).toBeGreaterThan(1_800);
    // Continued from the leader's 3 steps (its own count is 1): every plan is at 4.
    const s = await stored(n);
    expect(new Set(Object.values(s.state))).toEqual(new Set(['4']));
    expect(new Set(Object.values(s.forecast))).toEqual(new Set(['f4']));
    clock.advance(TICK);
    const after = await b.runTick(next(), testIdentity(n, 1, 2));
    expect(after.published).toBe(true);
    expect(after.stateReloaded).toBe(false);
    expect(new Set(Object.values((await stored(n)).state))).toEqual(new Set(['5']));
  }, 120_000);

  it("compares the follower's forecasts with the stored ones without encoding them in the takeover tick", async () => {
    const n = 7;
    let encodes = 0;
    // Forecasts change a few times a day: this one keeps the step's first forecast object.
    const stable = (): PacingController<unknown, unknown> => {
      const c = countingController();
      return {
        ...c,
        step: (input, previous, forecast) => {
          const s = c.step(input, previous, forecast);
          return { ...s, forecast: forecast ?? s.forecast };
        },
        encodeForecast: (f) => {
          encodes++;
          return c.encodeForecast(f);
        },
      };
    };
    const { b, next } = await shard(n, 300, { redisSilenceMs: 5_000, controller: stable });
    // The follower's own forecasts (count 1, from its one step) are the leader's first ones.
    encodes = 0;
    const o = await b.runTick(next(), testIdentity(n, 1, 2));
    expect(o.published).toBe(true);
    expect(o.stateReloaded).toBe(true);
    expect(encodes).toBe(0);
    const s = await stored(n);
    expect(Object.keys(s.forecast)).toHaveLength(300 + 120 + 30);
    expect(new Set(Object.values(s.forecast))).toEqual(new Set(['f1']));
    expect(new Set(Object.values(s.state))).toEqual(new Set(['4']));
  }, 120_000);

  it('publishes the takeover tick when Redis falls asleep as its reload reads go out', async () => {
    const n = 1;
    let sleeping: Promise<void> | undefined;
    let readsOut = 0;
    let firstStep = 0;
    const { b, next } = await shard(n, 3_000, {
      redisSilenceMs: 5_000,
      // The claim is in; the reads of the stored state are written to a sleeping node.
      afterClaim: async () => {
        sleeping = sleepAll(r.redis, 2);
        await wait(50);
        readsOut = performance.now();
      },
      onStep: () => {
        if (readsOut > 0 && firstStep === 0) firstStep = performance.now();
      },
    });
    const o = await b.runTick(next(), testIdentity(n, 1, 2));
    await sleeping;
    expect(o.published).toBe(true);
    expect(o.stateReloaded).toBe(true);
    // The first plan stepped once its stored state was in: after the node woke.
    expect(firstStep - readsOut).toBeGreaterThan(1_500);
    expect(new Set(Object.values((await stored(n)).state))).toEqual(new Set(['4']));
  }, 120_000);

  it('with a 1 s silence limit the takeover tick fails on the sleep, and the next tick publishes', async () => {
    const n = 2;
    const { b, clock, next } = await shard(n, 1_000, { redisSilenceMs: 1_000 });
    const sleeping = sleepAll(r.redis, 2);
    await wait(50);
    const error = await b.runTick(next(), testIdentity(n, 1, 2)).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    await sleeping;
    expect(error).toBeInstanceOf(RawReadTimeoutError);
    expect(error?.message).toMatch(/sent nothing for 1000 ms/);
    clock.advance(TICK);
    const o = await b.runTick(next(), testIdentity(n, 1, 2));
    expect(o.published).toBe(true);
    expect(o.stateReloaded).toBe(true);
    // The failed tick stepped nothing it kept: the leader's 3 steps, then this one.
    expect(new Set(Object.values((await stored(n)).state))).toEqual(new Set(['4']));
  }, 120_000);

  it('leaves every campaign hash as a whole rewrite would, fixing fields that differ', async () => {
    const n = 5;
    const { b, next } = await shard(n, 200, { redisSilenceMs: 5_000 });
    const key = (c: number) => shardKeys(n).campaign(`${mode}${n}-c${c}`);
    // Every campaign plan has the same budget, zone and controller: the same curve.
    const curve = (await r.redis.hget(key(1), 'e:campaign')) as string;
    expect(curve.length).toBeGreaterThan(10);
    // Fields that do not hold what a whole rewrite writes: a wrong curve, a missing plans list,
    // a missing arm's parameters.
    await r.redis.hset(key(1), 'e:campaign', 'wrong');
    await r.redis.hdel(key(2), 'plans');
    await r.redis.hdel(key(5), 'p:arm:A');
    const o = await b.runTick(next(), testIdentity(n, 1, 2));
    expect(o.published).toBe(true);
    expect(o.publish?.campaignsWritten).toBe(200);
    for (let c = 0; c < 200; c++) {
      const h = await r.redis.hgetall(key(c));
      expect(h).toMatchObject({ v: '2', f: '1.1.2', by: `s${n}-i1/test`, 'e:campaign': curve });
      expect(h.plans).toBe(c % 5 === 0 ? 'account,campaign,arm:A,arm:B' : 'account,campaign');
      const plans = (h.plans as string).split(',');
      for (const p of plans) expect(Number(h[`p:${p}`]?.split(',')[0])).toBe(4 / 10_000);
    }
  }, 120_000);

  it('mirrors into the budgets snapshot only the changes its predecessor may not have', async () => {
    const n = 4;
    const { b, clock, items, next } = await shard(n, 50, { redisSilenceMs: 5_000 });
    const bud = shardKeys(n).budgets;
    // An old item the predecessor mirrored long ago (marked: a rewrite would replace the mark).
    const old = `CAMPAIGN#${mode}${n}-c5|CAMPAIGN`;
    expect(await r.redis.hexists(bud, old)).toBe(1);
    await r.redis.hset(bud, old, '{"mark":1}');
    // A campaign created since the predecessor's last publish: the follower's cache has it.
    const c = items.find((i) => i.type === 'campaign') as BudgetItem;
    const created = `${mode}${n}-new`;
    items.push(
      { ...c, pk: `CAMPAIGN#${created}`, campaignId: created, updatedAt: clock.now() },
      {
        ...(items.find((i) => i.type === 'plan' && i.level === 'campaign') as BudgetItem),
        pk: `CAMPAIGN#${created}`,
        campaignId: created,
        updatedAt: clock.now(),
      },
    );
    const o = await b.runTick(next(), testIdentity(n, 1, 2));
    expect(o.published).toBe(true);
    expect(o.stateReloaded).toBe(true);
    expect(await r.redis.hget(bud, old)).toBe('{"mark":1}');
    expect(JSON.parse((await r.redis.hget(bud, `CAMPAIGN#${created}|CAMPAIGN`)) as string)).toMatchObject({
      campaignId: created,
    });
    expect(await r.redis.hexists(bud, `CAMPAIGN#${created}|PLAN#campaign`)).toBe(1);
  }, 120_000);

  it("keeps the stored state of plans it does not step, and deletes deleted plans' fields", async () => {
    const n = 3;
    const { a, b, clock, items, next } = await shard(n, 50, { redisSilenceMs: 5_000 });
    // Campaign c1 is paused: the leader stops stepping it (its stored count stays 3) while the
    // follower's own count of it is 1.
    const at = items.findIndex((i) => i.type === 'campaign' && i.campaignId === `${mode}${n}-c1`);
    items[at] = { ...(items[at] as BudgetItem), status: 'paused', version: 2, updatedAt: clock.now() };
    const field = `c:${mode}${n}-c1:campaign`;
    const before = await stored(n);
    expect(before.state[field]).toBe('3');
    for (let i = 0; i < 2; i++) {
      const tick = next();
      expect((await a.runTick(tick, testIdentity(n, 0, 1))).published).toBe(true);
      await b.runTick(tick, testIdentity(n, 1, undefined));
      clock.advance(TICK);
    }
    // Leftovers of a deleted plan.
    await r.redis.hset(shardKeys(n).state, 'gone:plan-x', '9');
    await r.redis.hset(shardKeys(n).forecast, 'gone:plan-x', 'f9');
    const o = await b.runTick(next(), testIdentity(n, 1, 2));
    expect(o.published).toBe(true);
    expect(o.stateReloaded).toBe(true);
    const s = await stored(n);
    expect(s.state[field]).toBe('3');
    expect(s.forecast[field]).toBe('f3');
    // The sweep finds them (off the tick's path); the next publish at the latest deletes them.
    await b.settled();
    clock.advance(TICK);
    expect((await b.runTick(next(), testIdentity(n, 1, 2))).published).toBe(true);
    const after = await stored(n);
    expect(after.state['gone:plan-x']).toBeUndefined();
    expect(after.forecast['gone:plan-x']).toBeUndefined();
    expect(after.state[field]).toBe('3');
    expect(Object.keys(after.state)).toHaveLength(Object.keys(before.state).length);
  }, 120_000);

  it('close drops the connection its takeover reload opened; the client it was given stays open', async () => {
    const n = 6;
    const { b, next } = await shard(n, 20, { redisSilenceMs: 5_000 });
    expect((await b.runTick(next(), testIdentity(n, 1, 2))).stateReloaded).toBe(true);
    await b.settled();
    const nodes = masters(r.redis);
    const clients = async () => {
      let count = 0;
      for (const x of nodes)
        count += String(await x.client('LIST'))
          .trim()
          .split('\n').length;
      return count;
    };
    try {
      const before = await clients();
      b.close();
      // The server lets a closed socket go at its next turn.
      let after = before;
      for (let i = 0; i < 100 && after >= before; i++) {
        await wait(20);
        after = await clients();
      }
      expect(after).toBeLessThan(before);
      expect(await r.redis.ping()).toBe('PONG');
    } finally {
      for (const x of nodes) x.disconnect();
    }
  });
});
