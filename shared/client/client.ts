/**
 * `createPacelineClient(config)`: everything an ad server needs on its request path, wired once
 * per process (docs/client.md):
 *
 *   cap check (ActionStore) → pacing read (PacingReader, cached) → budget guard (BudgetGuard,
 *   local floats) → bid price × multiplier → notice URLs → events (Kinesis producers).
 *
 * The guard's E(t) is the pacer's published curve (`publishedCurve`), so pacing and the hard cap
 * agree; stale parameters fall back to the linear curve and a conservative throttle. Budgets of
 * tracked campaigns are loaded from the budgets table, re-read every `budgetRefreshMs` (budget
 * changes, pauses, new arm plans) and warmed up (floats leased before the first decision).
 * Background failures never throw on the request path: it answers conservatively and reports
 * them to `onError`.
 */

import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { dynamoDbClient, kinesisClient, ssmClient } from '../aws/clients.js';
import type { CampaignBudgets } from '../budget/model.js';
import { BudgetRepository } from '../budget/repository.js';
import type { CapCheckResult } from '../counting/query.js';
import { type ActionEvent, encodeActionEvent } from '../counting/schema.js';
import { ActionStore, type CapCheckRequest } from '../counting/store.js';
import { PacelineError } from '../errors.js';
import { KinesisProducer, type KinesisPutError } from '../kinesis/producer.js';
import { paceBid } from '../pacing/ad-server.js';
import { resolvePacerShards } from '../pacing/control.js';
import { PacingReader, type PacingStatus, publishedCurve } from '../pacing/reader.js';
import { guardAllocations } from '../pacing/regions/allocation-config.js';
import { connectRedis, type RedisClient, type RedisConfig } from '../redis/connect.js';
import { encodeSpendEvent, type SpendEvent } from '../spend/events.js';
import { BudgetGuard } from '../spend/guard.js';
import { SpendLedger } from '../spend/ledger.js';
import { defaultInFlight, Reconciler } from '../spend/reconcile.js';
import { type Clock, systemClock } from '../time/clock.js';
import { type ClientResources, type PacelineClientConfig, resourcesFromEnv } from './config.js';
import {
  buildMetrics,
  type ClientMetrics,
  type DecisionOutcome,
  type DecisionRecord,
  metricsDelta,
  newCounters,
} from './metrics.js';
import { type NoticeBid, type NoticeUrls, noticeEvent, noticeUrls, spendPartitionKey } from './notices.js';

/** One bid opportunity, as the ad server asks about it. */
export interface BidInput {
  /** The OpenRTB bid id you will send (unique per campaign; printable ASCII, ≤ 128 characters). */
  readonly bidId: string;
  readonly campaignId: string;
  /** Experiment arm / line, when the campaign has arm plans. */
  readonly armId?: string;
  /** What you would bid without pacing, integer micros per impression (CPM × 1000). */
  readonly basePriceMicros: number;
}

/** What `bid()` answers. */
export type BidOutcome =
  | {
      readonly bid: true;
      readonly bidId: string;
      /** Paced price (base × multiplier), integer micros per impression: what to bid. */
      readonly priceMicros: number;
      /** The decide time: what notices must carry (it is in the notice URLs). */
      readonly bidAt: number;
      readonly pacing: PacingStatus;
      /** `nurl` / `burl` / `lurl` for the bid response (when `noticeBaseUrl` is configured). */
      readonly notices?: NoticeUrls;
    }
  | {
      readonly bid: false;
      readonly reason: Exclude<DecisionOutcome, 'bid'>;
      readonly pacing: PacingStatus;
    };

/** Outcome of {@link PacelineClient.track}. */
export interface TrackResult {
  /** Campaigns now tracked (budgets loaded, floats leased, pacing read). */
  readonly tracked: readonly string[];
  /** Campaigns the budgets table does not know (bids for them answer `unknown-campaign`). */
  readonly unknown: readonly string[];
}

/** A bid request the client refuses (a programming error in the caller, not a runtime fault). */
export class InvalidBidInputError extends PacelineError {
  override readonly name = 'InvalidBidInputError';
  override readonly code = 'client.invalid-bid-input';
}

