/**
 * Shared pieces of the pacing simulations: a real redis-server per file, demand calibration
 * (requests per day for a given multiple of the budget at full speed) and report helpers.
 */
import { type RunningRedis, startRedis } from '../../../local/emulators/redis.js';
import { prng } from '../../../shared/random/prng.js';
import { connectRedis, type RedisClient } from '../../../shared/redis/connect.js';
import { type AuctionKind, Market, SHAPES, valuationSampler } from '../../../sim/market/index.js';
import type { PacingSimReport, PlanDayReport, SimCampaign } from '../../../sim/pacing-sim.js';

/** A redis-server for one test file. */
export async function redisForFile(): Promise<{ server: RunningRedis; redis: RedisClient }> {
  const server = await startRedis();
  const port = Number(server.nodes[0]?.split(':')[1]);
  const redis = connectRedis({ mode: 'standalone', nodes: [{ host: '127.0.0.1', port }], tls: false });
  return { server, redis };
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
