/**
 * Spend tracking (the domain of the track-spend function): exactly-once confirmed spend on
 * at-least-once delivery.
 *
 * A win notice is (1) written to the ledger with a conditional put (idempotent per bid), then
 * (2) applied to the live counters of every plan it falls under (account, campaign, arm) by
 * one Lua script per plan that deduplicates on the bid and adds + releases atomically. A
 * redelivery finds the ledger item (and uses *its* price) and the dedup field, so it changes
 * nothing; a crash between (1) and (2) is repaired by the retry, because (2) is idempotent on
 * its own. A loss notice releases the bid's in-flight amount (no ledger item: no money moved).
 * The ledger is a global table: a win counts in the live counters of the region that booked it,
 * and a notice for a bid another region booked first is not counted here (docs/spend.md, "Across
 * regions").
 *
 * Late notices are explicit: a win arriving after the in-flight lifetime T is still real spend
 * (ledger + confirmed, flagged `late`); its in-flight amount had already expired, so nothing is
 * released twice. Bid events carry no money; they are validated (unknown campaign, prices) and
 * counted.
 */

import { type CampaignBudgets, plansForBid, type ResolvedPlan } from '../budget/model.js';
import { dayWindow } from '../budget/time-zone.js';
import { errorKind } from '../errors.js';
import type { RedisClient } from '../redis/connect.js';
import type { Clock } from '../time/clock.js';
import {
  checkSpendTimes,
  decodeSpendEvent,
  defaultSpendLimits,
  type LossEvent,
  type SpendEvent,
  type SpendLimits,
  UnknownCampaignError,
  type WinEvent,
} from './events.js';
import { noticeField, planDayKeys } from './keys.js';
import type { LedgerEntry, LedgerStore } from './ledger.js';
import { type ScriptTransport, type SpendScripts, spendScripts } from './live-counters.js';
import type { WinOutbox } from './outbox.js';
import {
  DEFAULT_MEMORY_RETENTION_MS,
  defaultInFlight,
  type InFlightConfig,
  keepFor,
  type Reconciler,
} from './reconcile.js';

/** Looks up a campaign's budgets (cached by the caller); undefined = unknown campaign. */
export type BudgetLookup = (campaignId: string) => Promise<CampaignBudgets | undefined>;

/** Thrown when a plan-day stays uninitialised after a rebuild (Redis flapping): retried by Lambda. */
export class LiveCountersUnavailableError extends errorKind(
  'LiveCountersUnavailableError',
  'spend.live-counters-unavailable',
) {}

/** Options of {@link SpendTracker}. */
export interface SpendTrackerOptions {
  readonly redis: RedisClient;
  /**
   * How notices reach the apply script: `raw` over the shared raw connections
   * (shared/redis/resp/script-caller.ts), `client` through ioredis. Same script, same replies.
   * @default 'raw'
   */
  readonly scriptTransport?: ScriptTransport;
  readonly ledger: LedgerStore;
  readonly reconciler: Reconciler;
  readonly budgets: BudgetLookup;
  readonly clock: Clock;
  /** @default defaultInFlight */
  readonly inFlight?: InFlightConfig;
  /** @default defaultSpendLimits */
  readonly limits?: SpendLimits;
  /** @default DEFAULT_MEMORY_RETENTION_MS */
  readonly memoryRetentionMs?: number;
  /**
   * Intents of wins not yet applied to Redis (SpendOutbox). With it, a win whose apply fails for
   * longer than Lambda retries is still applied by the sweeper; without it (tests, simulations),
   * only a retried record or a rebuild repairs the counters. @default none
   */
  readonly outbox?: WinOutbox;
}

/** What handling one event did (for metrics and tests). */
export interface TrackOutcome {
  readonly type: SpendEvent['type'];
  /** A win already in the ledger / a notice already applied everywhere. */
  readonly duplicate: boolean;
  /** The notice came after the in-flight lifetime T. */
  readonly late: boolean;
  /** Confirmed spend added by this call (0 for duplicates, bids and losses). */
  readonly addedMicros: number;
  /** Plan-days rebuilt from the ledger on the way (reset detected). */
  readonly rebuilt: number;
}

