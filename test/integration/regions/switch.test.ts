/**
 * The cross-region publish switch with both regions' pacers running (two instances each, ticked
 * concurrently on a manual clock): region A's `publisher-region` flipped to B and back. Per
 * (cache, shard, tick) the audit stream of each cache shows at most one accepted claim, no tick
 * without a publisher for more than one tick, B's pacer publishing into A's cache (found through
 * the local ElastiCache API) while flipped, and A's published controller state tracking A's live
 * spend at every published tick throughout. A pacer of A that missed the flip (stale switch) is
 * refused by the fence.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BudgetRepository } from '../../../shared/budget/repository.js';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import type { PacingController } from '../../../shared/pacing/controller/api.js';
import { createPacingController } from '../../../shared/pacing/controller/index.js';
import { shardKeys } from '../../../shared/pacing/keys.js';
import { readAuditLog } from '../../../shared/pacing/publisher.js';
import type { RedisClient } from '../../../shared/redis/connect.js';
import { planDayKeys } from '../../../shared/spend/keys.js';
import { readPlanDay } from '../../../shared/spend/live-counters.js';
import { Reconciler } from '../../../shared/spend/reconcile.js';
import { SpendTracker } from '../../../shared/spend/tracker.js';
import { ManualClock } from '../../../shared/time/clock.js';
import { memoryLedger } from '../../../sim/engine-parts.js';
import { accountsInShard, seedShard } from '../pacing/support.js';
import {
  REGION_A,
  REGION_B,
  type RegionalInstance,
  regionalInstance,
  setPublisherRegion,
  startTwoRegions,
  type TwoRegions,
} from './support.js';

const TICK = 10_000;
const SHARD = 0;
const SHARDS = 4;
const T0 = Date.UTC(2026, 10, 21, 15, 0, 0);
const clock = new ManualClock(T0 - 60_000);
let two: TwoRegions;
let campaignId: string;
let accountId: string;
const controller = createPacingController() as PacingController<unknown, unknown>;

beforeAll(async () => {
  two = await startTwoRegions(clock, 1_000);
  const a = two.regions[REGION_A];
  const repo = new BudgetRepository({
    client: a?.dynamodb as NonNullable<typeof a>['dynamodb'],
    tableName: a?.tableName('budgets') as string,
    pacerShards: SHARDS,
  });
  [accountId] = accountsInShard(SHARD, SHARDS, 1, 'sw') as [string];
  [campaignId] = (await seedShard(repo, [accountId], 1, clock.now())) as [string];
  // Budgets are written in A only; B sees them through the global table.
  await two.link.flush();
  clock.set(T0);
}, 60_000);

afterAll(async () => {
  await two?.stop();
});

/** Wins booked in A's live counters (as A's track-spend would). */
function trackerOf(redis: RedisClient, repo: BudgetRepository): SpendTracker {
  const ledger = memoryLedger();
  return new SpendTracker({
    redis,
    ledger,
    clock,
    reconciler: new Reconciler({ redis, ledger, clock, campaignsOfAccount: async () => [campaignId] }),
    budgets: (id) => repo.getCampaignBudgets(id),
  });
}

/** Accepted claims per tick in a cache's shard audit stream. */
async function claimsByTick(redis: RedisClient): Promise<Map<number, string[]>> {
  const out = new Map<number, string[]>();
  for (const e of await readAuditLog(redis, SHARD)) {
    if (e.kind === 'claim' && e.accepted) out.set(e.tick, [...(out.get(e.tick) ?? []), e.publisher]);
  }
  return out;
}

