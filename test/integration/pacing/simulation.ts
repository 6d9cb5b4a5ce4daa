/**
 * Shared pieces of the pacing simulations: a real redis-server per file, demand calibration
 * (requests per day for a given multiple of the budget at full speed) and report helpers.
 */
import { afterAll, beforeAll, expect } from 'vitest';
import { type RunningRedis, startRedis } from '../../../local/emulators/redis.js';
import { createPacingController } from '../../../shared/pacing/controller/index.js';
import { prng } from '../../../shared/random/prng.js';
import { connectRedis, type RedisClient } from '../../../shared/redis/connect.js';
import { ManualClock } from '../../../shared/time/clock.js';
import {
  type AuctionKind,
  Market,
  type NoticeOptions,
  SHAPES,
  valuationSampler,
} from '../../../sim/market/index.js';
import {
  type PacingSimOptions,
  type PacingSimReport,
  type PlanDayReport,
  runPacingSim,
  type SimCampaign,
} from '../../../sim/pacing-sim.js';

/** A redis-server for one test file. */
export async function redisForFile(): Promise<{ server: RunningRedis; redis: RedisClient }> {
  const server = await startRedis();
  const port = Number(server.nodes[0]?.split(':')[1]);
  const redis = connectRedis({ mode: 'standalone', nodes: [{ host: '127.0.0.1', port }], tls: false });
  return { server, redis };
}

/** Notices of every scenario: exponential delay (mean 2 s, exchange deadline 60 s), 1 % duplicated. */
export const NOTICES: NoticeOptions = {
  meanDelayMs: 2_000,
  maxDelayMs: 60_000,
  duplicateRate: 0.01,
  lossNoticeRate: 1,
};

/** A scenario: what differs between the simulation files. */
export type Scenario = Pick<
  PacingSimOptions<unknown, unknown>,
  'accounts' | 'startMs' | 'onTick' | 'roundTrip'
> & {
  readonly endMs: number;
};

/**
 * Runs a scenario once for the test file (before its tests, on its own redis-server) with the
 * settings every scenario shares — the real controller, 2 guards with floats of at least the
 * largest bid (5,000 micros), {@link NOTICES} — and logs one line per plan-day. Returns the
 * report's getter for the tests.
 */
export function simulatedDays(scenario: () => Scenario): () => PacingSimReport {
  let server: RunningRedis | undefined;
  let redis: RedisClient | undefined;
  let report: PacingSimReport | undefined;
  beforeAll(async () => {
    ({ server, redis } = await redisForFile());
    const { endMs, ...s } = scenario();
    report = await runPacingSim({
      redis,
      clock: new ManualClock(s.startMs),
      durationMs: endMs - s.startMs,
      controller: createPacingController(),
      notices: NOTICES,
      minFloatMicros: 5_000,
      ...s,
    });
    console.log(JSON.stringify({ ticks: report.ticks, auctions: report.auctions, notices: report.notices }));
    for (const row of summary(report.plans)) console.log(JSON.stringify(row));
  }, 300_000);
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });
  return () => {
    if (!report) throw new Error('The simulation did not run (see the beforeAll error).');
    return report;
  };
}

/** A clean run: no guard errors, and the live counters hold exactly the wins the tracker booked. */
export function expectClean(report: PacingSimReport): void {
  expect(report.errors).toEqual([]);
  for (const p of report.plans) expect(p.countersMicros).toBe(p.spentMicros);
}

/** Base bid (valuation median) of the simulated campaigns, micros: $1.50 CPM. */
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

/** A campaign of the scenarios (second price, noon-peak traffic, even pacing unless overridden). */
export function campaign(
  id: string,
  opts: { budget: number; demand: number; seed: number; timeZone: string } & Partial<SimCampaign>,
): SimCampaign {
  const { budget, demand, seed, timeZone, ...rest } = opts;
  const auction = rest.auction ?? 'second-price';
  return {
    id,
    budgetMicros: budget,
    pacingMode: 'even',
    baseBidMicros: BASE_BID,
    auction,
    seed,
    traffic: { requestsPerDay: requestsFor(demand, budget, auction), shape: SHAPES.noonPeak, timeZone },
    ...rest,
  };
}

/** The report rows of one campaign's plan (`campaign` or `arm:<id>`), in day order. */
export function daysOf(report: PacingSimReport, campaignId: string, planId = 'campaign'): PlanDayReport[] {
  return rowsOf(report, `c:${campaignId}/${planId}`);
}

/** The report rows of a plan by its key (`a:<account>/account`, `c:<campaign>/<planId>`), in day order. */
export function rowsOf(report: PacingSimReport, key: string): PlanDayReport[] {
  return report.plans.filter((p) => p.plan === key).sort((a, b) => a.day.localeCompare(b.day));
}

/** Cost per impression over rows. */
export function costPerImpression(rows: readonly PlanDayReport[]): number {
  const charged = rows.reduce((a, r) => a + r.chargedMicros, 0);
  const imps = rows.reduce((a, r) => a + r.impressions, 0);
  return charged / Math.max(1, imps);
}

/** One line per plan-day for the test log (what the docs' tables are built from). */
export function summary(rows: readonly PlanDayReport[]): object[] {
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