/** What a notice applies to a plan's live counters (a win's ledger entry, or a loss). */
type PlanNotice = Pick<
  LedgerEntry,
  'campaignId' | 'bidId' | 'day' | 'clearingPriceMicros' | 'bidPriceMicros' | 'bidAt'
>;

/** The spend tracker. */
export class SpendTracker {
  private readonly inFlight: InFlightConfig;
  private readonly limits: SpendLimits;
  private readonly memoryRetentionMs: number;
  private readonly scripts: SpendScripts;

  constructor(private readonly options: SpendTrackerOptions) {
    this.inFlight = options.inFlight ?? defaultInFlight;
    this.limits = options.limits ?? defaultSpendLimits;
    this.memoryRetentionMs = options.memoryRetentionMs ?? DEFAULT_MEMORY_RETENTION_MS;
    this.scripts = spendScripts(options.redis, options.scriptTransport);
  }

  /** Decodes, validates and applies one record. Throws SpendRecordError subclasses for bad records. */
  async handle(data: Uint8Array): Promise<TrackOutcome> {
    return this.apply(decodeSpendEvent(data, this.limits));
  }

  /** Applies one decoded event. Idempotent. Times outside the booking window are rejected first. */
  async apply(event: SpendEvent): Promise<TrackOutcome> {
    checkSpendTimes(event, this.options.clock.now(), this.limits);
    const budgets = await this.options.budgets(event.campaignId);
    if (!budgets) {
      throw new UnknownCampaignError(
        'spend.unknown-campaign',
        `Campaign ${event.campaignId} is not in the budgets table: create it (cli/budgets.ts) and replay the record.`,
      );
    }
    if (event.type === 'bid')
      return { type: 'bid', duplicate: false, late: false, addedMicros: 0, rebuilt: 0 };
    return event.type === 'win' ? this.win(event, budgets) : this.loss(event, budgets);
  }

  private async win(event: WinEvent, budgets: CampaignBudgets): Promise<TrackOutcome> {
    const day = dayWindow(event.bidAt, budgets.account.timeZone).day;
    const late = event.at - event.bidAt > this.inFlight.ttlMs;
    const entry: LedgerEntry = {
      campaignId: event.campaignId,
      accountId: budgets.account.accountId,
      ...(event.armId === undefined ? {} : { armId: event.armId }),
      bidId: event.bidId,
      day,
      clearingPriceMicros: event.clearingPriceMicros,
      bidPriceMicros: event.bidPriceMicros,
      bidAt: event.bidAt,
      noticeAt: event.at,
      late,
    };
    return this.book(entry, budgets);
  }

  /**
   * Finishes a win the sweeper found in the outbox: the same ledger write and apply as a live
   * notice (both idempotent), then the intent is closed.
   */
  async settlePending(entry: LedgerEntry): Promise<TrackOutcome> {
    const budgets = await this.options.budgets(entry.campaignId);
    if (!budgets) {
      throw new UnknownCampaignError(
        'spend.unknown-campaign',
        `Campaign ${entry.campaignId} of pending win ${entry.bidId} is not in the budgets table: restore it; ` +
          'the sweeper keeps the intent until then.',
      );
    }
    return this.book(entry, budgets, false);
  }

  /**
   * Intent (outbox) → ledger → every plan's counters → intent closed. A failure anywhere leaves
   * the intent for the sweeper; the ledger's stored entry (first notice) is what gets applied,
   * and only when the stored entry is this region's.
   */
  private async book(entry: LedgerEntry, budgets: CampaignBudgets, openIntent = true): Promise<TrackOutcome> {
    const { outbox } = this.options;
    if (outbox && openIntent) await outbox.open(entry, this.options.clock.now());
    const { created, entry: stored, own } = await this.options.ledger.record(entry);
    // A bid another region booked first is counted by that region's live counters (and reaches
    // this region's pacer through its region-spend summary): counting it here too would count it
    // twice across regions, and this region's rebuild would drop it again.
    const { applied, rebuilt } = own
      ? await this.applyToPlans(plansForBid(budgets, stored.armId), stored, 'W')
      : { applied: 0, rebuilt: 0 };
    if (outbox) await outbox.close(stored);
    return {
      type: 'win',
      duplicate: !created && applied === 0,
      late: stored.late,
      addedMicros: created ? stored.clearingPriceMicros : 0,
      rebuilt,
    };
  }

