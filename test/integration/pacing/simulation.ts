/**
 * Simulated days for the controller's soak tests, on the simulator's engine (`sim/runner.ts`: the
 * real pacer, publisher, readers, guards and tracker on a real redis-server, the code `npm run sim`
 * runs). A test's world is a scenario (`sim/scenario.ts`) in which every campaign has a segment of
 * its own: its own requests, as many as `demand` × its budget at full speed, and auctions no other
 * campaign of the world enters. A campaign's ASAP twin is the same campaign in the `asap`
 * strategy's run, on the same requests. A tick hook reads, after every pacer tick, what the pacer
 * published for every plan and the plan's live spend.
 */
import { afterAll, beforeAll, expect } from 'vitest';
import { type RunningRedis, startRedis } from '../../../local/emulators/redis.js';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import { decodeCampaignHash, type PublishedPlan } from '../../../shared/pacing/codec.js';
import { campaignParamsKey } from '../../../shared/pacing/keys.js';
import type { PacingMode } from '../../../shared/pacing/modes.js';
import { TICK_MS } from '../../../shared/pacing/types.js';
import { prng } from '../../../shared/random/prng.js';
import { connectRedis, type RedisClient } from '../../../shared/redis/connect.js';
import { planDayKeys } from '../../../shared/spend/keys.js';
import { type PlanDaySnapshot, readPlanDay } from '../../../shared/spend/live-counters.js';
import { ManualClock } from '../../../shared/time/clock.js';
import { type AuctionKind, Market, SHAPES, valuationSampler } from '../../../sim/market/index.js';
import { type PlanDayResult, type RunProbe, runStrategy, type StrategyRun } from '../../../sim/runner.js';
import { parseScenario, type Scenario } from '../../../sim/scenario.js';

/** A redis-server for one test file. */
export async function redisForFile(): Promise<{ server: RunningRedis; redis: RedisClient }> {
  const server = await startRedis();
  const port = Number(server.nodes[0]?.split(':')[1]);
  const redis = connectRedis({ mode: 'standalone', nodes: [{ host: '127.0.0.1', port }], tls: false });
  return { server, redis };
}

/** Base bid (the scenarios' default valuation median) of the simulated campaigns, micros: $1.50 CPM. */
export const BASE_BID = 1500;

/** Expected full-speed spend per eligible request (Monte Carlo over the market's prices). */
export function spendPerRequest(auction: AuctionKind, baseBid = BASE_BID, priceCampaign = '1458'): number {
  const market = new Market({
    traffic: { requestsPerDay: 0, shape: SHAPES.flat },
    auction,
    seed: 1,
    priceCampaign,
  });
  const random = prng(4242);
  const valuation = valuationSampler(baseBid);
  let total = 0;
  const n = 200_000;
  for (let i = 0; i < n; i++) {
    const bid = valuation(random);
    const price = market.prices.sample(random);
    if (bid > price) total += auction === 'first-price' ? bid : price;
  }
  return total / n;
}

/** Requests per day so that bidding on all of them at full value would spend `demand × budget`. */
export function requestsFor(demand: number, budgetMicros: number, auction: AuctionKind): number {
  return Math.round((demand * budgetMicros) / spendPerRequest(auction));
}

/** A campaign of a test world (money in micros). */
export interface SoakCampaign {
  readonly id: string;
  readonly budget: number;
  /** Its requests a day as a multiple of its budget at full speed (or give `requests`). */
  readonly demand?: number;
  /** Its requests a day. */
  readonly requests?: number;
  /** @default 'even' */
  readonly pacingMode?: PacingMode;
  readonly arms?: readonly { readonly id: string; readonly budget: number; readonly share: number }[];
}

/** An account of a test world, with an account plan when it has a `budget`. */
export interface SoakAccount {
  readonly id: string;
  readonly budget?: number;
  readonly campaigns: readonly SoakCampaign[];
}

/** A test world: the scenario's days, market and accounts. */
export interface SoakWorldSpec {
  readonly name: string;
  readonly timeZone: string;
  /** First local day; every day is simulated from a fresh Redis (no history days). */
  readonly start: string;
  readonly days: number;
  readonly seed: number;
  /** @default 'second-price' */
  readonly auction?: AuctionKind;
  /** Traffic events over the whole world (an outage: factor 0). */
  readonly events?: readonly { readonly fromMs: number; readonly toMs: number; readonly factor: number }[];
  readonly budgetChanges?: readonly {
    readonly atMs: number;
    readonly campaign: string;
    readonly budget: number;
  }[];
  readonly accounts: readonly SoakAccount[];
}

