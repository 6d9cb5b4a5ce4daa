/**
 * The spend ledger as a global table between two local regions (dynalite behind the global-tables
 * stand-in, a real redis-server per region), with each region's spend objects built exactly as
 * the track-spend and sweep-spend functions build them (`spendRuntimeFromEnv` on the region's
 * function environment):
 *
 * - Redis of region A killed while B spends (B's wins replicate into A's replica; A's notices during
 *   the outage leave intents): B's sweeper leaves A's intents alone, and once A's Redis is back
 *   A's rebuilt counters equal A's wins only — campaign and account plans, notice-dedup hash
 *   included; the region shares of both regions' pacers see both regions' spend, each once;
 * - a region's first initialisation of a plan-day is not taken for a reset because the other
 *   region started it first (no rejoin grace);
 * - one bid across regions: a notice reaching the second region after replication is not counted
 *   again; within the lag both regions count it live and the replicas keep one item, which the
 *   rebuilds count once in total;
 * - version 1 items (no region): counted by every region's rebuild, a version 1 plan-day marker
 *   makes the first initialisation a reset, a version 1 intent is settled and closed.
 * Manual clock: independent of machine speed.
 */
import { PutItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main as budgetsCli } from '../../../cli/budgets.js';
import type { LocalRegion } from '../../../local/region.js';
import { BudgetRepository } from '../../../shared/budget/repository.js';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import type { PacingController } from '../../../shared/pacing/controller/api.js';
import { createPacingController } from '../../../shared/pacing/controller/index.js';
import type { RedisClient } from '../../../shared/redis/connect.js';
import type { WinEvent } from '../../../shared/spend/events.js';
import { planDayKeys } from '../../../shared/spend/keys.js';
import { readPlanDay } from '../../../shared/spend/live-counters.js';
import { type SpendRuntime, spendRuntimeFromEnv } from '../../../shared/spend/runtime.js';
import { OutboxSweeper } from '../../../shared/spend/sweeper.js';
import { ManualClock } from '../../../shared/time/clock.js';
import { accountsInShard } from '../pacing/support.js';
import { seedBudgets } from '../spend/support.js';
import { REGION_A, REGION_B, regionalInstance, startTwoRegions, type TwoRegions } from './support.js';

const LAG = 1_000;
const TICK = 10_000;
const SHARD = 1;
const TZ = 'America/New_York';
/** Noon in New York. */
const T0 = Date.UTC(2026, 10, 21, 17, 0, 0);
const BUDGET = 50_000_000;
const clock = new ManualClock(T0 - 60_000);
const controller = createPacingController() as PacingController<unknown, unknown>;
const campaignId = 'ldg-c';
const legacyCampaign = 'ldg-v1';
let accountId: string;
let shards: number;
let two: TwoRegions;
const spend: Record<string, SpendRuntime> = {};

const regionOf = (name: string) => two.regions[name] as LocalRegion;

beforeAll(async () => {
  two = await startTwoRegions(clock, LAG);
  for (const r of Object.values(two.redis)) r.on('error', () => {});
  const a = regionOf(REGION_A);
  shards = a.description.settings.pacer.shards;
  [accountId] = accountsInShard(SHARD, shards, 1, 'ldg') as [string];
  const repo = new BudgetRepository({
    client: a.dynamodb,
    tableName: a.tableName('budgets'),
    pacerShards: shards,
  });
  await seedBudgets(repo, {
    accountId,
    timeZone: TZ,
    accountBudgetMicros: 4 * BUDGET,
    campaigns: [
      { campaignId, budgetMicros: BUDGET },
      { campaignId: legacyCampaign, budgetMicros: BUDGET },
    ],
  });
  // Budgets are written in A only; B pages them from its replica.
  await two.link.flush();
  for (const name of [REGION_A, REGION_B]) {
    const r = regionOf(name);
    // What the track-spend and sweep-spend functions of the region build from their environment.
    spend[name] = spendRuntimeFromEnv({
      dynamodb: r.dynamodb,
      clock,
      onRedisError: () => {},
      env: r.functionEnv('trackSpend'),
    });
  }
  clock.set(T0);
}, 60_000);

afterAll(async () => {
  for (const s of Object.values(spend)) s.redis.disconnect();
  await two?.stop();
});