  private async loss(event: LossEvent, budgets: CampaignBudgets): Promise<TrackOutcome> {
    const day = dayWindow(event.bidAt, budgets.account.timeZone).day;
    const late = event.at - event.bidAt > this.inFlight.ttlMs;
    const target = {
      campaignId: event.campaignId,
      bidId: event.bidId,
      day,
      clearingPriceMicros: 0,
      bidPriceMicros: event.bidPriceMicros,
      bidAt: event.bidAt,
    };
    const { applied, rebuilt } = await this.applyToPlans(plansForBid(budgets, event.armId), target, 'L');
    return { type: 'loss', duplicate: applied === 0, late, addedMicros: 0, rebuilt };
  }

  /**
   * Applies a notice to every plan it falls under (account, campaign, arm) at once: one round
   * trip instead of one per plan. Each plan's script is atomic and idempotent on its own and the
   * plans' keys are disjoint, so the order between plans does not matter; when one fails, the
   * others still finish (a retry or the sweeper re-applies only what is missing), and the first
   * failure is rethrown.
   */
  private async applyToPlans(
    plans: readonly ResolvedPlan[],
    e: PlanNotice,
    kind: 'W' | 'L',
  ): Promise<{ applied: number; rebuilt: number }> {
    if (plans.length === 1) {
      // Most notices fall under one plan: no settled-results array for it.
      const { reply, rebuilt } = await this.applyToPlan(plans[0] as ResolvedPlan, e, kind);
      return { applied: reply === 1 || reply === 2 ? 1 : 0, rebuilt };
    }
    const results = await Promise.allSettled(plans.map((plan) => this.applyToPlan(plan, e, kind)));
    let applied = 0;
    let rebuilt = 0;
    for (const r of results) {
      if (r.status === 'rejected') throw r.reason;
      if (r.value.reply === 1 || r.value.reply === 2) applied++;
      rebuilt += r.value.rebuilt;
    }
    return { applied, rebuilt };
  }

  private async applyToPlan(
    plan: ResolvedPlan,
    e: PlanNotice,
    kind: 'W' | 'L',
  ): Promise<{ reply: number; rebuilt: number }> {
    const { clock, reconciler } = this.options;
    const keys = planDayKeys(plan, e.day);
    const keepMs = keepFor(dayWindow(e.bidAt, plan.timeZone).endMs, clock.now(), this.memoryRetentionMs);
    const run = () =>
      this.scripts.apply(keys.state, keys.notices, [
        clock.now(),
        noticeField(plan, e.campaignId, e.bidId),
        kind,
        e.clearingPriceMicros,
        e.bidPriceMicros,
        e.bidAt,
        keepMs,
      ]);
    let reply = await run();
    if (reply !== -1) return { reply, rebuilt: 0 };
    // Reset sentinel missing: rebuild from the ledger (which already holds this win), then retry.
    const result = await reconciler.reconcile(plan, e.day);
    reply = await run();
    if (reply === -1) {
      throw new LiveCountersUnavailableError(
        `Live counters of ${keys.state} stayed uninitialised after a rebuild; Redis is restarting? Retrying the record.`,
      );
    }
    return { reply, rebuilt: result.installed ? 1 : 0 };
  }
}

/** A small time-based cache in front of a budget lookup (budgets change rarely; clock-injected). */
export function cachedBudgets(lookup: BudgetLookup, clock: Clock, ttlMs = 60_000): BudgetLookup {
  const cache = new Map<string, { at: number; value: CampaignBudgets }>();
  return async (campaignId) => {
    const hit = cache.get(campaignId);
    const now = clock.now();
    if (hit && now - hit.at < ttlMs) return hit.value;
    const value = await lookup(campaignId);
    // Unknown campaigns are not cached: a campaign created a moment ago must be found next time.
    if (value) cache.set(campaignId, { at: now, value });
    else cache.delete(campaignId);
    return value;
  };
}
