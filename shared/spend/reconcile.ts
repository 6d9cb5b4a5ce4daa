/**
 * Rebuilds live counters from the ledger. Used three ways:
 * - automatically, when a script replies "needs init" (the plan-day's reset sentinel `r` is
 *   missing: start of a day, Redis restarted or failed over empty, the key was evicted);
 * - by the guard at the start of a plan-day (the ledger is then empty: confirmed = 0);
 * - by an operator (`force`): drop the sentinel, then rebuild.
 *
 * Why this cannot lose or double a win: track-spend writes the ledger *before* it applies a win
 * to Redis, and apply refuses to run on a hash without the sentinel. An apply that succeeded
 * therefore happened before the sentinel was (re)set, so its ledger item was written before the
 * rebuild read the ledger; an apply that was refused is retried after the rebuild and is
 * deduplicated against the notices hash the rebuild restored. Staging + one Lua script make the
 * switch atomic; of two concurrent rebuilds the first wins, the second is discarded.
 *
 * The ledger is a global table holding every region's wins; a rebuild reads the region's own
 * (SpendLedger.entries), the wins its track-spend applied — the other regions' spend reaches the
 * pacer through their region-spend summaries, and counting it here too would count it twice.
 */

import { randomBytes } from 'node:crypto';
import type { Result } from 'ioredis';
import type { ResolvedPlan } from '../budget/model.js';
import type { BudgetRepository } from '../budget/repository.js';
import { dayWindowOf } from '../budget/time-zone.js';
import { errorKind } from '../errors.js';
import type { RedisClient } from '../redis/connect.js';
import { defineScripts } from '../redis/scripts/registry.js';
import type { Clock } from '../time/clock.js';
import { noticeField, planDayKeys } from './keys.js';
import type { LedgerEntry, SpendLedger } from './ledger.js';
import { defineSpendCommands } from './live-counters.js';

/** In-flight bookkeeping shared by the guard, track-spend and reconcile (stored in each state hash). */
export interface InFlightConfig {
  /** In-flight lifetime T: a bid's amount counts until T after the bid unless a notice releases it. */
  readonly ttlMs: number;
  /** Width of an expiry time slot (in-flight is kept per slot, not per bid). */
  readonly slotMs: number;
}

/** Defaults: T = 10 minutes in 1-minute slots. */
export const defaultInFlight: InFlightConfig = { ttlMs: 10 * 60_000, slotMs: 60_000 };

/** How long a plan-day's Redis keys live after the day ends (memory only). @default 2 days */
export const DEFAULT_MEMORY_RETENTION_MS = 2 * 86_400_000;

/** Options of {@link Reconciler}. */
export interface ReconcilerOptions {
  readonly redis: RedisClient;
  /** The ledger: its entries, and the plan-day start markers. */
  readonly ledger: Pick<SpendLedger, 'entries' | 'markPlanDayStarted'>;
  readonly clock: Clock;
  /** Lists an account's campaigns (for account plans), e.g. BudgetRepository.listCampaignIds. */
  readonly campaignsOfAccount: (accountId: string) => Promise<readonly string[]>;
  /** @default defaultInFlight */
  readonly inFlight?: InFlightConfig;
  /** @default DEFAULT_MEMORY_RETENTION_MS */
  readonly memoryRetentionMs?: number;
  /**
   * After a rebuild that is not the plan-day's first initialisation (a reset), no lease is
   * granted for this long, so every live guard re-registers its in-flight amounts before
   * budget is handed out again. Must exceed the guards' settleIntervalMs plus a round trip.
   * @default 2 × slot width
   */
  readonly rejoinGraceMs?: number;
  /**
   * Lifetime of a plan-day's rebuild lock (`<state>:lock`, real time): one process rebuilds, the
   * others wait for its sentinel. A crashed holder delays the next rebuild by at most this.
   * Must exceed the longest ledger read of a plan-day. @default 30_000
   */
  readonly rebuildLockMs?: number;
  /** How often a process waiting for another's rebuild looks again, real ms. @default 20 */
  readonly rebuildPollMs?: number;
}