describe('cross-region publish switch', () => {
  it('moves A’s publishing to B and back: one writer per (cache, shard, tick), no gap > 1 tick, A tracks spend', async () => {
    const a = two.regions[REGION_A] as NonNullable<(typeof two.regions)[string]>;
    const redisA = two.redis[REGION_A] as RedisClient;
    const redisB = two.redis[REGION_B] as RedisClient;
    const repoA = new BudgetRepository({ client: a.dynamodb, tableName: a.tableName('budgets') });
    const tracker = trackerOf(redisA, repoA);
    const make = (region: string, instance: number) =>
      regionalInstance({ two, region, shard: SHARD, instance, clock, controller, tickMs: TICK });
    const instances: RegionalInstance[] = [
      make(REGION_A, 0),
      make(REGION_A, 1),
      make(REGION_B, 0),
      make(REGION_B, 1),
    ];
    expect(await repoA.getCampaignBudgets(campaignId)).toBeDefined();
    const day = dayWindow(T0, 'America/New_York').day;
    const spendKey = planDayKeys({ scope: `c:${campaignId}`, planId: 'campaign' }, day).state;
    const stateField = `c:${campaignId}:campaign`;

    const first = Math.floor(T0 / TICK);
    const FLIP = first + 6;
    const BACK = first + 14;
    const LAST = first + 22;
    let bid = 0;
    const tracked: { tick: number; committed: number; stateCommitted: number | undefined }[] = [];
    for (let t = first; t <= LAST; t++) {
      clock.set(t * TICK + 1_000);
      if (t === FLIP) await setPublisherRegion(two, REGION_A, REGION_B);
      if (t === BACK) await setPublisherRegion(two, REGION_A, REGION_A);
      // A's ad servers keep winning impressions throughout.
      for (let k = 0; k < 3; k++) {
        await tracker.apply({
          v: 1,
          type: 'win',
          bidId: `b${bid++}`,
          campaignId,
          bidAt: clock.now() - 500,
          at: clock.now(),
          bidPriceMicros: 2_000,
          clearingPriceMicros: 1_500,
        });
      }
      if (t === FLIP + 2) {
        // An A pacer that missed the flip (paused, or its SSM reads failing: it keeps the last
        // values) claims first with the old generation — and a higher lease epoch than B's would
        // not help it: g is compared first.
        const stale = instances[0] as RegionalInstance;
        const snapshot = {
          publisherRegion: REGION_A,
          generation: 1,
          override: 'auto',
          overrideVersion: 1,
          readAtMs: clock.now(),
          fresh: false,
        };
        const out = await stale.wiring.pacer.runTick(t, {
          instanceId: 's0-i0',
          publisherId: `${REGION_A}/s0-i0/stale`,
          lease: {
            tick: async () => ({ held: true, epoch: 99, record: undefined, event: 'renewed' }),
            heldAt: () => true,
            epoch: 99,
          },
          control: { read: async () => ({ snapshot }) },
        });
        expect(out.own.fence).toEqual({ g: 1, o: 1, e: 99 });
        expect(out.own.claim).toEqual({ accepted: false, reason: 'fence' });
        expect(out.own.published).toBe(false);
      }
      await Promise.all(instances.map((x) => x.tick(t)));
      await two.link.deliverDue();
      const live = await readPlanDay(redisA, spendKey, clock.now());
      const raw = await redisA.hget(shardKeys(SHARD).state, stateField);
      const state =
        raw === null ? undefined : (controller.decodeState(raw) as { lastCommitted?: number } | undefined);
      tracked.push({
        tick: t,
        committed: live.confirmedMicros + live.inFlightMicros,
        stateCommitted: state?.lastCommitted,
      });
    }

    const claimsA = await claimsByTick(redisA);
    const claimsB = await claimsByTick(redisB);
    for (const [cache, claims] of [
      ['A', claimsA],
      ['B', claimsB],
    ] as const) {
      let gap = 0;
      for (let t = first; t <= LAST; t++) {
        const writers = claims.get(t) ?? [];
        expect(writers.length, `${cache} tick ${t - first}: ${writers.join(' ')}`).toBeLessThanOrEqual(1);
        gap = writers.length === 0 ? gap + 1 : 0;
        expect(gap, `${cache}: ticks without a publisher up to ${t - first}`).toBeLessThanOrEqual(1);
      }
    }
    // While flipped, A's cache is written by B's pacer; before and after, by A's.
    const byRegion = (t: number) => claimsA.get(t)?.[0]?.split('/')[0];
    expect(byRegion(FLIP - 1)).toBe(REGION_A);
    for (let t = FLIP + 1; t < BACK; t++) expect(byRegion(t), `tick ${t - first}`).toBe(REGION_B);
    for (let t = BACK + 1; t <= LAST; t++) expect(byRegion(t), `tick ${t - first}`).toBe(REGION_A);
    // B's own cache never stopped.
    for (let t = first; t <= LAST; t++) expect(claimsB.get(t)?.[0]?.split('/')[0]).toBe(REGION_B);
    // A's published state followed A's spend at every tick that had a publisher.
    for (const row of tracked) {
      if (claimsA.has(row.tick)) expect(row.stateCommitted, `tick ${row.tick - first}`).toBe(row.committed);
    }
    expect((tracked.at(-1) as { committed: number }).committed).toBe(bid * 1_500);
    for (const x of instances) x.close();
  }, 120_000);
});
