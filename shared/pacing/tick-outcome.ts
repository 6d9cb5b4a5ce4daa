/**
 * What a pacer tick is given and what it reports: the pacer's options, who runs a tick (lease,
 * control parameters), the outcome (metrics, logs, tests), and the shard's largest campaign plans against their target
 * (the regional dashboard's "spend vs target" series).
 */
import type { ResolvedPlan } from '../budget/model.js';
import type { RedisClient } from '../redis/connect.js';
import type { Clock } from '../time/clock.js';
import type { BudgetsRefresh } from './budgets-cache.js';
import type { ControlSnapshot } from './control.js';
import type { PacingController } from './controller/api.js';
import type { DeliveryCounts } from './delivery-counts.js';
import type { Fence } from './fence.js';
import type { LeaseView } from './lease.js';
import type { ClaimOutcome, PublishOutcome } from './publisher.js';
import type { RegionSharing, SharingRecord } from './regions/region-shares.js';
import type { SpendSource } from './spend-source.js';
import { evaluateCurve, type PlanPacingParams, type PlanSpendSnapshot } from './types.js';

/** The lease as the pacer uses it (ShardLease). */
export interface LeaseHandle {
  tick(): Promise<LeaseView>;
  heldAt(nowMs: number): boolean;
  readonly epoch: number;
}

/** The control parameters as the pacer uses them (PacerControl). */
export interface ControlHandle {
  read(): Promise<{ snapshot: ControlSnapshot | undefined; error?: unknown }>;
}

/** Who this tick runs as. */
export interface TickIdentity {
  /** `s<shard>-i<k>`. */
  readonly instanceId: string;
  /** `<instanceId>/<process nonce>`: unique per process. */
  readonly publisherId: string;
  readonly lease: LeaseHandle;
  readonly control: ControlHandle;
}

/** Everything a tick did (metrics, logs, tests). */
export interface TickOutcome {
  readonly shard: number;
  readonly instanceId: string;
  readonly tick: number;
  readonly startedAtMs: number;
  readonly durationMs: number;
  /** The instance considered itself the publisher this tick (lease holder or named by the override). */
  readonly isLeader: boolean;
  /** Claimed the tick and every batch landed. */
  readonly published: boolean;
  readonly lease: { readonly event: LeaseView['event']; readonly holder?: string; readonly epoch?: number };
  /** The leader override in force (`auto` or an instance id); undefined without control parameters. */
  readonly override?: string;
  /** False when SSM could not be read this tick (the last values read were used). */
  readonly controlFresh: boolean;
  readonly fence?: Fence;
  readonly claim?: Pick<ClaimOutcome, 'accepted' | 'reason'>;
  readonly publish?: PublishOutcome;
  /** Claims and publish batches of this instance refused by the fence. */
  readonly fencedWritesRejected: number;
  readonly campaignsPaced: number;
  readonly plansPaced: number;
  /** Plans whose controller output could not be published (fail-safe parameters used). */
  readonly invalidParams: number;
  /** Why the first of them got the fail-safe (the plan and the error's message), when any did. */
  readonly invalidReason?: string;
  /** Publish end − tick start (the tick's wall-clock boundary), ms. */
  readonly publishLagMs?: number;
  /** Controller state reloaded from Redis (the previous publisher was someone else). */
  readonly stateReloaded: boolean;
  readonly budgets: {
    readonly ok: boolean;
    readonly changed: number;
    readonly error?: string;
    /** A cold process loaded the shard's budgets snapshot from Redis first. */
    readonly fromSnapshot?: boolean;
  };
  /** Why nothing was computed (no budgets yet: a cold process while DynamoDB is unreachable). */
  readonly skippedReason?: string;
  /**
   * Region shares: the peers' summaries read and this region's written (when publishing), and the
   * allocation step that ran before the write (several regions).
   */
  readonly sharing?: {
    readonly loaded: boolean;
    readonly written?: boolean;
    readonly error?: string;
    readonly allocation?: SharingRecord['allocation'];
  };
  /** Age of the shard's last claim at the end of the tick, ms (stale-parameter alarm). */
  readonly paramsAgeMs?: number;
  /**
   * The shard's largest campaign plans (by daily budget) with their spend and target E(t) at the
   * tick, when this instance published: the regional dashboard's "spend vs target" series.
   */
  readonly topCampaigns?: readonly CampaignSpendPoint[];
  /**
   * The shard's plans per delivery band (`delivery-counts.ts`), on the first tick of each minute
   * this instance published.
   */
  readonly delivery?: DeliveryCounts;
  /**
   * Where the tick's time went, ms: inputs (SSM, lease, budgets), claim + spend read (with the
   * steps of the parts that arrived meanwhile), controller (what was left after the last part),
   * publish; on a takeover `reload`, from the claim until every stored state was in (overlapping
   * the others).
   */
  readonly phasesMs?: {
    readonly inputs: number;
    readonly claimAndSpend: number;
    readonly step: number;
    readonly publish: number;
    readonly reload?: number;
  };
}

/** One campaign plan's spend against its published target at a tick (dashboard metrics). */
export interface CampaignSpendPoint {
  readonly campaignId: string;
  readonly budgetMicros: number;
  /** Confirmed + in flight, as the guard counts it. */
  readonly spendMicros: number;
  /** E(t) of the published curve at the tick. */
  readonly targetMicros: number;
}

/** Campaign plans per shard reported as {@link TickOutcome.topCampaigns}. @default 10 */
export const TOP_CAMPAIGNS_REPORTED = 10;

/**
 * The `k` campaign plans with the largest budgets, with spend and E(t) at `nowMs`. One pass with a
 * small sorted buffer (k ≪ plans): no sort of 150,000 plans per tick.
 */