const usd = (micros: number) => micros / 1_000_000;
const iso = (ms: number) => new Date(ms).toISOString();

/**
 * The world as a scenario: one segment per campaign (its share of the traffic is its share of
 * the requests), noon-peak traffic in the world's zone with the format's default noise, notices
 * and market (iPinYou 1458 prices, 2 ad servers), valuations lognormal (σ 0.3) around $1.50 CPM.
 */
export function soakScenario(w: SoakWorldSpec): Scenario {
  const auction = w.auction ?? 'second-price';
  const campaigns = w.accounts.flatMap((a) => a.campaigns);
  const requests = new Map(
    campaigns.map((c) => [c.id, c.requests ?? requestsFor(c.demand ?? 0, c.budget, auction)]),
  );
  const total = [...requests.values()].reduce((a, b) => a + b, 0);
  return parseScenario({
    name: w.name,
    timeZone: w.timeZone,
    start: w.start,
    historyDays: 0,
    days: w.days,
    seed: w.seed,
    traffic: {
      requestsPerDay: total,
      shape: 'noonPeak',
      events: (w.events ?? []).map((e) => ({ from: iso(e.fromMs), to: iso(e.toMs), factor: e.factor })),
    },
    segments: Object.fromEntries(campaigns.map((c) => [c.id, (requests.get(c.id) as number) / total])),
    market: { auction },
    accounts: w.accounts.map((a) => ({
      id: a.id,
      ...(a.budget === undefined ? {} : { dailyBudget: usd(a.budget) }),
      campaigns: a.campaigns.map((c) => ({
        id: c.id,
        dailyBudget: usd(c.budget),
        pacingMode: c.pacingMode ?? 'even',
        targeting: { segments: [c.id] },
        arms: (c.arms ?? []).map((arm) => ({ id: arm.id, share: arm.share, dailyBudget: usd(arm.budget) })),
      })),
    })),
    budgetChanges: (w.budgetChanges ?? []).map((b) => ({
      at: iso(b.atMs),
      campaign: b.campaign,
      dailyBudget: usd(b.budget),
    })),
  });
}

/**
 * Called after every pacer tick with every plan's parameters as published (the campaign hashes in
 * Redis) and its live counters, by plan key (`a:<account>/account`, `c:<campaign>/<planId>`).
 */
export type TickHook = (
  nowMs: number,
  params: ReadonlyMap<string, PublishedPlan>,
  spend: ReadonlyMap<string, PlanDaySnapshot>,
) => void;

/** A run's probe that calls `onTick` at every tick (see {@link TickHook}). */
function tickProbe(onTick: TickHook): (view: RunProbe) => Promise<void> | undefined {
  return (view) => (view.now % TICK_MS === 0 ? readTick(view, onTick) : undefined);
}

async function readTick({ now, redis, plans }: RunProbe, onTick: TickHook): Promise<void> {
  // An account plan is published in the hash of each of its campaigns: read one of them.
  const campaignOf = new Map<string, string>();
  for (const p of plans) if (p.campaignId !== undefined) campaignOf.set(p.accountId, p.campaignId);
  const hashes = new Map<string, Promise<Record<string, string>>>();
  const hashOf = (accountId: string, campaignId: string) => {
    let h = hashes.get(campaignId);
    if (!h) {
      h = redis.hgetall(campaignParamsKey(accountId, campaignId, 1));
      hashes.set(campaignId, h);
    }
    return h;
  };
  const read = plans.map(async (p) => {
    const campaignId = p.campaignId ?? (campaignOf.get(p.accountId) as string);
    const day = dayWindow(now, p.timeZone).day;
    const [hash, spend] = await Promise.all([
      hashOf(p.accountId, campaignId),
      readPlanDay(redis, planDayKeys(p, day).state, now),
    ]);
    return { key: `${p.scope}/${p.planId}`, params: decodeCampaignHash(hash)?.plans.get(p.planId), spend };
  });
  const params = new Map<string, PublishedPlan>();
  const spend = new Map<string, PlanDaySnapshot>();
  for (const r of await Promise.all(read)) {
    if (r.params) params.set(r.key, r.params);
    spend.set(r.key, r.spend);
  }
  onTick(now, params, spend);
}

/** A world to simulate and how. */
export interface SoakWorld {
  readonly scenario: Scenario;
  /** Also run the `asap` strategy (the campaigns' ASAP twins, on the same requests). */
  readonly asap?: boolean;
  /** Every pacer tick a takeover (`RunOptions.takeoverEveryTick`). */
  readonly takeoverEveryTick?: boolean;
  /** The Paceline run's tick hook. */
  readonly onTick?: TickHook;
}

