/**
 * `packages/client/examples/ad-server.ts` as a user runs it: a child process (`tsx …/ad-server.ts`) with
 * nothing but a local region's client environment, importing only `paceline/client`. It must
 * complete its request paths (cap check → pacing read → guard → bid → notice → events), and what
 * it sent must land: every win booked once in the ledger and the live counters at the clearing
 * price the "exchange" substituted for ${AUCTION_PRICE}, every impression counted. The example
 * runs as the ad-server principal (the env's PACELINE_CLIENT_ACCESS_KEY_ID): every call it makes
 * is checked against the ad-server access policy the stack synthesizes.
 */
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RegionRuntime, startRuntime } from '../../../local/runtime.js';
import { BudgetRepository } from '../../../shared/budget/repository.js';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import { ActionStore } from '../../../shared/counting/store.js';
import { connectRedis, type RedisClient, redisConfigFromEnv } from '../../../shared/redis/connect.js';
import { planDayKeys } from '../../../shared/spend/keys.js';
import { SpendLedger } from '../../../shared/spend/ledger.js';
import { readPlanDay } from '../../../shared/spend/live-counters.js';
import { systemClock } from '../../../shared/time/clock.js';
import { runChild } from '../../support/child.js';
import { tempDir } from '../../support/tmp.js';

const repoRoot = fileURLToPath(new URL('../../..', import.meta.url));
let runtime: RegionRuntime;
let redis: RedisClient;

beforeAll(async () => {
  [runtime] = (await startRuntime({
    regions: ['us-east-1'],
    redisMode: 'standalone',
    stateDir: tempDir('paceline-client-example-'),
    // The stream consumers the example's events go to; no pacer (its absence is the fail-safe).
    functions: ['trackSpend', 'ingestActions'],
    functionOutput: 'ignore',
  })) as [RegionRuntime];
  redis = connectRedis(redisConfigFromEnv(runtime.region.clientEnv));
}, 120_000);

/** The demo campaign, created as the operator does (the example's ad-server key cannot write budgets). */
async function seedDemoCampaign(): Promise<void> {
  const region = runtime.region;
  const repo = new BudgetRepository({
    client: region.dynamodb,
    tableName: region.tableName('budgets'),
    pacerShards: region.description.settings.pacer.shards,
  });
  await repo.putAccount({
    accountId: 'example-account',
    name: 'Example advertiser',
    timeZone: 'America/New_York',
    currency: 'USD',
  });
  await repo.putCampaign({
    campaignId: 'example-campaign',
    accountId: 'example-account',
    name: 'Example campaign',
    status: 'active',
  });
  await repo.putPlan({
    level: 'campaign',
    accountId: 'example-account',
    campaignId: 'example-campaign',
    dailyBudgetMicros: 1_000_000_000,
    pacingMode: 'even',
  });
}

afterAll(async () => {
  redis?.disconnect();
  await runtime?.stop();
});

function runExample(args: string[]) {
  // Only the region's printed client environment (and PATH): what a developer's shell has.
  return runChild(
    process.execPath,
    [`${repoRoot}node_modules/tsx/dist/cli.mjs`, 'packages/client/examples/ad-server.ts', ...args],
    {
      cwd: repoRoot,
      env: { PATH: process.env.PATH ?? '', ...runtime.region.clientEnv },
      timeoutMs: 90_000,
    },
  );
}

async function until<T>(read: () => Promise<T>, done: (v: T) => boolean, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await read();
    if (done(v) || Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe('the ad-server example against a local region', () => {
  it('without its campaign, says how the operator creates it and exits 2 (its key cannot write budgets)', async () => {
    const run = await runExample(['--requests', '1']);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('Campaign example-campaign is not in the budgets table.');
    expect(run.stderr).toContain('npm run budgets -- campaign put --id example-campaign');
  }, 120_000);

  it('completes request paths and its events land (ledger, live counters, action counts)', async () => {
    await seedDemoCampaign();
    const run = await runExample(['--requests', '30']);
    expect(run.code, run.stderr).toBe(0);
    const summary = JSON.parse(run.stdout.trim().split('\n').at(-1) as string) as {
      requests: number;
      capped: number;
      bids: number;
      noBid: Record<string, number>;
      wins: number;
      losses: number;
      campaignId: string;
      pacing: Record<'fresh' | 'stale' | 'missing', number>;
      pacingNote?: string;
      metrics: { decisions: { total: number; bid: number }; errors: number; eventsFailed: number };
    };
    expect(summary.requests).toBe(30);
    // Warm-up: the first decision of a known campaign finds its float (no spurious no-budget).
    expect(summary.noBid).toEqual({});
    expect(summary.bids).toBe(30 - summary.capped);
    expect(summary.wins).toBeGreaterThan(5);
    expect(summary.losses).toBeGreaterThan(5);
    expect(summary.metrics.decisions.bid).toBe(summary.bids);
    expect(summary.metrics.errors).toBe(0);
    expect(summary.metrics.eventsFailed).toBe(0);
    // No pacer runs here: a new campaign has no published parameters, every decision is the
    // fail-safe — and the example says so, and why, in its output.
    expect(summary.pacing).toEqual({ fresh: 0, stale: 0, missing: 30 - summary.capped });
    expect(summary.pacingNote).toMatch(/^pacing: \d+ of \d+ decisions used the fail-safe/);
    expect(summary.pacingNote).toMatch(
      /no published parameters yet: the pacer publishes a new campaign's first ones at its next tick/,
    );
    expect(run.stdout).toContain(`${summary.pacingNote}\n`);

    // Wins: booked once each by track-spend at 80 % of the $2 CPM bid (1.6000 → 1,600 micros).
    const region = runtime.region;
    const repo = new BudgetRepository({ client: region.dynamodb, tableName: region.tableName('budgets') });
    const budgets = await repo.getCampaignBudgets(summary.campaignId);
    const plan = budgets?.common.find((p) => p.level === 'campaign');
    expect(plan).toBeDefined();
    const day = dayWindow(Date.now(), plan?.timeZone as string).day;
    const ledger = new SpendLedger({
      client: region.dynamodb,
      tableName: region.tableName('spendLedger'),
      region: region.region,
    });
    const entries = await until(
      () => ledger.entries(summary.campaignId, day),
      (e) => e.length >= summary.wins,
    );
    expect(entries).toHaveLength(summary.wins);
    expect(entries.every((e) => e.clearingPriceMicros === 1_600)).toBe(true);
    const key = planDayKeys(plan as NonNullable<typeof plan>, day).state;
    const live = await until(
      () => readPlanDay(redis, key, Date.now()),
      (s) => s.confirmedMicros >= 1_600 * summary.wins,
    );
    expect(live.confirmedMicros).toBe(1_600 * summary.wins);

    // Impressions (one per win) counted by ingest-actions for the example's users.
    const store = new ActionStore({ redis, clock: systemClock });
    const countAll = async () => {
      let total = 0;
      for (let u = 1_000; u < 1_007; u++) {
        const [[range]] = (await store.count(String(u), [
          {
            ranges: [{ from: Date.now() - 3_600_000, to: Date.now() + 1 }],
            filter: { action: ['impression'] },
          },
        ])) as unknown as [[{ total: number }]];
        total += range.total;
      }
      return total;
    };
    expect(await until(countAll, (n) => n >= summary.wins)).toBe(summary.wins);
  }, 150_000);
});
