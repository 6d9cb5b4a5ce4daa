/**
 * The budget guard's surface (guard.ts): the bid it decides on, its decisions, its options and
 * the counters it keeps.
 */

import type { ResolvedPlan } from '../budget/model.js';
import type { TargetCurve } from '../budget/pacing.js';
import { errorKind } from '../errors.js';
import type { AllocationConfig } from '../pacing/regions/allocation-config.js';
import type { RedisClient } from '../redis/connect.js';
import type { Clock } from '../time/clock.js';
import type { ScriptTransport } from './live-counters.js';
import type { InFlightConfig } from './reconcile.js';

/** A bid to decide on. */
export interface GuardBid {
  readonly campaignId: string;
  readonly armId?: string;
  /** Bid price = the in-flight amount, integer micros per impression. */
  readonly priceMicros: number;
}

/**
 * Outcome of {@link BudgetGuard.decide}: `bid` (recorded as in-flight), `no-budget` (some plan's
 * local float does not cover the price; a lease is being fetched or the allowance is spent), or
 * `unknown-campaign` (no budgets registered for it: never bid blind) or `paused`.
 */
export type Decision = 'bid' | 'no-budget' | 'unknown-campaign' | 'paused';

/** Options of {@link BudgetGuard}. */
export interface BudgetGuardOptions {
  readonly redis: RedisClient;
  /**
   * How lease calls reach Redis: `raw` over the shared raw connections (shared/redis/resp/script-caller.ts,
   * about 2.5× less CPU per call than ioredis), `client` through ioredis. Same script, same replies.
   * @default 'raw'
   */
  readonly scriptTransport?: ScriptTransport;
  readonly clock: Clock;
  /** Initialises / rebuilds a plan-day from the ledger (Reconciler.reconcile). */
  readonly initPlanDay: (plan: ResolvedPlan, day: string) => Promise<unknown>;
  /** In-flight lifetime T and slot width; must match track-spend's. @default defaultInFlight */
  readonly inFlight?: InFlightConfig;
  /** Pacing target curve E(t). @default defaultCurve (linear for `even`, whole budget for `asap`) */
  readonly curve?: TargetCurve;
  /** Float size F as a fraction of the plan's daily budget. @default 0.0002 (0.02 %) */
  readonly floatFraction?: number;
  /** Lower limit of F, micros (should cover the largest bid). @default 1000 */
  readonly minFloatMicros?: number;
  /** Weight of in-flight amounts in C (1 = conservative; < 1 voids the bound). @default 1 */
  readonly inFlightWeight?: number;
  /**
   * In-flight that no notice is expected to resolve (learned per plan-day from the slots that
   * died: exchanges that send no loss notice) is released up to this fraction of the plan's daily
   * budget; the overshoot bound grows by as much (docs/spend.md, "In flight without loss
   * notices"). 0 counts every in-flight amount until T. @default DEFAULT_RELEASE_CAP (0.25 %)
   */
  readonly releaseCap?: number;
  /** A lease may be spent only this long after its grant (≤ T). @default T / 4 */
  readonly leaseAheadMs?: number;
  /**
   * Prefetch the next float when a plan's float falls below this fraction of F (or a bid did not
   * fit). A guard then holds at most (1 + fraction) × F per plan; what it holds is allowance taken
   * but not yet spent, a standing lag behind E(t) that matters for small plans (F is at least
   * `minFloatMicros`: 0.5 % of a $1 budget at 5,000 µ$). Lease calls per F spent do not change.
   * @default 0.5
   */
  readonly prefetchBelow?: number;
  /**
   * How a small plan's float is sized. `fixed`: a lease asks for F and the guard prefetches below
   * F × `prefetchBelow`. `bids`: for a plan whose F is the minimum float (a small budget: F is the
   * largest possible bid, often several percent of the day), once the guard has seen its bids, a
   * lease asks for about one recent largest bid (at most F) and the guard prefetches when its float
   * no longer covers one. What a guard holds is allowance taken but not spent — a lag behind E(t) —
   * and falls from ~F to ~1.5 bids, at one lease call per bid or two (docs/spend.md). @default 'fixed'
   */
  readonly floatSizing?: 'fixed' | 'bids';
  /** Settle spent float into in-flight slots at least this often. @default slot width */
  readonly settleIntervalMs?: number;
  /** Wait before asking again after a plan had no allowance. @default slot width / 10 */
  readonly noAllowanceBackoffMs?: number;
  /** @default DEFAULT_MEMORY_RETENTION_MS */
  readonly memoryRetentionMs?: number;
  /** Called with background lease/settle failures (the guard then says no-budget and retries). */
  readonly onError?: (error: unknown) => void;
  /**
   * Several regions share the budgets (docs/pacing.md, "Many regions"): strict leases only within
   * the region's allocation. Before the pacer wrote one (a plan-day's state without `a`), with the
   * deployment's allocation settings and this guard's region, the region's floor while its default
   * lease lasts (bids from a plan-day's first instant); with `'strict'` alone, nothing. An
   * allocation the pacer wrote caps the lease either way. Derive it from the deployment's regions
   * (`allocationSettingsFromEnv`): strict with more than one.
   * @default 'off'
   */
  readonly allocations?: 'strict' | 'off' | { readonly config: AllocationConfig; readonly region: string };
}

/** Counters for tests and benchmarks. */
export interface GuardStats {
  /** Lease/settle script calls (Redis commands) issued. */
  leaseCalls: number;
  /** Plan-day initialisations requested (start of day, reset detected). */
  inits: number;
  /** Re-registrations of in-flight amounts after an epoch change (reset / forced reconcile). */
  rejoins: number;
  /**
   * Lease calls the region's allocation (several regions), not the expected spend E, held back:
   * the region asked for more than the allocation authority gave it.
   */
  allocationHolds: number;
  /**
   * `no-budget` answers where a refusing plan's last lease had been cut short by the region's
   * allocation (not by E(t), not a lease still on its way): what several regions cost a bid.
   */
  allocationRefusals: number;
  /**
   * `no-budget` answers because a dayparted plan of the bid was outside its windows (the guard
   * refuses those before any float: docs/spend.md, "Dayparting").
   */
  windowRefusals: number;
}

/** A {@link BudgetGuardOptions} value the guard cannot run with; the message names it and what to give. */
export class InvalidGuardOptionsError extends errorKind(
  'InvalidGuardOptionsError',
  'spend.invalid-guard-options',
) {}

/**
 * A plan-day's live counters keep in-flight amounts in slots of another width than this guard's
 * `inFlight.slotMs`: every guard and track-spend of a deployment must use the same
 * {@link InFlightConfig}. The lease call fails with it (through `onError` for background calls).
 */
export class SlotMismatchError extends errorKind('SlotMismatchError', 'spend.slot-mismatch') {}
