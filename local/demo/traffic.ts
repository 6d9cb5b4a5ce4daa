/**
 * The demo's ad server and exchange, against a running local region: seeds the budget model
 * (`BudgetRepository`, as the operator), then is an ad server built the documented way — one
 * `createPacelineClient` from the region's environment (`configFromEnv`), asked `bid()` for every
 * bid request (pacing read, throttle, price × multiplier, budget guard; the bid event goes out);
 * after a notice delay the exchange's win (with an impression — and sometimes a click — on the
 * actions stream) or loss follows through the same client.
 * Every `poisonEverySec` one malformed record goes to a stream, so the dead-letter counts move.
 *
 * Used by `npm run demo` (local/demo/main.ts) and by the dashboard's browser test.
 */

import { randomUUID } from 'node:crypto';
import type { KinesisClient } from '@aws-sdk/client-kinesis';
import { dynamoDbClient, kinesisClient } from '../../shared/aws/clients.js';
import { BudgetRepository } from '../../shared/budget/repository.js';
import { createPacelineClient, type PacelineClient } from '../../shared/client/client.js';
import { configFromEnv } from '../../shared/client/config.js';
import { KinesisProducer, KinesisPutError } from '../../shared/kinesis/producer.js';
import { TICK_MS } from '../../shared/pacing/types.js';
import { prng, type Random } from '../../shared/random/prng.js';
import { regionResources, resourceName } from '../../shared/region/resources.js';
import { type Clock, systemClock } from '../../shared/time/clock.js';
import {
  type AuctionModel,
  actionEvent,
  auctionOutcome,
  type DemoCampaign,
  type DemoShape,
  defaultAuctionModel,
  demoBudgets,
  pickCampaign,
  poisonRecord,
} from './scenario.js';
import type { DemoTarget } from './target.js';

/** Options of {@link startDemoTraffic}. */
export interface DemoTrafficOptions extends DemoShape {
  readonly target: DemoTarget;
  /** Bid requests per second (across all campaigns). @default 100 */
  readonly requestsPerSec?: number;
  /** One poison record every this many seconds; 0 = none. @default 30 */
  readonly poisonEverySec?: number;
  /** Distinct users (action events' user ids). @default 5_000 */
  readonly users?: number;
  /** @default defaultAuctionModel */
  readonly auction?: Partial<AuctionModel>;
  /** The pacer's tick (the reader's cache and staleness follow it). @default TICK_MS */
  readonly tickMs?: number;
  /** @default systemClock */
  readonly clock?: Clock;
  /** Seed of the traffic's randomness. @default a random seed */
  readonly seed?: number;
  /** Called with failures (a record not put, a lease refused); the traffic keeps going. */
  readonly onError?: (error: unknown) => void;
}

/** Counters of a running demo. */
export interface DemoStats {
  requests: number;
  bids: number;
  throttled: number;
  noBudget: number;
  wins: number;
  losses: number;
  impressions: number;
  clicks: number;
  poison: number;
  spentMicros: number;
  /** Records that could not be put on a stream. */
  putErrors: number;
  /**
   * No-budget answers in the first {@link EARLY_WINDOW_MS} to a campaign that had spent less than
   * 5 % of its budget, whatever refused them (an even campaign created now is capped by its E(t),
   * which starts at its creation, in one region as in several).
   */
  earlyNoBudget: number;
  /**
   * Of those, the answers the region's allocation caused: a refusing plan's last lease was cut
   * short by the allocation, not by E(t) (with several regions: what floors and fast first
   * allocations prevent; 0 expected).
   */
  earlyAllocationNoBudget: number;
}

/** The demo's "first minutes": the window of {@link DemoStats.earlyNoBudget}. */
export const EARLY_WINDOW_MS = 180_000;

/** A running demo. */
export interface DemoTraffic {
  readonly stats: Readonly<DemoStats>;
  readonly campaigns: readonly DemoCampaign[];
  /** Stops the requests, waits for scheduled notices, flushes the streams and closes the clients. */
  stop(): Promise<void>;
}

