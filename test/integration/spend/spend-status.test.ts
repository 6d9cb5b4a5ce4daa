/**
 * `paceline spend status` against a local region: per plan-day the live counters' confirmed,
 * in-flight and leased amounts (written by the real guard and reconciler), the remainder, and the
 * target E(t) now — the published curve for a paced shard (compared with the hash read
 * independently), the linear fail-safe curve where nothing is published; a day not initialised
 * says so. The real CLI process prints its target first and exactly one JSON object.
 */
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spendStatus } from '../../../cli/spend.js';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { recordFlightDay } from '../../../shared/budget/flight-store.js';
import { linearExpected } from '../../../shared/budget/pacing.js';
import { BudgetRepository } from '../../../shared/budget/repository.js';
import { addDays, dayWindow } from '../../../shared/budget/time-zone.js';
import { decodeCampaignHash } from '../../../shared/pacing/codec.js';
import { createLinearController } from '../../../shared/pacing/controller/linear.js';
import { campaignParamsKey } from '../../../shared/pacing/keys.js';
import { evaluateCurve } from '../../../shared/pacing/types.js';
import { connectRedis, type RedisClient, redisConfigFromEnv } from '../../../shared/redis/connect.js';
import { BudgetGuard } from '../../../shared/spend/guard.js';
import { SpendLedger } from '../../../shared/spend/ledger.js';
import { Reconciler } from '../../../shared/spend/reconcile.js';
import { ManualClock } from '../../../shared/time/clock.js';
import { runChild } from '../../support/child.js';
import { accountsInShard, makeInstance, seedShard } from '../pacing/support.js';

const repoRoot = fileURLToPath(new URL('../../..', import.meta.url));
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

function cli(args: string[]) {
  return runChild(process.execPath, ['cli/paceline.mjs', ...args], {
    cwd: repoRoot,
    env: { PATH: process.env.PATH ?? '', ...region.clientEnv },
  });
}

