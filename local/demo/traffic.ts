/**
 * The demo's ad server and exchange, against a running local region: seeds the budget model
 * (`BudgetRepository`), then for every bid request reads the pacing parameters
 * (`PacingReader`), throttles, shades and asks the `BudgetGuard` (`paceBid`, the documented
 * call sequence); a bid that goes out is put on the spend stream, and after a notice delay its
 * win (with an impression — and sometimes a click — on the actions stream) or loss follows.
 * Every `poisonEverySec` one malformed record goes to a stream, so the dead-letter counts move.
 *
 * Used by `npm run demo` (local/demo/main.ts) and by the dashboard's browser test.
 */

import { randomUUID } from 'node:crypto';
import { dynamoDbClient, kinesisClient, ssmClient } from '../../shared/aws/clients.js';
import { BudgetRepository } from '../../shared/budget/repository.js';
import { KinesisProducer, type KinesisPutError } from '../../shared/kinesis/producer.js';
import { paceBid } from '../../shared/pacing/ad-server.js';
import { resolvePacerShards } from '../../shared/pacing/control.js';
import { PacingReader, publishedCurve } from '../../shared/pacing/reader.js';
import {
  allocationSettingsFromEnv,
  guardAllocations,
} from '../../shared/pacing/regions/allocation-config.js';
import { TICK_MS } from '../../shared/pacing/types.js';
import { prng, type Random } from '../../shared/random/prng.js';
import { connectRedis } from '../../shared/redis/connect.js';
import { regionResources, resourceName } from '../../shared/region/resources.js';
import { BudgetGuard } from '../../shared/spend/guard.js';
import { SpendLedger } from '../../shared/spend/ledger.js';
import { Reconciler } from '../../shared/spend/reconcile.js';
import { spendSettingsFromEnv } from '../../shared/spend/runtime.js';
import { type Clock, systemClock } from '../../shared/time/clock.js';
import {
  type AuctionModel,
  actionRecord,
  auctionOutcome,
  type DemoCampaign,
  type DemoRecord,
  type DemoShape,
  defaultAuctionModel,
  demoBudgets,
  pickCampaign,
  poisonRecord,
  spendRecord,
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

/** Seeds the target region and starts the traffic; resolves once the first requests can go out. */
export async function startDemoTraffic(options: DemoTrafficOptions): Promise<DemoTraffic> {
  const { target } = options;
  const clock = options.clock ?? systemClock;
  const random: Random = prng(options.seed ?? Math.floor(Math.random() * 2 ** 31));
  const onError = options.onError ?? (() => {});
  const model: AuctionModel = { ...defaultAuctionModel, ...options.auction };
  const rate = options.requestsPerSec ?? 100;
  const users = options.users ?? 5_000;
  const poisonEveryMs = (options.poisonEverySec ?? 30) * 1000;

  const dynamodb = dynamoDbClient(target.endpoints);
  const ssm = ssmClient(target.endpoints);
  const kinesis = kinesisClient(target.endpoints);
  const redis = connectRedis(target.redis);
  redis.on('error', onError);
  const closeClients = () => {
    redis.disconnect();
    dynamodb.destroy();
    ssm.destroy();
    kinesis.destroy();
  };

  try {
    const shards = await resolvePacerShards(target.env, ssm, target.region);
    const repo = new BudgetRepository({
      client: dynamodb,
      tableName: resourceName(regionResources.tables.budgets, target.env),
      pacerShards: shards,
    });
    const campaigns = await seedDemo(repo, options, clock.now());
    const reader = new PacingReader({ redis, clock, shards, tickMs: options.tickMs ?? TICK_MS, onError });
    const ledger = new SpendLedger({
      client: dynamodb,
      tableName: resourceName(regionResources.tables.spendLedger, target.env),
      region: target.region,
      clock,
    });
    const { inFlight } = spendSettingsFromEnv(target.env);
    const reconciler = new Reconciler({
      redis,
      ledger,
      clock,
      inFlight,
      campaignsOfAccount: (a) => repo.listCampaignIds(a),
    });
    // Several local regions: lease within the region's allocation, as ad servers there would.
    const deployment = allocationSettingsFromEnv(target.region, target.env);
    const guard = new BudgetGuard({
      redis,
      clock,
      inFlight,
      initPlanDay: (plan, day) => reconciler.reconcile(plan, day),
      curve: publishedCurve(reader),
      onError,
      allocations: guardAllocations(deployment.mode, deployment.regions, target.region),
    });
    for (const c of campaigns) {
      const budgets = await repo.getCampaignBudgets(c.campaignId);
      if (budgets) guard.setBudgets(budgets);
    }
    await reader.prefetch(campaigns);
    reader.start();
    guard.start();

    const producers = {
      spend: new KinesisProducer({
        client: kinesis,
        streamName: resourceName(regionResources.streams.spend, target.env),
      }),
      actions: new KinesisProducer({
        client: kinesis,
        streamName: resourceName(regionResources.streams.actions, target.env),
      }),
    };
    const stats: DemoStats = {
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
    const startedAt = clock.now();
    // Each campaign's booked spend against its campaign plan's budget (the early no-budget count).
    const spentBy = new Map<string, number>();
    const budgetOf = new Map<string, number>();
    for (const c of campaigns) {
      const plan = (await repo.getCampaignBudgets(c.campaignId))?.common.find((p) => p.level === 'campaign');
      if (plan) budgetOf.set(c.campaignId, plan.dailyBudgetMicros);
    }
    const put = (r: DemoRecord) =>
      producers[r.stream].enqueue(
        { data: r.data, partitionKey: r.partitionKey },
        (error: KinesisPutError) => {
          stats.putErrors++;
          onError(error);
        },
      );
    /** Scheduled notices, so stop() can send them at once instead of dropping them. */
    const notices = new Map<NodeJS.Timeout, () => void>();

    const request = (now: number) => {
      stats.requests++;
      const c = pickCampaign(campaigns, random);
      const refusalsBefore = guard.stats.allocationRefusals;
      const paced = paceBid(reader, guard, c, random);
      if (!paced.bid) {
        if (paced.reason === 'throttled') stats.throttled++;
        else {
          stats.noBudget++;
          const budget = budgetOf.get(c.campaignId) ?? 0;
          if (now - startedAt < EARLY_WINDOW_MS && (spentBy.get(c.campaignId) ?? 0) < 0.05 * budget) {
            stats.earlyNoBudget++;
            if (guard.stats.allocationRefusals > refusalsBefore) stats.earlyAllocationNoBudget++;
          }
        }
        return;
      }
      stats.bids++;
      const base = {
        v: 1 as const,
        bidId: randomUUID(),
        campaignId: c.campaignId,
        bidAt: now,
        bidPriceMicros: paced.priceMicros,
      };
      put(spendRecord({ ...base, type: 'bid' }));
      const outcome = auctionOutcome(paced.priceMicros, model, random);
      const userId = 1 + Math.floor(random() * users);
      const notice = () => {
        notices.delete(timer);
        const at = clock.now();
        if (outcome.kind === 'win') {
          stats.wins++;
          stats.impressions++;
          stats.spentMicros += outcome.clearingPriceMicros;
          spentBy.set(c.campaignId, (spentBy.get(c.campaignId) ?? 0) + outcome.clearingPriceMicros);
          put(spendRecord({ ...base, type: 'win', at, clearingPriceMicros: outcome.clearingPriceMicros }));
          put(actionRecord(c, 'impression', userId, at, random));
          if (outcome.clicked) {
            stats.clicks++;
            put(actionRecord(c, 'click', userId, at, random));
          }
        } else {
          stats.losses++;
          if (outcome.notice) put(spendRecord({ ...base, type: 'loss', at }));
        }
      };
      const timer = setTimeout(notice, outcome.delayMs);
      notices.set(timer, notice);
    };

    // Requests on a fixed step with a fractional carry: the offered rate holds at any step length.
    let carry = 0;
    let lastPoison = clock.now();
    const loop = setInterval(() => {
      const now = clock.now();
      carry += (rate * STEP_MS) / 1000;
      const n = Math.floor(carry);
      carry -= n;
      for (let i = 0; i < n; i++) request(now);
      if (poisonEveryMs > 0 && now - lastPoison >= poisonEveryMs) {
        lastPoison = now;
        put(poisonRecord(stats.poison++, pickCampaign(campaigns, random), now));
      }
    }, STEP_MS);

    return {
      stats,
      campaigns,
      async stop() {
        clearInterval(loop);
        // Notices of bids already out are still sent (an exchange would send them too), at once.
        for (const [timer, notice] of [...notices]) {
          clearTimeout(timer);
          notice();
        }
        await Promise.all([producers.spend.flush(), producers.actions.flush()]);
        reader.close();
        await guard.close();
        closeClients();
      },
    };
  } catch (error) {
    closeClients();
    throw error;
  }
}