/** The ad-server client; build it with {@link createPacelineClient}. */
export interface PacelineClient {
  /** Counts and frequency caps (the store behind {@link checkFrequencyCaps}). */
  readonly actions: ActionStore;
  /** The budget guard (ready: budgets loaded, floats leased for tracked campaigns). */
  readonly guard: BudgetGuard;
  /** The pacing reader (refresh-ahead running). */
  readonly pacing: PacingReader;
  /**
   * The budgets table, for reads: the ad-server access policy grants no write to it (writes are
   * the operator's: `npm run budgets`, or a repository with the operator's credentials).
   */
  readonly budgets: BudgetRepository;
  readonly resources: ClientResources;
  readonly pacerShards: number;
  /** Loads, warms up and tracks campaigns (idempotent; refreshes ones already tracked). */
  track(campaignIds: readonly string[]): Promise<TrackResult>;
  /** Frequency caps of every candidate of one ad request (one Redis read). */
  checkFrequencyCaps(request: CapCheckRequest): Promise<CapCheckResult>;
  /**
   * Pacing read → throttle → price × multiplier → guard, synchronously (no I/O). A `bid` answer
   * reserved the price as in-flight spend and (with `bidEvents`) queued the `bid` event.
   */
  bid(input: BidInput): BidOutcome;
  /** The notice URLs of a bid (needs `noticeBaseUrl`). */
  noticeUrls(bid: NoticeBid): NoticeUrls;
  /**
   * For your notice endpoint: turns a notice the exchange called into its spend event and queues
   * it; returns the event. Unvalidated on purpose: track-spend validates and quarantines.
   */
  sendNotice(url: string | URL): SpendEvent;
  /** Queues a spend event (partition key `<campaignId>/<bidId>`). */
  sendSpendEvent(event: SpendEvent): void;
  /** Queues a user action (impression, click…; partition key: the decimal user id). */
  sendAction(event: ActionEvent): void;
  /** Totals since start. */
  metrics(): ClientMetrics;
  /** Resolves once every queued event is on its stream (or failed and was reported). */
  flush(): Promise<void>;
  /** Flushes events, returns unused budget floats, stops timers and closes connections. */
  close(): Promise<void>;
}

const BID_ID = /^[\x21-\x7e]{1,128}$/;

/** A one-line warning on stderr, at most one per 10 s (the rest counted into the next one). */
function defaultOnError(clock: Clock): (error: unknown) => void {
  let last = Number.NEGATIVE_INFINITY;
  let suppressed = 0;
  return (error) => {
    const now = clock.now();
    if (now - last < 10_000) {
      suppressed++;
      return;
    }
    last = now;
    const more = suppressed > 0 ? ` (+${suppressed} more since the last warning)` : '';
    suppressed = 0;
    const e = error as Error;
    console.warn(`paceline client: ${e?.name ?? 'Error'}: ${e?.message ?? String(error)}${more}`);
  };
}

function isRedisClient(value: RedisConfig | RedisClient): value is RedisClient {
  return typeof (value as RedisClient).defineCommand === 'function';
}

async function mapLimit<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++] as T);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** What budgets a decision depends on, as a comparable string (a change means re-register). */
function fingerprint(b: CampaignBudgets): string {
  return JSON.stringify([b.account.timeZone, b.campaign.status, b.common, [...b.arms]]);
}

/**
 * Builds and readies a client: connects, resolves the pacer shard count (SSM when not given),
 * and tracks `config.campaigns`. Throws only for configuration errors (and an unreadable shard
 * count); an unreachable Redis shows as `no-budget` answers and `onError` reports.
 */