/** Result of a rebuild. */
export interface ReconcileResult {
  /** True when this call installed the counters (false: already initialised, or lost the race). */
  readonly installed: boolean;
  readonly confirmedMicros: number;
  readonly wins: number;
}

/** Relative TTL of a plan-day's keys: until its day ends + retention, at least the retention. */
export function keepFor(dayEndMs: number, nowMs: number, retentionMs: number): number {
  return Math.max(retentionMs, dayEndMs + retentionMs - nowMs);
}

/**
 * Thrown when a plan-day could not be rebuilt in time because another process holds its rebuild
 * lock and has not finished (or Redis keeps refusing): transient, the record is retried.
 */
export class RebuildUnavailableError extends errorKind(
  'RebuildUnavailableError',
  'spend.rebuild-unavailable',
) {}

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /**
     * KEYS: lock. ARGV: token. Deletes the lock if it holds the token (a lock that expired may
     * belong to another process).
     */
    spendUnlock(lock: string, token: string): Result<number, Context>;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Rebuilds plan-days from the ledger. */
export class Reconciler {
  private readonly inFlight: InFlightConfig;
  private readonly memoryRetentionMs: number;
  private readonly rejoinGraceMs: number;
  private readonly lockMs: number;
  private readonly pollMs: number;
  /** Rebuilds running in this process, by state key: the single flight the others join. */
  private readonly running = new Map<string, Promise<ReconcileResult>>();
  /** Ledger reads made by rebuilds (tests and metrics: one per plan-day per reset). */
  ledgerReads = 0;

  constructor(private readonly options: ReconcilerOptions) {
    this.inFlight = options.inFlight ?? defaultInFlight;
    this.memoryRetentionMs = options.memoryRetentionMs ?? DEFAULT_MEMORY_RETENTION_MS;
    this.rejoinGraceMs = options.rejoinGraceMs ?? 2 * this.inFlight.slotMs;
    this.lockMs = options.rebuildLockMs ?? 30_000;
    this.pollMs = options.rebuildPollMs ?? 20;
    defineSpendCommands(options.redis);
    defineScripts(options.redis, 'spendUnlock');
  }

  /** The ledger entries that count towards a plan on a day. */
  async ledgerEntries(plan: ResolvedPlan, day: string): Promise<LedgerEntry[]> {
    const { ledger } = this.options;
    if (plan.level === 'campaign') return ledger.entries(plan.campaignId as string, day);
    if (plan.level === 'arm') return ledger.entries(plan.campaignId as string, day, plan.armId);
    const campaigns = await this.options.campaignsOfAccount(plan.accountId);
    return (await Promise.all(campaigns.map((c) => ledger.entries(c, day)))).flat();
  }

  /**
   * Initialises the plan-day from the ledger unless it is initialised already. With `force`,
   * first removes the sentinel so the counters are rebuilt whatever they hold (guards then
   * rejoin with their in-flight amounts).
   */
  async reconcile(
    plan: ResolvedPlan,
    day: string,
    options: { force?: boolean } = {},
  ): Promise<ReconcileResult> {
    const key = planDayKeys(plan, day).state;
    // Single flight in the process: every record of a batch that found the plan-day reset joins
    // the one rebuild instead of reading the ledger itself.
    const running = this.running.get(key);
    if (running && !options.force) {
      const result = await running;
      return { ...result, installed: false };
    }
    const flight = this.rebuildOnce(plan, day, options.force === true).finally(() => {
      if (this.running.get(key) === flight) this.running.delete(key);
    });
    this.running.set(key, flight);
    // Awaited here (not returned as the promise itself) so that the starter and the joiners resume
    // in the order they called, one promise job after the flight ends, whichever socket read
    // brought their replies: returning `flight` would adopt it a job later, and a joiner that
    // arrived in the same read would resume first, one from a later read after (the simulator's
    // determinism depends on this order, e.g. two guards rejoining a plan-day at midnight).
    return await flight;
  }