const day = dayWindow(T0, TZ).day;
const campaignKeys = planDayKeys({ scope: `c:${campaignId}`, planId: 'campaign' }, day);
const accountKeys = () => planDayKeys({ scope: `a:${accountId}`, planId: 'account' }, day);
let bidNo = 0;

/** A win notice of `campaign`, bid a second ago. */
function win(bidId: string, clearingPriceMicros: number, campaign = campaignId): WinEvent {
  return {
    v: 1,
    type: 'win',
    bidId,
    campaignId: campaign,
    bidAt: clock.now() - 1_000,
    bidPriceMicros: clearingPriceMicros + 500,
    at: clock.now(),
    clearingPriceMicros,
  };
}

/** Books `n` wins in `region` (its track-spend); returns their bid ids and total. */
async function book(region: string, n: number): Promise<{ bids: string[]; micros: number }> {
  const bids: string[] = [];
  let micros = 0;
  for (let i = 0; i < n; i++) {
    const bidId = `${region}-b${bidNo++}`;
    const price = 1_000 + ((bidNo * 37) % 900);
    const outcome = await (spend[region] as SpendRuntime).tracker.apply(win(bidId, price));
    expect(outcome.addedMicros).toBe(price);
    bids.push(bidId);
    micros += price;
  }
  return { bids, micros };
}

/** Lets every write made so far reach the other region. */
async function replicate(): Promise<void> {
  clock.advance(LAG);
  await two.link.deliverDue();
}

const confirmed = async (region: string, key = campaignKeys.state) =>
  (await readPlanDay(two.redis[region] as RedisClient, key, clock.now())).confirmedMicros;

const sweep = (region: string) =>
  new OutboxSweeper({
    outbox: (spend[region] as SpendRuntime).outbox,
    tracker: (spend[region] as SpendRuntime).tracker,
    clock,
    graceMs: 10_000,
  }).sweep();