/** The runs of a test file's worlds, by world name and strategy. */
export type SoakRuns = (world: string, strategy?: 'paceline' | 'asap') => StrategyRun;

/**
 * Runs the file's worlds once, before its tests: the Paceline run of each (and its ASAP run when
 * asked), all at once, each on a redis-server of its own; logs one line per plan-day. Returns the
 * runs' getter for the tests.
 */
export function simulatedDays(worlds: () => readonly SoakWorld[]): SoakRuns {
  const servers: { server: RunningRedis; redis: RedisClient }[] = [];
  const runs = new Map<string, StrategyRun>();
  beforeAll(async () => {
    const jobs = worlds().flatMap((w) => [
      { w, strategy: 'paceline' as const },
      ...(w.asap ? [{ w, strategy: 'asap' as const }] : []),
    ]);
    for (const _ of jobs) servers.push(await redisForFile());
    const done = await Promise.all(
      jobs.map(({ w, strategy }, i) =>
        runStrategy({
          redis: (servers[i] as { redis: RedisClient }).redis,
          clock: new ManualClock(w.scenario.startMs),
          scenario: w.scenario,
          strategy,
          ...(strategy === 'paceline' && w.onTick ? { probe: tickProbe(w.onTick) } : {}),
          ...(strategy === 'paceline' && w.takeoverEveryTick ? { takeoverEveryTick: true } : {}),
        }),
      ),
    );
    done.forEach((run, i) => {
      const name = `${jobs[i]?.w.scenario.name}/${run.strategy}`;
      runs.set(name, run);
      console.log(
        JSON.stringify({ run: name, ticks: run.ticks, auctions: run.auctions, notices: run.notices }),
      );
      for (const row of summary(run.plans)) console.log(JSON.stringify({ run: name, ...row }));
    });
  }, 1_200_000);
  afterAll(async () => {
    for (const s of servers) {
      s.redis.disconnect();
      await s.server.stop();
    }
  });
  return (world, strategy = 'paceline') => {
    const run = runs.get(`${world}/${strategy}`);
    if (!run) throw new Error(`No run ${world}/${strategy} (see the beforeAll error).`);
    return run;
  };
}

/**
 * A clean run: no guard, reader or pacer errors (no fail-safe parameters), no stale write
 * accepted, and the live counters hold exactly the wins the tracker booked.
 */
export function expectClean(run: StrategyRun): void {
  expect(run.errors).toEqual([]);
  expect(run.staleWritesAccepted).toBe(0);
  for (const p of run.plans) expect(p.countersMicros).toBe(p.spentMicros);
}

/** The rows of one campaign's plan (`campaign` or `arm:<id>`), in day order. */
export function daysOf(run: StrategyRun, campaignId: string, planId = 'campaign'): PlanDayResult[] {
  return rowsOf(run, `c:${campaignId}/${planId}`);
}

/** The rows of a plan by its key (`a:<account>/account`, `c:<campaign>/<planId>`), in day order. */
export function rowsOf(run: StrategyRun, key: string): PlanDayResult[] {
  return run.plans.filter((p) => p.plan === key).sort((a, b) => a.day.localeCompare(b.day));
}

/** Cost per impression over rows. */
export function costPerImpression(rows: readonly PlanDayResult[]): number {
  const charged = rows.reduce((a, r) => a + r.chargedMicros, 0);
  const imps = rows.reduce((a, r) => a + r.impressions, 0);
  return charged / Math.max(1, imps);
}

/** One line per plan-day for the test log (what the docs' tables are built from). */
export function summary(rows: readonly PlanDayResult[]): object[] {
  return rows.map((r) => ({
    plan: r.plan,
    day: r.day,
    utilisation: +(r.spentMicros / r.budgetMicros).toFixed(4),
    maxDeviation: +r.maxDeviation.toFixed(4),
    rmsDeviation: +r.rmsDeviation.toFixed(4),
    ...(r.maxDeviationAfterChange === undefined
      ? {}
      : { maxDeviationAfterChange: +r.maxDeviationAfterChange.toFixed(4) }),
    overspend: +Math.max(0, (r.spentMicros - r.budgetMicros) / r.budgetMicros).toFixed(5),
    costPerImpression: Math.round(r.chargedMicros / Math.max(1, r.impressions)),
    impressions: r.impressions,
  }));
}