/** Writes the demo's accounts, campaigns and plans (upserts: running it twice is harmless). */
export async function seedDemo(
  repo: BudgetRepository,
  shape: DemoShape,
  nowMs: number,
): Promise<DemoCampaign[]> {
  const { budgets, campaigns } = demoBudgets(shape);
  for (const a of budgets.accounts) await repo.putAccount(a, 'upsert', nowMs);
  for (const c of budgets.campaigns) await repo.putCampaign(c, 'upsert', nowMs);
  for (const p of budgets.plans) await repo.putPlan(p, 'upsert', nowMs);
  return campaigns;
}

const STEP_MS = 100;

/** A demo's counters before its first request: every one zero. */
export function newStats(): DemoStats {
  return {
    requests: 0,
    bids: 0,
    throttled: 0,
    noBudget: 0,
    wins: 0,
    losses: 0,
    impressions: 0,
    clicks: 0,
    poison: 0,
    spentMicros: 0,
    putErrors: 0,
    earlyNoBudget: 0,
    earlyAllocationNoBudget: 0,
  };
}

/** What one demo run shares: its client, randomness, counters and the notices not yet sent. */
interface DemoRun {
  readonly client: PacelineClient;
  readonly campaigns: readonly DemoCampaign[];
  readonly clock: Clock;
  readonly random: Random;
  readonly model: AuctionModel;
  readonly users: number;
  readonly stats: DemoStats;
  readonly startedAt: number;
  /** Each campaign's campaign-plan budget (the early no-budget count). */
  readonly budgetOf: ReadonlyMap<string, number>;
  /** Each campaign's booked spend. */
  readonly spentBy: Map<string, number>;
  /** Scheduled notices, so stop() can send them at once instead of dropping them. */
  readonly notices: Map<NodeJS.Timeout, () => void>;
}

/** Counts a refused bid; a no-budget answer early in the run to a campaign that spent little is counted apart. */
function countRefusal(run: DemoRun, campaignId: string, reason: string, now: number, refusalsBefore: number) {
  const { stats } = run;
  if (reason === 'throttled') {
    stats.throttled++;
    return;
  }
  stats.noBudget++;
  const budget = run.budgetOf.get(campaignId) ?? 0;
  if (now - run.startedAt < EARLY_WINDOW_MS && (run.spentBy.get(campaignId) ?? 0) < 0.05 * budget) {
    stats.earlyNoBudget++;
    if (run.client.guard.stats.allocationRefusals > refusalsBefore) stats.earlyAllocationNoBudget++;
  }
}

/** The exchange's answer to a bid that went out: after its delay, a win (impression, click) or a loss. */
function scheduleNotice(
  run: DemoRun,
  c: DemoCampaign,
  bid: { bidId: string; bidAt: number; priceMicros: number },
) {
  const { client, stats, random } = run;
  const base = {
    v: 1 as const,
    bidId: bid.bidId,
    campaignId: c.campaignId,
    bidAt: bid.bidAt,
    bidPriceMicros: bid.priceMicros,
  };
  const outcome = auctionOutcome(bid.priceMicros, run.model, random);
  const userId = 1 + Math.floor(random() * run.users);
  const notice = () => {
    run.notices.delete(timer);
    const at = run.clock.now();
    if (outcome.kind === 'win') {
      stats.wins++;
      stats.impressions++;
      stats.spentMicros += outcome.clearingPriceMicros;
      run.spentBy.set(c.campaignId, (run.spentBy.get(c.campaignId) ?? 0) + outcome.clearingPriceMicros);
      client.sendSpendEvent({ ...base, type: 'win', at, clearingPriceMicros: outcome.clearingPriceMicros });
      client.sendAction(actionEvent(c, 'impression', userId, at, random));
      if (outcome.clicked) {
        stats.clicks++;
        client.sendAction(actionEvent(c, 'click', userId, at, random));
      }
    } else {
      stats.losses++;
      if (outcome.notice) client.sendSpendEvent({ ...base, type: 'loss', at });
    }
  };
  const timer = setTimeout(notice, outcome.delayMs);
  run.notices.set(timer, notice);
}

/** One bid request: a campaign, the client's decision, and the exchange's notice for a bid. */
function request(run: DemoRun, now: number): void {
  run.stats.requests++;
  const c = pickCampaign(run.campaigns, run.random);
  const refusalsBefore = run.client.guard.stats.allocationRefusals;
  const outcome = run.client.bid({
    bidId: randomUUID(),
    campaignId: c.campaignId,
    basePriceMicros: c.basePriceMicros,
  });
  if (!outcome.bid) {
    countRefusal(run, c.campaignId, outcome.reason, now, refusalsBefore);
    return;
  }
  run.stats.bids++;
  scheduleNotice(run, c, outcome);
}