  /**
   * One rebuild across processes: the holder of `<state>:lock` (SET NX PX) rebuilds, the others
   * wait until the sentinel is back (or the lock is gone, then compete again).
   */
  private async rebuildOnce(plan: ResolvedPlan, day: string, force: boolean): Promise<ReconcileResult> {
    const { redis } = this.options;
    const keys = planDayKeys(plan, day);
    const lock = `${keys.state}:lock`;
    const token = randomBytes(8).toString('hex');
    const deadline = Date.now() + this.lockMs + 5_000;
    const none = { installed: false, confirmedMicros: 0, wins: 0 };
    for (;;) {
      if (!force && (await redis.hexists(keys.state, 'r')) === 1) return none;
      if ((await redis.set(lock, token, 'PX', this.lockMs, 'NX')) === 'OK') {
        try {
          if (force) await redis.hdel(keys.state, 'r');
          else if ((await redis.hexists(keys.state, 'r')) === 1) return none;
          return await this.rebuild(plan, day);
        } finally {
          await redis.spendUnlock(lock, token).catch(() => {});
        }
      }
      if (Date.now() > deadline) {
        throw new RebuildUnavailableError(
          `Plan-day ${keys.state} is being rebuilt by another process that has not finished within ` +
            `${this.lockMs} ms; retrying the record.`,
        );
      }
      await sleep(this.pollMs);
    }
  }

  /** Reads the ledger and installs the plan-day (caller holds the lock). */
  private async rebuild(plan: ResolvedPlan, day: string): Promise<ReconcileResult> {
    const { redis, clock } = this.options;
    const keys = planDayKeys(plan, day);
    this.ledgerReads++;
    const entries = await this.ledgerEntries(plan, day);
    const epoch = `${clock.now().toString(36)}-${randomBytes(4).toString('hex')}`;
    const staging = keys.staging(epoch);
    const now = clock.now();
    const keepMs = keepFor(dayWindowOf(day, plan.timeZone).endMs, now, this.memoryRetentionMs);
    // The plan-day's first initialisation happens before any guard could lease (no sentinel,
    // no lease): nothing to wait for. Later ones are resets: let the guards rejoin first.
    const first = await this.options.ledger.markPlanDayStarted(plan.scope, plan.planId, day, now);
    const graceUntil = first ? 0 : now + this.rejoinGraceMs;
    let confirmed = 0;
    for (let i = 0; i < entries.length; i += 1000) {
      const chunk = entries.slice(i, i + 1000);
      const fields: string[] = [];
      for (const e of chunk) {
        confirmed += e.clearingPriceMicros;
        fields.push(noticeField(plan, e.campaignId, e.bidId), 'R');
      }
      // A crashed rebuild leaves only a staging key that expires; it is never read.
      await redis
        .pipeline()
        .hset(staging, ...fields)
        .pexpire(staging, 600_000)
        .exec();
    }
    const installed = await redis.spendInit(
      keys.state,
      keys.notices,
      staging,
      epoch,
      confirmed,
      this.inFlight.slotMs,
      this.inFlight.ttlMs,
      keepMs,
      graceUntil,
    );
    return { installed: installed === 1, confirmedMicros: confirmed, wins: entries.length };
  }
}

/**
 * A reconciler whose account plans list their campaigns from the budgets table, as every process
 * that rebuilds live counters wires it (the client, track-spend, `paceline-budgets reconcile`).
 */
export function budgetsTableReconciler(
  options: Omit<ReconcilerOptions, 'campaignsOfAccount'> & {
    readonly budgets: Pick<BudgetRepository, 'listCampaignIds'>;
  },
): Reconciler {
  const { budgets, ...rest } = options;
  return new Reconciler({ ...rest, campaignsOfAccount: (accountId) => budgets.listCampaignIds(accountId) });
}
