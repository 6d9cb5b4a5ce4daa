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

import type { BudgetRepository } from '../budget/repository.js';
import { type ActionEvent, actionPartitionKey, encodeActionEvent } from '../counting/event-encode.js';
import type { CapCheckResult } from '../counting/query.js';
import type { ActionStore, CapCheckRequest } from '../counting/store.js';
import { errorKind } from '../errors.js';
import type { KinesisPutError } from '../kinesis/producer.js';
import { paceBid } from '../pacing/ad-server.js';
import type { PacingReader, PacingStatus } from '../pacing/reader.js';
import { encodeSpendEvent, type SpendEvent } from '../spend/events.js';
import type { BudgetGuard } from '../spend/guard.js';
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
import { CampaignTracking, type ClientParts, connectParts, every, resolveClientShards } from './parts.js';

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
export class InvalidBidInputError extends errorKind('InvalidBidInputError', 'client.invalid-bid-input') {}

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

/** Refuses a bid input that is a programming error in the caller. */
function validateBidInput(input: BidInput): void {
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
}

/** What the request path of a client shares: its parts, tracking, clock and event senders. */
interface RequestPath {
  readonly config: PacelineClientConfig;
  readonly parts: ClientParts;
  readonly tracking: CampaignTracking;
  readonly clock: Clock;
  readonly decided: (record: DecisionRecord) => void;
  readonly sendSpendEvent: (event: SpendEvent) => void;
  readonly isClosed: () => boolean;
}

/** `bid()`: pacing read → throttle → price × multiplier → guard, then the bid event and notices. */
function bidder(path: RequestPath): (input: BidInput) => BidOutcome {
  const { config, parts, tracking, clock, decided } = path;
  const random = config.random ?? Math.random;
  const bidEvents = config.bidEvents ?? true;
  const autoTrack = config.autoTrack ?? true;
  return (input) => {
    validateBidInput(input);
    const arm = input.armId === undefined ? {} : { armId: input.armId };
    const accountId = tracking.accountOf(input.campaignId);
    if (accountId === undefined) {
      if (autoTrack && !path.isClosed()) tracking.trackInBackground(input.campaignId);
      decided({ campaignId: input.campaignId, ...arm, outcome: 'unknown-campaign', pacing: 'missing' });
      return { bid: false, reason: 'unknown-campaign', pacing: 'missing' };
    }
    const paced = paceBid(
      parts.pacing,
      parts.guard,
      { accountId, campaignId: input.campaignId, ...arm, basePriceMicros: input.basePriceMicros },
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
    if (bidEvents) path.sendSpendEvent({ v: 1, type: 'bid', ...notice });
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
  };
}

/** The client's totals since start, from its counters and its parts' stats. */
function metricsOf(parts: ClientParts, counters: ReturnType<typeof newCounters>): ClientMetrics {
  const r = parts.pacing.metrics;
  return buildMetrics({
    decisions: counters.decisions,
    pacingLookups: r.lookups,
    pacingHits: r.hits,
    pacingFailSafeServes: r.staleServes,
    leaseCalls: parts.guard.stats.leaseCalls,
    eventsSent: parts.actionsProducer.stats.entriesSent + parts.spendProducer.stats.entriesSent,
    eventsFailed: counters.eventsFailed,
    errors: counters.errors,
    capsWithoutIdentity: parts.actions.noIdentityCounts,
  });
}

/** Starts the reader, the guard's maintenance, the budget refresh and the metrics snapshots. */
function startBackground(
  config: PacelineClientConfig,
  parts: ClientParts,
  tracking: CampaignTracking,
  client: PacelineClient,
  report: (error: unknown) => void,
): NodeJS.Timeout[] {
  const timers: NodeJS.Timeout[] = [];
  parts.pacing.start();
  parts.guard.start(config.guard?.maintainIntervalMs ?? 1_000);
  timers.push(every(config.budgetRefreshMs ?? 30_000, () => tracking.refresh(), report));
  const hooks = config.metrics;
  if (hooks?.onSnapshot) {
    let previous = client.metrics();
    const snapshot = () => {
      const now = client.metrics();
      hooks.onSnapshot?.(now, metricsDelta(previous, now));
      previous = now;
    };
    timers.push(every(hooks.intervalMs ?? 60_000, snapshot, report));
  }
  return timers;
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
  const shards = await resolveClientShards(config);
  if (config.noticeBaseUrl !== undefined) noticeUrls(config.noticeBaseUrl, probeBid); // fail fast on a bad base
  const parts = connectParts(config, { shards, resources, clock, report });
  const { actions, guard, pacing, budgets, actionsProducer, spendProducer } = parts;
  const tracking = new CampaignTracking(parts, report);
  const onPutError = (error: KinesisPutError) => {
    counters.eventsFailed++;
    report(error);
  };
  const sendSpendEvent = (event: SpendEvent) =>
    spendProducer.enqueue(
      { data: encodeSpendEvent(event), partitionKey: spendPartitionKey(event) },
      onPutError,
    );
  let closed = false;
  let timers: NodeJS.Timeout[] = [];
  const decided = (record: DecisionRecord) => {
    counters.decisions[record.outcome]++;
    config.metrics?.onDecision?.(record);
  };
  const client: PacelineClient = {
    actions,
    guard,
    pacing,
    budgets,
    resources,
    pacerShards: shards,
    track: (ids) => tracking.track(ids),
    checkFrequencyCaps: (request) => actions.checkFrequencyCaps(request),
    bid: bidder({ config, parts, tracking, clock, decided, sendSpendEvent, isClosed: () => closed }),
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
        { data: encodeActionEvent(event), partitionKey: actionPartitionKey(event) },
        onPutError,
      );
    },
    metrics: () => metricsOf(parts, counters),
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
      if (parts.ownRedis) await parts.redis.quit().catch(() => parts.redis.disconnect());
      parts.dynamodb.destroy();
      if (!config.kinesis) parts.kinesis.destroy();
    },
  };
  try {
    timers = startBackground(config, parts, tracking, client, report);
    if (config.campaigns && config.campaigns.length > 0) await tracking.track(config.campaigns);
  } catch (error) {
    await client.close();
    throw error;
  }
  return client;
}

/** A syntactically valid bid, to check `noticeBaseUrl` once at start. */
const probeBid: NoticeBid = { bidId: 'probe', campaignId: 'probe', bidAt: 0, bidPriceMicros: 0 };