export async function createPacelineClient(config: PacelineClientConfig): Promise<PacelineClient> {
  const clock = config.clock ?? systemClock;
  const onError = config.onError ?? defaultOnError(clock);
  const counters = newCounters();
  const report = (error: unknown) => {
    counters.errors++;
    onError(error);
  };
  const resources: ClientResources = { ...resourcesFromEnv({}), ...config.resources };
  let pacerShards = config.pacerShards;
  if (pacerShards === undefined) {
    const ssm = ssmClient(config.endpoints);
    try {
      pacerShards = await resolvePacerShards({}, ssm, config.endpoints.region);
    } finally {
      ssm.destroy();
    }
  }
  const shards = pacerShards;
  if (config.noticeBaseUrl !== undefined) noticeUrls(config.noticeBaseUrl, probeBid); // fail fast on a bad base

  const ownRedis = !isRedisClient(config.redis);
  const redis = isRedisClient(config.redis) ? config.redis : connectRedis(config.redis);
  if (ownRedis) redis.on('error', report);
  const dynamodb: DynamoDBClient = dynamoDbClient(config.endpoints);
  const kinesis = config.kinesis ?? kinesisClient(config.endpoints);
  const budgets = new BudgetRepository({
    client: dynamodb,
    tableName: resources.budgetsTable,
    pacerShards: shards,
  });
  // The guard rebuilds this region's live counters from this region's wins in the ledger.
  const ledger = new SpendLedger({
    client: dynamodb,
    tableName: resources.spendLedgerTable,
    region: config.endpoints.region,
    clock,
  });
  const inFlight = config.inFlight ?? defaultInFlight;
  const reconciler = new Reconciler({
    redis,
    ledger,
    clock,
    inFlight,
    campaignsOfAccount: (accountId) => budgets.listCampaignIds(accountId),
  });
  const pacing = new PacingReader({ ...config.pacing, redis, clock, shards, onError: report });
  const { maintainIntervalMs, ...guardTuning } = config.guard ?? {};
  const guard = new BudgetGuard({
    ...guardTuning,
    redis,
    clock,
    inFlight,
    curve: publishedCurve(pacing),
    initPlanDay: (plan, day) => reconciler.reconcile(plan, day),
    onError: report,
    allocations: guardAllocations(
      config.allocations ?? 'off',
      config.regions ?? [config.endpoints.region],
      config.endpoints.region,
    ),
  });
  const actions = new ActionStore({ ...config.actions, redis, clock });
  const producer = (streamName: string) =>
    new KinesisProducer({ ...config.producer, client: kinesis, streamName });
  const actionsProducer = producer(resources.actionsStream);
  const spendProducer = producer(resources.spendStream);
  const onPutError = (error: KinesisPutError) => {
    counters.eventsFailed++;
    report(error);
  };

  /** Tracked campaigns: account id (pacing keys) and the fingerprint of the registered budgets. */
  const tracked = new Map<string, { accountId: string; fingerprint: string }>();
  const autoTracking = new Set<string>();
  const random = config.random ?? Math.random;
  const bidEvents = config.bidEvents ?? true;
  let closed = false;

  /** Loads budgets; registers new or changed ones; returns the ids whose budgets changed. */
  async function load(ids: readonly string[], unknown: string[]): Promise<string[]> {
    const changed: string[] = [];
    await mapLimit(ids, 8, async (id) => {
      const b = await budgets.getCampaignBudgets(id);
      if (!b) {
        unknown.push(id);
        return;
      }
      const f = fingerprint(b);
      if (tracked.get(id)?.fingerprint === f) return;
      guard.setBudgets(b);
      tracked.set(id, { accountId: b.account.accountId, fingerprint: f });
      changed.push(id);
    });
    return changed;
  }

  async function warm(ids: readonly string[]): Promise<void> {
    await pacing.prefetch(
      ids.map((id) => ({ accountId: (tracked.get(id) as { accountId: string }).accountId, campaignId: id })),
    );
    await Promise.all(ids.map((id) => guard.warmUp(id)));
  }

  async function track(ids: readonly string[]): Promise<TrackResult> {
    const unknown: string[] = [];
    const changed = await load([...new Set(ids)], unknown);
    await warm(changed);
    return { tracked: ids.filter((id) => tracked.has(id)), unknown };
  }

  async function refreshBudgets(): Promise<void> {
    const unknown: string[] = [];
    const changed = await load([...tracked.keys()], unknown);
    for (const id of unknown) {
      report(new Error(`Campaign ${id} is no longer in the budgets table; its last budgets stay in force.`));
    }
    await warm(changed);
  }

  const timers: NodeJS.Timeout[] = [];
  const every = (ms: number, fn: () => Promise<void> | void) => {
    // A round slower than the interval (DynamoDB slow) is not overlapped by the next one.
    let running = false;
    const t = setInterval(() => {
      if (running) return;
      running = true;
      Promise.resolve()
        .then(fn)
        .catch((e: unknown) => report(e))
        .finally(() => {
          running = false;
        });
    }, ms);
    t.unref();
    timers.push(t);
  };

  function metrics(): ClientMetrics {
    const r = pacing.metrics;
    return buildMetrics({
      decisions: counters.decisions,
      pacingLookups: r.lookups,
      pacingHits: r.hits,
      pacingFailSafeServes: r.staleServes,
      leaseCalls: guard.stats.leaseCalls,
      eventsSent: actionsProducer.stats.entriesSent + spendProducer.stats.entriesSent,
      eventsFailed: counters.eventsFailed,
      errors: counters.errors,
    });
  }

  const onDecision = config.metrics?.onDecision;
  const decided = (record: DecisionRecord) => {
    counters.decisions[record.outcome]++;
    onDecision?.(record);
  };

  function sendSpendEvent(event: SpendEvent): void {
    spendProducer.enqueue(
      { data: encodeSpendEvent(event), partitionKey: spendPartitionKey(event) },
      onPutError,
    );
  }

  const client: PacelineClient = {
    actions,
    guard,
    pacing,
    budgets,
    resources,
    pacerShards: shards,
    track,
    checkFrequencyCaps: (request) => actions.checkFrequencyCaps(request),
    bid(input) {
      if (!BID_ID.test(input.bidId)) {
        throw new InvalidBidInputError(
          `bidId ${JSON.stringify(input.bidId).slice(0, 80)} must be 1–128 printable ASCII characters (the OpenRTB bid id).`,
        );
      }
      if (!Number.isSafeInteger(input.basePriceMicros) || input.basePriceMicros <= 0) {
        throw new InvalidBidInputError(
          `basePriceMicros ${input.basePriceMicros} must be a positive integer (micros per impression = CPM × 1000).`,
        );
      }
      const arm = input.armId === undefined ? {} : { armId: input.armId };
      const t = tracked.get(input.campaignId);
      if (!t) {
        if ((config.autoTrack ?? true) && !closed && !autoTracking.has(input.campaignId)) {
          autoTracking.add(input.campaignId);
          track([input.campaignId])
            .catch(report)
            .finally(() => autoTracking.delete(input.campaignId));
        }
        decided({ campaignId: input.campaignId, ...arm, outcome: 'unknown-campaign', pacing: 'missing' });
        return { bid: false, reason: 'unknown-campaign', pacing: 'missing' };
      }
      const paced = paceBid(
        pacing,
        guard,
        {
          accountId: t.accountId,
          campaignId: input.campaignId,
          ...arm,
          basePriceMicros: input.basePriceMicros,
        },
        random,
      );
      if (!paced.bid) {
        decided({ campaignId: input.campaignId, ...arm, outcome: paced.reason, pacing: paced.status });
        return { bid: false, reason: paced.reason, pacing: paced.status };
      }
      const bidAt = clock.now();
      const notice: NoticeBid = {
        bidId: input.bidId,
        campaignId: input.campaignId,
        ...arm,
        bidAt,
        bidPriceMicros: paced.priceMicros,
      };
      if (bidEvents) sendSpendEvent({ v: 1, type: 'bid', ...notice });
      decided({
        campaignId: input.campaignId,
        ...arm,
        outcome: 'bid',
        pacing: paced.status,
        priceMicros: paced.priceMicros,
      });
      return {
        bid: true,
        bidId: input.bidId,
        priceMicros: paced.priceMicros,
        bidAt,
        pacing: paced.status,
        ...(config.noticeBaseUrl === undefined ? {} : { notices: noticeUrls(config.noticeBaseUrl, notice) }),
      };
    },
    noticeUrls(bid) {
      if (config.noticeBaseUrl === undefined) {
        throw new InvalidBidInputError('noticeUrls needs noticeBaseUrl in the client configuration.');
      }
      return noticeUrls(config.noticeBaseUrl, bid);
    },
    sendNotice(url) {
      const event = noticeEvent(url, clock.now());
      sendSpendEvent(event);
      return event;
    },
    sendSpendEvent,
    sendAction(event) {
      actionsProducer.enqueue(
        { data: encodeActionEvent(event), partitionKey: String(event.userId) },
        onPutError,
      );
    },
    metrics,
    async flush() {
      await Promise.all([actionsProducer.flush(), spendProducer.flush()]);
    },
    async close() {
      if (closed) return;
      closed = true;
      for (const t of timers) clearInterval(t);
      pacing.close();
      await guard.close().catch(report);
      await client.flush().catch(report);
      if (ownRedis) await redis.quit().catch(() => redis.disconnect());
      dynamodb.destroy();
      if (!config.kinesis) kinesis.destroy();
    },
  };

  try {
    pacing.start();
    guard.start(maintainIntervalMs ?? 1_000);
    every(config.budgetRefreshMs ?? 30_000, refreshBudgets);
    const hooks = config.metrics;
    if (hooks?.onSnapshot) {
      let previous = metrics();
      every(hooks.intervalMs ?? 60_000, () => {
        const now = metrics();
        hooks.onSnapshot?.(now, metricsDelta(previous, now));
        previous = now;
      });
    }
    if (config.campaigns && config.campaigns.length > 0) await track(config.campaigns);
  } catch (error) {
    await client.close();
    throw error;
  }
  return client;
}

/** A syntactically valid bid, to check `noticeBaseUrl` once at start. */
const probeBid: NoticeBid = { bidId: 'probe', campaignId: 'probe', bidAt: 0, bidPriceMicros: 0 };
