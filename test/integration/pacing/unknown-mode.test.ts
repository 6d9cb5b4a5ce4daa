/**
 * A pacing mode this version does not know (docs/pacing.md, "Adding a pacing mode"), against a
 * real redis-server: a leader that knows mode `rush` paces a plan with it and stores its
 * state (`1r,…`); a leader of a version without it takes over (the plan still in that mode, or
 * switched back to `even` meanwhile) and
 *
 * - publishes the shard (the other plans continue normally) with the fail-safe for that plan —
 *   the linear day curve, throttle 1, multiplier 1 — counted in `invalidParams`, the first
 *   reason (plan, state code, what to do) in `invalidReason`;
 * - never continues the stored state as another mode and never overwrites it, so a leader that
 *   knows the mode continues the plan-day on the curve the first leader anchored.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { BudgetItem } from '../../../shared/budget/repository.js';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import { ShardBudgets } from '../../../shared/pacing/budgets-cache.js';
import { encodeCurve } from '../../../shared/pacing/codec.js';
import type { PacingController } from '../../../shared/pacing/controller/api.js';
import { linearDayCurve } from '../../../shared/pacing/controller/curve.js';
import { createPacingController } from '../../../shared/pacing/controller/index.js';
import { shardKeys } from '../../../shared/pacing/keys.js';
import { registerPacingMode } from '../../../shared/pacing/modes.js';
import { ShardPacer } from '../../../shared/pacing/pacer.js';
import { pacerShardKey } from '../../../shared/pacing/shard.js';
import { rawSpendSource } from '../../../shared/pacing/spend-source.js';
import { ManualClock } from '../../../shared/time/clock.js';
import { useRedis } from '../../support/redis.js';
import { RUSH } from '../../support/rush-mode.js';
import { accountItems, campaignItem, planItem, testIdentity } from './support.js';

const TICK = 10_000;
const T0 = Date.UTC(2026, 10, 21, 15, 0, 0);

/**
 * One account (UTC) with an `even` account plan; campaign `um-c` paced `mode` (its plan item at
 * `version`: each leader below sees a newer edit than the budgets snapshot its predecessor left),
 * `um-e` `even`.
 */
function items(shard: number, mode: string, version: number): BudgetItem[] {
  const stamp = { version: 1, updatedAt: T0 - 3_600_000, pacerShard: pacerShardKey(shard, 2) };
  const accountId = 'um-a';
  const plan = (campaignId: string, pacingMode: string, version = 1) =>
    planItem(
      { ...stamp, version, updatedAt: stamp.updatedAt + version },
      { level: 'campaign', accountId, campaignId, dailyBudgetMicros: 100_000_000, pacingMode },
    );
  return [
    ...accountItems(stamp, accountId, 1_000_000_000),
    campaignItem(stamp, accountId, 'um-c'),
    plan('um-c', mode, version),
    campaignItem(stamp, accountId, 'um-e'),
    plan('um-e', 'even'),
  ];
}

describe('a pacing mode this version does not know', () => {
  const r = useRedis('standalone');
  let removals: (() => void)[] = [];
  afterEach(() => {
    for (const remove of removals) remove();
    removals = [];
  });

  // The version without the mode sees the plan in that mode too, or switched back to `even` by the
  // operator (its stored state is still of the unknown mode): either way the stored state is not
  // continued as another mode.
  it.each([
    [0, 'rush'],
    [1, 'even'],
  ])(
    'shard %i, the plan in %s for the version without the mode: the fail-safe, counted and explained, its state kept for a leader that knows it',
    async (shard, bMode) => {
      const clock = new ManualClock(T0);
      const pacer = (mode: string, version: number) =>
        new ShardPacer({
          shard,
          region: 'test',
          redis: r.redis,
          controller: createPacingController() as PacingController<unknown, unknown>,
          budgets: new ShardBudgets({
            source: async (since) => ({
              items: items(shard, mode, version).filter((x) => x.updatedAt >= since),
            }),
            clock,
          }),
          spend: rawSpendSource(r.redis, { timeoutMs: 5_000 }),
          clock,
          tickMs: TICK,
          redisSilenceMs: 5_000,
        });
      const keys = shardKeys(shard);
      const stateField = 'c:um-c:campaign';
      const day = dayWindow(T0, 'UTC');
      let tick = Math.floor(T0 / TICK);

      // A version that knows the mode leads for three ticks.
      removals.push(registerPacingMode(RUSH));
      const a = pacer('rush', 1);
      for (let i = 0; i < 3; i++) {
        const o = await a.runTick(tick++, testIdentity(shard, 0, 1));
        expect(o.published).toBe(true);
        expect(o.invalidParams).toBe(0);
        clock.advance(TICK);
      }
      const stored = (await r.redis.hget(keys.state, stateField)) as string;
      expect(stored.startsWith('1r,')).toBe(true);
      const anchored = (await r.redis.hget(keys.campaign('um-c'), 'e:campaign')) as string;
      expect(anchored.split(';')).toHaveLength(3); // the mode's own curve (three knots)

      // A version without it takes over, for two ticks.
      for (const remove of removals) remove();
      removals = [];
      const b = pacer(bMode, 2);
      for (let i = 0; i < 2; i++) {
        const evenBefore = await r.redis.hget(keys.state, 'c:um-e:campaign');
        const o = await b.runTick(tick++, testIdentity(shard, 1, 2));
        expect(o.published).toBe(true);
        expect(o.stateReloaded).toBe(i === 0);
        expect(o.plansPaced).toBe(3);
        expect(o.invalidParams).toBe(1);
        expect(o.invalidReason).toMatch(
          /^plan c:um-c\/campaign: stored controller state "1r,.*" has pacing mode code "r", which this version does not know \(known: e even, a asap, h ahead, s asap-hourly, f front-loaded, c curve\): .*deploy it to every pacer/,
        );
        const hash = await r.redis.hgetall(keys.campaign('um-c'));
        expect(hash['p:campaign']).toBe(`1,1,100000000,${bMode},${day.day},${day.startMs},${day.endMs}`);
        expect(hash['e:campaign']).toBe(encodeCurve(linearDayCurve(day, 100_000_000)));
        // Not continued as another mode, not overwritten; the other plans step on.
        expect(await r.redis.hget(keys.state, stateField)).toBe(stored);
        expect((await r.redis.hget(keys.state, 'c:um-e:campaign'))?.startsWith('1e,')).toBe(true);
        expect(await r.redis.hget(keys.state, 'c:um-e:campaign')).not.toBe(evenBefore);
        clock.advance(TICK);
      }

      // A version that knows the mode again: it continues the stored state on the same curve.
      removals.push(registerPacingMode(RUSH));
      const c = pacer('rush', 3);
      const o = await c.runTick(tick++, testIdentity(shard, 2, 3));
      expect(o.published).toBe(true);
      expect(o.invalidParams).toBe(0);
      expect(o.invalidReason).toBeUndefined();
      expect(await r.redis.hget(keys.campaign('um-c'), 'e:campaign')).toBe(anchored);
      expect((await r.redis.hget(keys.state, stateField))?.startsWith('1r,')).toBe(true);
    },
    60_000,
  );
});