/** Seeds the target region and starts the traffic; resolves once the first requests can go out. */
export async function startDemoTraffic(options: DemoTrafficOptions): Promise<DemoTraffic> {
  const { target } = options;
  const clock = options.clock ?? systemClock;
  const random: Random = prng(options.seed ?? Math.floor(Math.random() * 2 ** 31));
  const onError = options.onError ?? (() => {});
  const stats = newStats();
  const countingErrors = (error: unknown) => {
    if (error instanceof KinesisPutError) stats.putErrors++;
    onError(error);
  };
  // The ad server: the documented client, from the region's environment (its own credentials).
  const client = await createPacelineClient(
    configFromEnv(target.env, {
      clock,
      random,
      autoTrack: false,
      pacing: { tickMs: options.tickMs ?? TICK_MS },
      onError: countingErrors,
    }),
  );
  // The operator's side: budgets written, poison records put (what no ad server does).
  const dynamodb = dynamoDbClient(target.endpoints);
  const kinesis = kinesisClient(target.endpoints);
  const closeAll = async () => {
    await client.close();
    dynamodb.destroy();
    kinesis.destroy();
  };
  try {
    const repo = new BudgetRepository({
      client: dynamodb,
      tableName: resourceName(regionResources.tables.budgets, target.env),
      pacerShards: client.pacerShards,
    });
    const campaigns = await seedDemo(repo, options, clock.now());
    await client.track(campaigns.map((c) => c.campaignId));
    const budgetOf = new Map<string, number>();
    for (const c of campaigns) {
      const plan = (await repo.getCampaignBudgets(c.campaignId))?.common.find((p) => p.level === 'campaign');
      if (plan) budgetOf.set(c.campaignId, plan.dailyBudgetMicros);
    }
    const run: DemoRun = {
      client,
      campaigns,
      clock,
      random,
      model: { ...defaultAuctionModel, ...options.auction },
      users: options.users ?? 5_000,
      stats,
      startedAt: clock.now(),
      budgetOf,
      spentBy: new Map(),
      notices: new Map(),
    };
    return runTraffic(run, options, kinesis, closeAll, countingErrors);
  } catch (error) {
    await closeAll();
    throw error;
  }
}

/** Requests on a fixed step, a poison record every `poisonEverySec`; `stop()` ends them. */
function runTraffic(
  run: DemoRun,
  options: DemoTrafficOptions,
  kinesis: KinesisClient,
  closeAll: () => Promise<void>,
  onPutError: (error: KinesisPutError) => void,
): DemoTraffic {
  const { target } = options;
  const rate = options.requestsPerSec ?? 100;
  const poisonEveryMs = (options.poisonEverySec ?? 30) * 1000;
  const poison = {
    spend: new KinesisProducer({
      client: kinesis,
      streamName: resourceName(regionResources.streams.spend, target.env),
    }),
    actions: new KinesisProducer({
      client: kinesis,
      streamName: resourceName(regionResources.streams.actions, target.env),
    }),
  };
  // Requests on a fixed step with a fractional carry: the offered rate holds at any step length.
  let carry = 0;
  let lastPoison = run.clock.now();
  const loop = setInterval(() => {
    const now = run.clock.now();
    carry += (rate * STEP_MS) / 1000;
    const n = Math.floor(carry);
    carry -= n;
    for (let i = 0; i < n; i++) request(run, now);
    if (poisonEveryMs > 0 && now - lastPoison >= poisonEveryMs) {
      lastPoison = now;
      const r = poisonRecord(run.stats.poison++, pickCampaign(run.campaigns, run.random), now);
      poison[r.stream].enqueue({ data: r.data, partitionKey: r.partitionKey }, onPutError);
    }
  }, STEP_MS);
  return {
    stats: run.stats,
    campaigns: run.campaigns,
    async stop() {
      clearInterval(loop);
      // Notices of bids already out are still sent (an exchange would send them too), at once.
      for (const [timer, notice] of [...run.notices]) {
        clearTimeout(timer);
        notice();
      }
      await Promise.all([poison.spend.flush(), poison.actions.flush()]);
      await closeAll();
    },
  };
}