describe('the spend ledger replicated between two regions', () => {
  const ownA = { bids: [] as string[], micros: 0 };
  const ownB = { bids: [] as string[], micros: 0 };
  const add = (to: typeof ownA, from: { bids: string[]; micros: number }) => {
    to.bids.push(...from.bids);
    to.micros += from.micros;
  };

  it("starts a plan-day in B without a rejoin grace although A's start marker replicated first", async () => {
    add(ownA, await book(REGION_A, 10));
    await replicate();
    add(ownB, await book(REGION_B, 10));
    // B's first initialisation of the plan-day: not a reset, no grace (a grace would refuse every
    // lease of B's guards for two slots at the start of every day).
    expect(await (two.redis[REGION_B] as RedisClient).hget(campaignKeys.state, 'g')).toBe('0');
    expect(await (two.redis[REGION_A] as RedisClient).hget(campaignKeys.state, 'g')).toBe('0');
    await replicate();
    expect(await confirmed(REGION_A)).toBe(ownA.micros);
    expect(await confirmed(REGION_B)).toBe(ownB.micros);
  });

  it("Redis of A killed while B spends: B's sweeper leaves A's intents, A's rebuild counts A's wins only, shares see both", async () => {
    const a = regionOf(REGION_A);
    await a.redis.down();
    // B keeps spending; its wins replicate into A's ledger replica.
    add(ownB, await book(REGION_B, 20));
    // A's notices during the outage: ledger written, the apply refused, the intent stays.
    const pendingA = { bids: [] as string[], micros: 0 };
    for (let i = 0; i < 5; i++) {
      const bidId = `${REGION_A}-down${i}`;
      const price = 2_000 + i;
      await expect((spend[REGION_A] as SpendRuntime).tracker.apply(win(bidId, price))).rejects.toThrow();
      pendingA.bids.push(bidId);
      pendingA.micros += price;
    }
    add(ownA, pendingA);
    await replicate();
    clock.advance(15_000);
    await two.link.deliverDue();

    // B's sweep-spend: A's intents are in B's replica too, and are A's business.
    const swept = await sweep(REGION_B);
    expect(swept).toMatchObject({ found: 0, settled: 0, failed: 0 });
    expect(await confirmed(REGION_B)).toBe(ownB.micros);
    expect(await confirmed(REGION_B, accountKeys().state)).toBe(ownB.micros);

    // A's Redis comes back empty; A's sweep-spend settles A's intents, rebuilding from the ledger.
    await a.redis.restart();
    await replicate();
    const sweptA = await sweep(REGION_A);
    expect(sweptA).toMatchObject({ found: 5, settled: 5, failed: 0 });
    expect(await confirmed(REGION_A)).toBe(ownA.micros);
    expect(await confirmed(REGION_A, accountKeys().state)).toBe(ownA.micros);
    const notices = await (two.redis[REGION_A] as RedisClient).hkeys(campaignKeys.notices);
    expect(notices.sort()).toEqual([...ownA.bids].sort());
    const accountNotices = await (two.redis[REGION_A] as RedisClient).hkeys(accountKeys().notices);
    expect(accountNotices.sort()).toEqual(ownA.bids.map((b) => `${campaignId}/${b}`).sort());
    // Nothing of A's is left for a sweeper anywhere once the close replicated.
    await replicate();
    expect(await sweep(REGION_B)).toMatchObject({ found: 0 });
    expect(await sweep(REGION_A)).toMatchObject({ found: 0 });

    // Region shares: each region's pacer sees its own live spend and the other's summary, once.
    const field = `c:${campaignId}:campaign`;
    const instances = [REGION_A, REGION_B].map((region) =>
      regionalInstance({ two, region, shard: SHARD, instance: 0, clock, controller, tickMs: TICK }),
    );
    try {
      for (let i = 0; i < 3; i++) {
        clock.set(Math.ceil((clock.now() + 1) / TICK) * TICK);
        await Promise.all(instances.map((x) => x.tick(clock.now() / TICK)));
        await replicate();
      }
      for (const x of instances) {
        const decision = x.wiring.shares.decision(field, day);
        expect(decision?.remainingMicros).toBe(BUDGET - ownA.micros - ownB.micros);
      }
    } finally {
      for (const x of instances) x.close();
    }
  });

  it('books one bid once across regions: a later notice in B is not counted; within the lag the rebuilds count it once', async () => {
    const before = { a: await confirmed(REGION_A), b: await confirmed(REGION_B) };
    // The same notice reaches A, then — after replication — B.
    const first = await (spend[REGION_A] as SpendRuntime).tracker.apply(win('dup-1', 3_000));
    expect(first.addedMicros).toBe(3_000);
    await replicate();
    const second = await (spend[REGION_B] as SpendRuntime).tracker.apply(win('dup-1', 3_000));
    expect(second).toMatchObject({ duplicate: true, addedMicros: 0 });
    expect(await confirmed(REGION_A)).toBe(before.a + 3_000);
    expect(await confirmed(REGION_B)).toBe(before.b);
    ownA.micros += 3_000;

    // Within the lag: both regions' conditions hold on their own replica, both count it live (the
    // conservative side); the replicas converge to the later write, B's.
    await (spend[REGION_A] as SpendRuntime).tracker.apply(win('race-1', 4_000));
    clock.advance(5);
    await (spend[REGION_B] as SpendRuntime).tracker.apply(win('race-1', 4_000));
    expect(await confirmed(REGION_A)).toBe(ownA.micros + 4_000);
    expect(await confirmed(REGION_B)).toBe(ownB.micros + 4_000);
    await replicate();
    ownB.micros += 4_000;
    // An operator's forced rebuild in both regions (what a Redis restart would do): counted once.
    const plan = (
      await (spend[REGION_A] as SpendRuntime).budgets.getCampaignBudgets(campaignId)
    )?.common.find((p) => p.level === 'campaign');
    if (!plan) throw new Error('campaign plan missing');
    for (const region of [REGION_A, REGION_B]) {
      await (spend[region] as SpendRuntime).reconciler.reconcile(plan, day, { force: true });
    }
    expect(await confirmed(REGION_A)).toBe(ownA.micros);
    expect(await confirmed(REGION_B)).toBe(ownB.micros);

    // The operator's view (`budgets reconcile` against A): A's live counters beside A's wins in the
    // ledger — equal, so no "differs" note although A's replica holds B's wins too.
    const out = (await budgetsCli(
      ['reconcile', '--campaign', campaignId, '--day', day],
      regionOf(REGION_A).clientEnv,
    )) as { plan: string; confirmedMicros: number; ledgerConfirmedMicros: number; note?: string }[];
    const row = out.find((r) => r.plan === 'campaign');
    expect(row).toMatchObject({ confirmedMicros: ownA.micros, ledgerConfirmedMicros: ownA.micros });
    expect(row?.note).toBeUndefined();
  });

  it('reads version 1 items (no region): wins count in every region, a v1 marker means started, a v1 intent is settled', async () => {
    const a = regionOf(REGION_A);
    const table = a.tableName('spendLedger');
    const expiresAt = Math.floor(clock.now() / 1000) + 400 * 86_400;
    // As written before items named their region (and replicated to every region, as in AWS).
    const v1Win = (bidId: string, price: number) => ({
      pk: { S: `S#${legacyCampaign}#${day}` },
      sk: { S: bidId },
      campaignId: { S: legacyCampaign },
      accountId: { S: accountId },
      bidId: { S: bidId },
      day: { S: day },
      clearingPriceMicros: { N: String(price) },
      bidPriceMicros: { N: String(price + 500) },
      bidAt: { N: String(clock.now() - 60_000) },
      noticeAt: { N: String(clock.now() - 59_000) },
      late: { BOOL: false },
      expiresAt: { N: String(expiresAt) },
    });
    for (const [bidId, price] of [
      ['v1-a', 1_500],
      ['v1-b', 2_500],
    ] as const) {
      await a.dynamodb.send(new PutItemCommand({ TableName: table, Item: v1Win(bidId, price) }));
    }
    const planKey = planDayKeys({ scope: `c:${legacyCampaign}`, planId: 'campaign' }, day);
    await a.dynamodb.send(
      new PutItemCommand({
        TableName: table,
        Item: {
          pk: { S: `P#c:${legacyCampaign}#campaign#${day}` },
          sk: { S: 'started' },
          at: { N: String(clock.now() - 60_000) },
          expiresAt: { N: String(expiresAt) },
        },
      }),
    );
    // A version 1 intent: shared partition, its win not yet in the ledger.
    const pendingEntry = {
      campaignId: legacyCampaign,
      accountId,
      bidId: 'v1-pending',
      day,
      clearingPriceMicros: 700,
      bidPriceMicros: 1_200,
      bidAt: clock.now() - 30_000,
      noticeAt: clock.now() - 29_000,
      late: false,
    };
    await a.dynamodb.send(
      new PutItemCommand({
        TableName: table,
        Item: {
          pk: { S: 'O#07' },
          sk: { S: `${legacyCampaign}#${day}#v1-pending` },
          entry: {
            M: Object.fromEntries(
              Object.entries(pendingEntry).map(([k, v]) => [
                k,
                typeof v === 'number' ? { N: String(v) } : typeof v === 'boolean' ? { BOOL: v } : { S: v },
              ]),
            ),
          },
          since: { N: String(clock.now() - 30_000) },
        },
      }),
    );
    await replicate();

    // A's sweeper settles the version 1 intent: A's first initialisation of the plan-day finds the
    // v1 marker (a reset: grace), and counts both v1 wins plus the settled one.
    const swept = await sweep(REGION_A);
    expect(swept).toMatchObject({ found: 1, settled: 1, failed: 0 });
    expect(await confirmed(REGION_A, planKey.state)).toBe(1_500 + 2_500 + 700);
    expect(Number(await (two.redis[REGION_A] as RedisClient).hget(planKey.state, 'g'))).toBeGreaterThan(
      clock.now(),
    );
    await replicate();
    expect(await sweep(REGION_B)).toMatchObject({ found: 0 });
    expect(await sweep(REGION_A)).toMatchObject({ found: 0 });

    // B's first initialisation of that plan-day: the v1 wins count in B too (written before items
    // named a region, they could be anyone's: the conservative reading); the settled one is A's.
    const plan = (
      await (spend[REGION_B] as SpendRuntime).budgets.getCampaignBudgets(legacyCampaign)
    )?.common.find((p) => p.level === 'campaign');
    if (!plan) throw new Error('campaign plan missing');
    await (spend[REGION_B] as SpendRuntime).reconciler.reconcile(plan, day);
    expect(await confirmed(REGION_B, planKey.state)).toBe(1_500 + 2_500);
  });
});