describe('paceline spend status', () => {
  it('reports confirmed, in-flight, leased, remaining and E(t) per plan-day', async () => {
    const T0 = Date.now();
    const clock = new ManualClock(T0);
    const shards = region.description.settings.pacer.shards;
    const repo = new BudgetRepository({
      client: region.dynamodb,
      tableName: region.tableName('budgets'),
      pacerShards: shards,
    });
    const [paced] = accountsInShard(1, shards, 1, 'sp');
    const [unpaced] = accountsInShard(2, shards, 1, 'su');
    const [pacedCampaign] = await seedShard(repo, [paced as string], 1, T0 - 60_000);
    const [idleCampaign] = await seedShard(repo, [unpaced as string], 1, T0 - 60_000);
    const pacer = makeInstance({
      region,
      redis,
      shard: 1,
      instance: 0,
      clock,
      controller: createLinearController() as never,
    });
    expect((await pacer.tick(Math.floor(T0 / 10_000))).published).toBe(true);

    // Two wins in the ledger, then a guard that initialises the day (rebuild), leases and bids.
    const day = dayWindow(T0, 'America/New_York').day;
    const ledger = new SpendLedger({
      client: region.dynamodb,
      tableName: region.tableName('spendLedger'),
      region: region.region,
    });
    for (const [bidId, price] of [
      ['w1', 700],
      ['w2', 900],
    ] as const) {
      await ledger.record({
        campaignId: pacedCampaign as string,
        accountId: paced as string,
        bidId,
        day,
        clearingPriceMicros: price,
        bidPriceMicros: 1_000,
        bidAt: T0 - 5_000,
        noticeAt: T0 - 4_000,
        late: false,
      });
    }
    const reconciler = new Reconciler({
      redis,
      ledger,
      clock,
      campaignsOfAccount: (a) => repo.listCampaignIds(a),
    });
    const guard = new BudgetGuard({
      redis,
      clock,
      initPlanDay: (plan, d) => reconciler.reconcile(plan, d),
      settleIntervalMs: 0, // settle every bid at once: the in-flight amount is in Redis when we read
    });
    const budgets = await repo.getCampaignBudgets(pacedCampaign as string);
    guard.setBudgets(budgets as NonNullable<typeof budgets>);
    await guard.warmUp(pacedCampaign as string, []);
    expect(guard.decide({ campaignId: pacedCampaign as string, priceMicros: 2_000 })).toBe('bid');
    await guard.idle();

    const rows = await spendStatus({ dynamodb: region.dynamodb, redis, shards, nowMs: T0 });
    const row = (accountId: string, plan: string) => {
      const r = rows.find((x) => x.accountId === accountId && x.plan === plan);
      expect(r, `${accountId} ${plan}`).toBeDefined();
      return r as NonNullable<typeof r>;
    };
    const published = decodeCampaignHash(
      await redis.hgetall(campaignParamsKey(paced as string, pacedCampaign as string, shards)),
    );
    for (const plan of ['account', 'campaign']) {
      const r = row(paced as string, plan);
      const resolved = budgets?.common.find((p) => p.planId === plan);
      expect(r).toMatchObject({ day, initialised: true, confirmedMicros: 1_600, inFlightMicros: 2_000 });
      // What Redis says is leased is exactly the float this guard holds.
      expect(r.leasedMicros).toBe(guard.localState(resolved as NonNullable<typeof resolved>, day)?.float);
      expect(r.leasedMicros).toBeGreaterThan(0);
      expect(r.remainingMicros).toBe(r.budgetMicros - 1_600 - 2_000 - r.leasedMicros);
      expect(r.targetSource).toBe('published');
      const curve = published?.plans.get(plan)?.curve;
      expect(curve).toBeDefined();
      expect(r.targetMicros).toBe(
        Math.min(evaluateCurve(curve as NonNullable<typeof curve>, T0), r.budgetMicros),
      );
    }
    // Arm plans of the paced campaign: nothing initialised for them yet.
    expect(row(paced as string, 'arm:A')).toMatchObject({
      initialised: false,
      confirmedMicros: 0,
      targetSource: 'published',
    });
    // Nothing published for the other shard: the linear fail-safe curve, a day not initialised.
    const idle = rows.find((x) => x.campaignId === idleCampaign && x.plan === 'campaign');
    expect(idle).toMatchObject({
      initialised: false,
      confirmedMicros: 0,
      inFlightMicros: 0,
      leasedMicros: 0,
      remainingMicros: 100_000_000,
      targetSource: 'linear',
      targetMicros: linearExpected(100_000_000, dayWindow(T0, 'America/New_York'), T0),
    });
    // Once the parameters are stale (> 3 ticks), the paced plans fall back to linear too.
    const later = await spendStatus({
      dynamodb: region.dynamodb,
      redis,
      shards,
      nowMs: T0 + 40_000,
      campaignId: pacedCampaign as string,
    });
    expect(later.find((x) => x.plan === 'campaign')?.targetSource).toBe('linear');
    expect(later.map((x) => x.plan).sort()).toEqual(['account', 'arm:A', 'arm:B', 'campaign']);
    await guard.close();

    // The real CLI: target first (stderr with --json), one JSON object, amounts as above.
    const run = await cli(['spend', 'status', '--json', '--campaign', pacedCampaign as string]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr.split('\n')[0]).toMatch(/^Target: local us-east-1/);
    expect(run.stdout.trim().split('\n')).toHaveLength(1);
    const report = JSON.parse(run.stdout) as {
      regions: {
        region: string;
        plans: { plan: string; confirmedMicros: number; allocationMicros: null }[];
      }[];
      combined: { plan: string; confirmedMicros: number; regions: string[]; allocatedMicros: null }[];
    };
    const campaignRow = report.regions[0]?.plans.find((p) => p.plan === 'campaign');
    expect(campaignRow?.confirmedMicros).toBe(1_600);
    // One region: no allocation; the combined row is the region's.
    expect(campaignRow?.allocationMicros).toBeNull();
    expect(report.combined.find((c) => c.plan === 'campaign')).toMatchObject({
      confirmedMicros: 1_600,
      regions: ['us-east-1'],
      allocatedMicros: null,
    });
    const human = await cli(['spend', 'status', '--campaign', pacedCampaign as string]);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(
      /budget\s+share \(soft\)\s+allocation \(cap\)\s+confirmed\s+in-flight\s+leased\s+remaining\s+target E\(t\)/,
    );
    expect(human.stdout).toMatch(
      /campaign\s+\d{4}-\d\d-\d\d\s+100\.00\s+\S+\s+-\s+0\.00\s.*\((published|linear)\)/,
    );

    // The pacing report of the same plan-days: actual = confirmed + in flight against E(now).
    const rep = await cli(['spend', 'report', '--json', '--campaign', pacedCampaign as string]);
    expect(rep.code, rep.stderr).toBe(0);
    expect(rep.stderr.split('\n')[0]).toMatch(/^Target: local us-east-1/);
    const { plans } = JSON.parse(rep.stdout) as {
      plans: {
        plan: string;
        regions: string[];
        expectedMicros: number;
        actualMicros: number;
        deliveryRatio: number | null;
        band: string;
        reason: string | null;
      }[];
    };
    expect(plans.map((p) => p.plan).sort()).toEqual(['account', 'arm:A', 'arm:B', 'campaign']);
    const c = plans.find((p) => p.plan === 'campaign');
    expect(c).toMatchObject({ regions: ['us-east-1'], actualMicros: 3_600 });
    expect(c?.expectedMicros).toBeGreaterThan(0);
    expect(c?.deliveryRatio).toBeCloseTo(3_600 / (c?.expectedMicros ?? 1), 4);
    const ratio = c?.deliveryRatio ?? 0;
    expect(c?.band).toBe(ratio < 0.9 ? 'behind' : ratio > 1.1 ? 'ahead' : 'on-pace');
    if (c?.band === 'behind') expect(c.reason).not.toBeNull();
    else expect(c?.reason).toBeNull();
    const table = await cli(['spend', 'report', '--campaign', pacedCampaign as string]);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/expected\s+actual\s+delivery\s+band\s+reason/);
  }, 120_000);

  it('reports a flight plan against its even line with --flight, its closed days and the one not closed', async () => {
    const shards = region.description.settings.pacer.shards;
    const repo = new BudgetRepository({
      client: region.dynamodb,
      tableName: region.tableName('budgets'),
      pacerShards: shards,
    });
    const [accountId] = accountsInShard(3, shards, 1, 'fl') as [string];
    const [campaignId] = await seedShard(repo, [accountId], 1, Date.now() - 60_000);
    const tz = (await repo.getAccount(accountId))?.timeZone as string;
    const today = dayWindow(Date.now(), tz).day;
    // Day 3 of a 5-day $50 flight capped at $20: day 1 closed at $4, day 2 not closed yet.
    const plan = {
      level: 'campaign' as const,
      accountId,
      campaignId: campaignId as string,
      dailyBudgetMicros: 20_000_000,
      pacingMode: 'even' as const,
      flight: { startDay: addDays(today, -2), endDay: addDays(today, 2), budgetMicros: 50_000_000 },
    };
    await repo.putPlan(plan);
    const table = { client: region.dynamodb, tableName: region.tableName('budgets') };
    expect(await recordFlightDay(table, plan, addDays(today, -2), 4_000_000, Date.now())).toBe(true);
    const rep = await cli(['spend', 'report', '--json', '--flight', '--campaign', campaignId as string]);
    expect(rep.code, rep.stderr).toBe(0);
    const { plans } = JSON.parse(rep.stdout) as {
      plans: { plan: string; budgetMicros: number; flight: unknown }[];
    };
    // Only the flight plan (the seeded account and arm plans are daily plans).
    expect(plans.map((p) => p.plan)).toEqual(['campaign']);
    // ($50 − $4 − $20 for the unclosed day) ÷ 3 days left.
    expect(plans[0]?.budgetMicros).toBe(Math.floor(26_000_000 / 3));
    expect(plans[0]?.flight).toMatchObject({
      dayNumber: 3,
      days: 5,
      evenShareMicros: 10_000_000,
      actualMicros: 4_000_000,
      unclosedDays: 1,
      band: 'behind',
    });
    const human = await cli(['spend', 'report', '--flight', '--campaign', campaignId as string]);
    expect(human.stdout).toMatch(/flight \S+ day 3\/5: .*1 day\(s\) not closed yet/);
    const misplaced = await cli(['spend', 'status', '--flight']);
    expect(misplaced.code).toBe(2);
    expect(misplaced.stderr).toMatch(/--flight belongs to "paceline spend report"/);
  }, 120_000);

  it('refuses bad input with one line and exit code 2', async () => {
    const badDay = await cli(['spend', 'status', '--day', '2026-02-30']);
    expect(badDay.code).toBe(2);
    expect(badDay.stderr.trim().split('\n')).toHaveLength(1);
    const badCommand = await cli(['spend', 'stats']);
    expect(badCommand.code).toBe(2);
    expect(badCommand.stderr).toMatch(/paceline spend status" or "paceline spend report/);
  }, 60_000);
});