export function topCampaignPoints(
  plans: readonly { readonly plan: ResolvedPlan }[],
  spend: readonly PlanSpendSnapshot[],
  results: readonly { readonly params: PlanPacingParams }[],
  nowMs: number,
  k = TOP_CAMPAIGNS_REPORTED,
): CampaignSpendPoint[] {
  const top: { i: number; budget: number }[] = [];
  for (let i = 0; i < plans.length; i++) {
    const plan = (plans[i] as { plan: ResolvedPlan }).plan;
    if (plan.level !== 'campaign' || plan.campaignId === undefined) continue;
    const budget = (results[i] as { params: PlanPacingParams }).params.budgetMicros;
    if (top.length === k && budget <= (top[k - 1] as { budget: number }).budget) continue;
    let at = top.length;
    while (at > 0 && (top[at - 1] as { budget: number }).budget < budget) at--;
    top.splice(at, 0, { i, budget });
    if (top.length > k) top.pop();
  }
  return top.map(({ i, budget }) => {
    const s = spend[i] as PlanSpendSnapshot;
    return {
      campaignId: (plans[i] as { plan: ResolvedPlan }).plan.campaignId as string,
      budgetMicros: budget,
      spendMicros: s.confirmedMicros + s.inFlightMicros,
      targetMicros: evaluateCurve((results[i] as { params: PlanPacingParams }).params.curve, nowMs),
    };
  });
}

/** Indexes of the `k` campaign-level plans with the largest daily budgets (one pass, small buffer). */
export function topIndexes(list: readonly { readonly plan: ResolvedPlan }[], k: number): Int32Array {
  const top: { i: number; budget: number }[] = [];
  for (let i = 0; i < list.length; i++) {
    const plan = (list[i] as { readonly plan: ResolvedPlan }).plan;
    if (plan.level !== 'campaign' || plan.campaignId === undefined) continue;
    const budget = plan.dailyBudgetMicros;
    if (top.length === k && budget <= (top[k - 1] as { budget: number }).budget) continue;
    let at = top.length;
    while (at > 0 && (top[at - 1] as { budget: number }).budget < budget) at--;
    top.splice(at, 0, { i, budget });
    if (top.length > k) top.pop();
  }
  return Int32Array.from(top, (t) => t.i);
}

/** Options of {@link ShardPacer}. */
export interface ShardPacerOptions {
  readonly shard: number;
  /** This region's name (`publisher-region` must hold it for this pacer to publish). */
  readonly region: string;
  readonly redis: RedisClient;
  readonly controller: PacingController<unknown, unknown>;
  /** The shard's budgets (ShardBudgets, optionally warmed from a snapshot). */
  readonly budgets: BudgetsRefresh;
  readonly spend: SpendSource;
  /**
   * Several regions: this cache region's share of every plan-day (docs/pacing.md, "Many regions").
   * @default none — every plan paces its whole budget
   */
  readonly sharing?: RegionSharing;
  readonly clock: Clock;
  readonly tickMs: number;
  /** Audit stream cap. @default 10_000 */
  readonly logMaxLen?: number;
  /** Publish batch size in script arguments. @default 4_000 */
  readonly maxArgsPerBatch?: number;
  /** How often a campaign hash's expiry is refreshed (memory only). @default 1 h */
  readonly expiryRefreshMs?: number;
  /**
   * Deadband of a continuing publish (contract v2): a plan's `p:` field is rewritten when its
   * budget, mode or day changed, or its throttle moved by more than `throttle` (absolute) or its
   * bid multiplier by more than `multiplier` (relative); smaller moves wait for the campaign's
   * bounded republish. 0 and 0: any change of the encoding is written at once.
   * @default { throttle: 0.001, multiplier: 0.001 }
   */
  readonly deadband?: { readonly throttle: number; readonly multiplier: number };
  /**
   * Every paced campaign's hash is rewritten (header `t`, `at`, and every field that differs from
   * the computed value at all) at least every this many ticks, staggered over the campaigns; the
   * claim hash's `rp` tells readers the bound ((this + 1) ticks, ms). @default 6
   */
  readonly republishTicks?: number;
  /**
   * Fault injection: awaited between a successful claim and the publish (the window in which a
   * paused leader holds a claim it is about to lose). Tests only. @default none
   */
  readonly beforePublish?: () => Promise<void>;
  /**
   * Fault injection: awaited after an accepted claim, before a takeover's reads are written (a
   * node that stalls as the reload starts). Tests only. @default none
   */
  readonly afterClaim?: () => Promise<void>;
  /**
   * Longest silence of the node while the takeover's state reads wait for replies, ms (the raw
   * readers' progress timeout; the pacer function passes `PACER_REDIS_SILENCE_MS`). @default 1000
   */
  readonly redisSilenceMs?: number;
}

/** The outcome of a tick that computed nothing: no budgets yet (a cold process, DynamoDB down). */
export function skippedOutcome(
  base: Omit<
    TickOutcome,
    | 'durationMs'
    | 'isLeader'
    | 'published'
    | 'fencedWritesRejected'
    | 'campaignsPaced'
    | 'plansPaced'
    | 'invalidParams'
    | 'stateReloaded'
  >,
  durationMs: number,
  error: string | undefined,
): TickOutcome {
  return {
    ...base,
    durationMs,
    isLeader: false,
    published: false,
    fencedWritesRejected: 0,
    campaignsPaced: 0,
    plansPaced: 0,
    invalidParams: 0,
    stateReloaded: false,
    skippedReason: `no budgets loaded yet (${error ?? 'first load pending'})`,
  };
}
