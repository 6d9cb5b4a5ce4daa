/**
 * One tick of one pacer shard, in one process: the domain of the pacer function (the handler only
 * wires it). Every instance runs every tick — warm budgets cache, controller state, connections —
 * and only the publisher writes:
 *
 * 1. read the control parameters (SSM: publish switch of the region, leader override of the shard);
 * 2. renew / take the lease (DynamoDB);
 * 3. refresh the shard's budgets (incremental index query; the cache serves through an outage);
 * 4. decide the role: the override's named instance, else the lease holder, publishes — only when
 *    the region's `publisher-region` names this region — with fence (g, o, e);
 * 5. the publisher claims the tick (Lua); a claim that does not continue this process's own last
 *    publish reloads the controller state published by the previous publisher (no jump at a
 *    leader change), in parts read beside the spend (shared/pacing/state-reload.ts), and rewrites
 *    every campaign hash whole;
 * 6. read every plan-day's live spend (one pipelined read, in parts), step the controller for
 *    each part as its spend (and, on a takeover, its stored state) arrives;
 * 7. the publisher writes the campaign hashes that changed beyond the deadband or are due for
 *    their bounded republish, changed states and forecasts (fenced Lua batches); the last batch
 *    records the completed publish in the claim hash, which readers take freshness from (v2).
 */
import { type CampaignBudgets, plansForBid, type ResolvedPlan } from '../budget/model.js';
import type { BudgetItem } from '../budget/repository.js';
import { type DayWindow, dayWindow } from '../budget/time-zone.js';
import type { RedisClient } from '../redis/connect.js';
import { planDayKeys } from '../spend/keys.js';
import type { Clock } from '../time/clock.js';
import { type BudgetsRefresh, budgetItemKey } from './budgets-cache.js';
import { assertPublishable, encodeCurve, encodePlanParams, InvalidPacingParamsError } from './codec.js';
import { type ControlSnapshot, overrideActive } from './control.js';
import type { PacingController, PriorBook, PriorLookup } from './controller/api.js';
import { failSafeParams, PacingInputError } from './controller/index.js';
import type { Fence } from './fence.js';
import { planField } from './keys.js';
import type { LeaseView } from './lease.js';
import { UnknownPacingModeError } from './modes.js';
import { type CampaignWrite, type ClaimOutcome, type PublishOutcome, ShardPublisher } from './publisher.js';
import type { RegionSharing, SharingRecord } from './regions/region-shares.js';
import type { SpendSource } from './spend-source.js';
import { StateReloader, type StoredTexts } from './state-reload.js';
import { type CurvePoints, evaluateCurve, type PlanPacingParams, type PlanSpendSnapshot } from './types.js';

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

interface PlanMemory {
  plan: ResolvedPlan;
  state: unknown;
  forecast: unknown;
  /** Encoded state / forecast as last written to (or loaded from) Redis by this process. */
  writtenState?: string;
  writtenForecast?: string;
  /**
   * The forecast object `forecastText` encodes: forecasts are immutable and change a few times a
   * day, so the tick's comparison with what is stored skips re-encoding an unchanged one.
   */
  forecastTextOf?: unknown;
  forecastText?: string;
  /** Loaded from Redis, not yet decoded. */
  loadedState?: string;
  loadedForecast?: string;
  /** The id of the last plan list that held this plan (see {@link PlanList.id}). */
  listedIn?: number;
}

interface CampaignMemory {
  plansKey: string;
  /** Per plan, in publishing order (aligned with the campaign's plans): what is stored. */
  encoded: string[];
  /** The parameters and day behind `encoded` (deadband comparisons). */
  params: PlanPacingParams[];
  days: DayWindow[];
  curves: CurvePoints[];
  /** `e:` values as stored (a new curve object with the same knots is not rewritten). */
  encodedCurves: string[];
  expiryRefreshedAt: number;
  /** The campaign's republish slot: rewritten when (tick + phase) mod republishTicks = 0. */
  phase: number;
}

interface PlanAtDay {
  readonly field: string;
  readonly plan: ResolvedPlan;
  readonly day: DayWindow;
  /** The plan-day's live-spend state key. */
  readonly spendKey: string;
  readonly memory: PlanMemory;
}

/** The tick's work list: distinct plans, and per active campaign the indexes of its plans. */
interface PlanList {
  /** Unique per list built (its plans' memories carry it: `listedIn`). */
  readonly id: number;
  readonly generation: number;
  readonly campaigns: number;
  readonly validUntil: number;
  readonly list: PlanAtDay[];
  /** Per campaign (aligned with the active campaigns): indexes into `list`, publishing order. */
  readonly byCampaign: Int32Array[];
  /**
   * Indexes of the campaign plans with the largest daily budgets (the dashboard's series), chosen
   * when the list is built: the tick reports only these, instead of scanning every plan.
   */
  readonly top: Int32Array;
}

/** The snapshot hash's metadata field (readers ignore a snapshot without it: half-written). */
const SNAPSHOT_META = '~meta';

interface SnapshotMeta {
  readonly takenAtMs: number;
}

/**
 * A new publisher mirrors into the snapshot the budget changes it holds from this long before the
 * snapshot's last update on: older ones reached its predecessor's cache before that update (the
 * budgets index lags by less: the cache's own incremental queries overlap by as much).
 */
const SNAPSHOT_OVERLAP_MS = 60_000;

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

interface PlanResult {
  readonly params: PlanPacingParams;
  readonly day: DayWindow;
  /** The `p:` value, encoded once per tick however many campaigns share the plan. */
  encoded?: string;
}

/**
 * Plans per part of the parts spend read: small enough that the controller starts early (with
 * 1,000-odd plans, a part of 5,000 left the controller idle until Redis had answered every key,
 * then Redis idle while it stepped: 3 % of the simulator's daytime hour), large enough that the
 * per-part overhead (a promise, a copy of the part) is noise.
 */
const SPEND_PART = 300;

/**
 * Fields per part of a takeover's reads of the plans the tick does not step (other campaigns'
 * plans of the budgets, plans this process met before): only their stored state is adopted.
 */
const REST_PART = 1_000;

/** Campaign hashes per part of a takeover's read of what its predecessor published. */
const PUBLISHED_PART = 500;

/** A takeover's reload in flight ({@link ShardPacer.beginReload}). */
interface Reload {
  /** Part k: the plans [k · SPEND_PART, …) of the tick's list hold what was stored. */
  readonly parts: Promise<void>[];
  /** Every other plan holds what was stored (awaited before the publish encodes state). */
  readonly rest: Promise<void>;
  /**
   * Per active campaign, what its hash holds now: `plans`, then `p:` and `e:` of each of its
   * plans in publishing order (undefined: no such field).
   */
  readonly published: Promise<(string | undefined)[][]>;
  readonly startedAt: number;
}

/** Writes of a publish in progress (plan, text), committed once it is accepted. */
interface StagedWrites {
  readonly state: PlanMemory[];
  readonly stateText: string[];
  readonly forecast: PlanMemory[];
  readonly forecastText: string[];
}

function noStagedWrites(): StagedWrites {
  return { state: [], stateText: [], forecast: [], forecastText: [] };
}

/** The pacer of one shard in one process (warm state across ticks and invocations). */
export class ShardPacer {
  private readonly plans = new Map<string, PlanMemory>();
  private readonly published = new Map<string, CampaignMemory>();
  private lastPublished: { publisherId: string; tick: number } | undefined;
  private readonly publishers = new Map<string, ShardPublisher>();
  private readonly expiryRefreshMs: number;
  private readonly deadband: { readonly throttle: number; readonly multiplier: number };
  private readonly republishTicks: number;
  /** Priors for plans without a forecast of their own, from the shard's learned forecasts. */
  private readonly priors: PriorBook | undefined;
  private readonly priorLookup: PriorLookup | undefined;
  private reloader: StateReloader | undefined;
  /** The sweep for fields of deleted plans, while it runs. */
  private sweeping: Promise<void> | undefined;
  /** Takeover reloads begun (the latest one's parts adopt what they read). */
  private reloads = 0;
  /** Plan lists built. */
  private planLists = 0;

  constructor(private readonly options: ShardPacerOptions) {
    this.priors = options.controller.createPriorBook?.();
    this.priorLookup = this.priors?.lookup;
    this.expiryRefreshMs = options.expiryRefreshMs ?? 3_600_000;
    this.deadband = options.deadband ?? { throttle: 0.001, multiplier: 0.001 };
    const k = options.republishTicks ?? 6;
    if (!Number.isSafeInteger(k) || k < 1)
      throw new RangeError(
        `republishTicks must be a positive integer (got ${k}): ticks between forced rewrites`,
      );
    if (!(this.deadband.throttle >= 0 && this.deadband.multiplier >= 0))
      throw new RangeError('deadband throttle and multiplier must be ≥ 0 (0 and 0: publish every change)');
    this.republishTicks = k;
  }

  private publisher(publisherId: string): ShardPublisher {
    let p = this.publishers.get(publisherId);
    if (!p) {
      p = new ShardPublisher({
        redis: this.options.redis,
        shard: this.options.shard,
        publisherId,
        ...(this.options.logMaxLen ? { logMaxLen: this.options.logMaxLen } : {}),
        ...(this.options.maxArgsPerBatch ? { maxArgsPerBatch: this.options.maxArgsPerBatch } : {}),
      });
      this.publishers.set(publisherId, p);
    }
    return p;
  }

  /** Runs tick `tick` as `who`. Never throws for SSM / DynamoDB faults (reported in the outcome). */
  async runTick(tick: number, who: TickIdentity): Promise<TickOutcome> {
    const { clock, shard, region } = this.options;
    const startedAtMs = clock.now();
    const publisher = this.publisher(who.publisherId);
    // SSM, DynamoDB (lease, budgets) and Redis (snapshot) are independent: one round of latency.
    const [control, lease, budgets] = await Promise.all([
      who.control.read(),
      who.lease.tick(),
      this.refreshBudgets(publisher),
    ]);
    const inputsDone = clock.now();
    const snapshot = control.snapshot;
    const base = {
      shard,
      instanceId: who.instanceId,
      tick,
      startedAtMs,
      lease: { event: lease.event, holder: lease.record?.holder, epoch: lease.record?.epoch },
      ...(snapshot ? { override: snapshot.override } : {}),
      controlFresh: snapshot?.fresh ?? false,
      budgets,
    };
    if (!this.options.budgets.loaded) {
      return {
        ...base,
        durationMs: clock.now() - startedAtMs,
        isLeader: false,
        published: false,
        fencedWritesRejected: 0,
        campaignsPaced: 0,
        plansPaced: 0,
        invalidParams: 0,
        stateReloaded: false,
        skippedReason: `no budgets loaded yet (${budgets.error ?? 'first load pending'})`,
      };
    }

    // Role and fence.
    let fence: Fence | undefined;
    if (snapshot && snapshot.publisherRegion === region) {
      const now = clock.now();
      if (overrideActive(snapshot)) {
        if (snapshot.override === who.instanceId)
          fence = { g: snapshot.generation, o: snapshot.overrideVersion, e: 0 };
      } else if (who.lease.heldAt(now)) {
        fence = { g: snapshot.generation, o: snapshot.overrideVersion, e: who.lease.epoch };
      }
    }

    // The claim (publisher) and the spend read (everyone) overlap; the controller steps after the
    // claim, because a new publisher first loads the state its predecessor published.
    const nowMs = clock.now();
    const campaigns = this.activeCampaigns();
    const planList = this.uniquePlans(campaigns, nowMs);
    const plans = planList.list;
    const claimStep = async (): Promise<{
      claim?: ClaimOutcome;
      reload?: Reload;
      ageMs: number | undefined;
    }> => {
      if (!fence) return { ageMs: await this.claimAge(publisher) };
      const claim = await publisher.claim(fence, tick, clock.now());
      let reload: Reload | undefined;
      if (claim.accepted) {
        await this.options.afterClaim?.();
        const continuous =
          claim.previous?.publisher === who.publisherId &&
          this.lastPublished?.publisherId === who.publisherId &&
          this.lastPublished.tick === claim.previous.tick;
        // Not awaited: each part is awaited before it is stepped.
        if (!continuous) reload = this.beginReload(publisher, planList, campaigns);
      }
      return {
        claim,
        ...(reload ? { reload } : {}),
        ageMs: claim.accepted ? 0 : await this.claimAge(publisher),
      };
    };
    const sharing = this.options.sharing;
    const source = this.options.spend;
    const keys = plans.map((p) => p.spendKey);
    let claimed: Awaited<ReturnType<typeof claimStep>>;
    let spend: PlanSpendSnapshot[];
    let loaded: Awaited<ReturnType<NonNullable<typeof sharing>['load']>> | undefined;
    let results: PlanResult[];
    let invalid = 0;
    this.invalidReason = undefined;
    let spendDone: number;
    if (source.readParts) {
      // Each plan steps alone (its region share, too, needs only its own spend and the peers'
      // summaries): the spend read arrives in parts, and each part is stepped as it arrives
      // (once the claim and the peers' load are settled) while Redis serves the rest.
      const parts = source.readParts(keys, nowMs, SPEND_PART);
      [claimed, loaded] = await Promise.all([claimStep(), sharing?.load(nowMs)]);
      this.priors?.refresh(nowMs, this.plans.values());
      spend = new Array(plans.length);
      results = new Array(plans.length);
      spendDone = clock.now();
      for (let k = 0; k < parts.length; k++) {
        const part = await (parts[k] as Promise<PlanSpendSnapshot[]>);
        // A takeover: the part's stored state first (the reload's parts are aligned with these).
        if (claimed.reload) await claimed.reload.parts[k];
        spendDone = clock.now();
        const from = k * SPEND_PART;
        const to = from + part.length;
        for (let j = 0; j < part.length; j++) spend[from + j] = part[j] as PlanSpendSnapshot;
        const shares = sharing?.budgets(plans.slice(from, to), part, nowMs);
        invalid += this.stepRange(plans, spend, nowMs, shares, results, from, to);
        // Lets the event loop turn between parts: the reads' commands still queued in this process
        // go out and their replies come in while the controller steps (parts that are already in
        // are awaited in microtasks, which would step them all without a turn while Redis idles).
        if (k + 1 < parts.length) await new Promise<void>((resolve) => setImmediate(resolve));
      }
    } else {
      [claimed, spend, loaded] = await Promise.all([
        claimStep(),
        source.read(keys, nowMs),
        sharing?.load(nowMs),
      ]);
      if (claimed.reload) await Promise.all(claimed.reload.parts);
      spendDone = clock.now();
      this.priors?.refresh(nowMs, this.plans.values());
      const shares = sharing?.budgets(plans, spend, nowMs);
      results = new Array(plans.length);
      invalid = this.stepRange(plans, spend, nowMs, shares, results, 0, plans.length);
    }
    const { claim } = claimed;
    const publishing = claim?.accepted === true;
    // With the parts read, `step` is what is left after the last part arrived.
    const stepDone = clock.now();

    let publish: PublishOutcome | undefined;
    let publishLagMs: number | undefined;
    let reloadMs: number | undefined;
    const reloaded = claimed.reload !== undefined;
    if (claimed.reload) {
      // The plans not stepped this tick hold their stored state before any state is encoded.
      await claimed.reload.rest;
      reloadMs = clock.now() - claimed.reload.startedAt;
    }
    const reading = claimed.reload?.published;
    if (publishing && fence) {
      await this.options.beforePublish?.();
      const { state, forecast } = this.stateWrites();
      let writes: ReturnType<ShardPacer['campaignWrites']> | undefined;
      // The snapshot is kept up to date incrementally by whoever publishes; it is written whole only
      // when there is none yet (or it was lost with Redis). A new publisher mirrors only the changes
      // its predecessor may not have: a process that followed for a while holds every change since
      // it started (followers do not drain them), and mirroring them all wrote the whole snapshot
      // again at every warm takeover.
      const since = reloaded ? await this.snapshotTakenAt(publisher) : Number.NEGATIVE_INFINITY;
      const fullSnapshot = since === undefined;
      const mirrorFrom = (since ?? Number.NEGATIVE_INFINITY) - SNAPSHOT_OVERLAP_MS;
      const changes = this.options.budgets.drainChanges();
      // Fields of deleted plans found by a sweep; a plan met again since keeps its own.
      const pending = this.pendingDeletes;
      const deletes = {
        state: pending.state.filter((f) => !this.plans.has(f)),
        forecast: pending.forecast.filter((f) => !this.plans.has(f)),
      };
      const budgetSet: string[] = [];
      for (const item of fullSnapshot ? this.options.budgets.exportItems() : changes.upserts) {
        if (item.updatedAt < mirrorFrom) continue;
        budgetSet.push(budgetItemKey(item), JSON.stringify(item));
      }
      if (fullSnapshot || budgetSet.length > 0 || changes.removals.length > 0) {
        budgetSet.push(SNAPSHOT_META, JSON.stringify({ takenAtMs: nowMs } satisfies SnapshotMeta));
      }
      publish = await publisher.publish({
        fence,
        tick,
        nowMs: clock.now(),
        // Built while Redis runs the state batches, which the publisher sends first (on a
        // takeover, once what each hash holds has been read: the read's tail overlaps them too).
        campaigns: reading
          ? async () => {
              writes = this.campaignWrites(campaigns, planList, results, nowMs, tick, await reading);
              return writes.writes;
            }
          : () => {
              writes = this.campaignWrites(campaigns, planList, results, nowMs, tick);
              return writes.writes;
            },
        state: { set: state, del: deletes.state },
        forecast: { set: forecast, del: deletes.forecast },
        budgets: { set: budgetSet, del: fullSnapshot ? [] : changes.removals },
        replaceBudgets: fullSnapshot,
        republishMs: (this.republishTicks + 1) * this.options.tickMs,
      });
      publishLagMs = clock.now() - tick * this.options.tickMs;
      if (publish.rejectedBatches === 0) {
        writes?.commit();
        this.commitStateWrites();
        // A sweep that finished during this publish left its own list for the next one.
        if (this.pendingDeletes === pending) this.pendingDeletes = { state: [], forecast: [] };
        this.lastPublished = { publisherId: who.publisherId, tick };
      } else {
        // Lost the claim mid-publish: whatever landed, the next publish by this process is whole.
        this.published.clear();
        this.lastPublished = undefined;
      }
    }
    let sharingOutcome: TickOutcome['sharing'];
    if (sharing && loaded) {
      const landed = publishing && publish?.rejectedBatches === 0;
      const written = await sharing.record(
        plans,
        spend,
        results.map((r) => r.params),
        nowMs,
        tick,
        landed ? { writer: who.publisherId } : undefined,
      );
      const error = loaded.error ?? written.error;
      sharingOutcome = {
        loaded: loaded.ok,
        ...(landed ? { written: written.ok } : {}),
        ...(error ? { error } : {}),
        ...(written.allocation ? { allocation: written.allocation } : {}),
      };
    }
    const fencedWritesRejected = (claim && !claim.accepted ? 1 : 0) + (publish?.rejectedBatches ?? 0);
    const paramsAgeMs = claimed.ageMs;
    const endMs = clock.now();
    return {
      ...base,
      durationMs: endMs - startedAtMs,
      isLeader: fence !== undefined,
      published: publishing && publish?.rejectedBatches === 0,
      ...(fence ? { fence } : {}),
      ...(claim ? { claim: { accepted: claim.accepted, reason: claim.reason } } : {}),
      ...(publish ? { publish } : {}),
      fencedWritesRejected,
      campaignsPaced: campaigns.length,
      plansPaced: plans.length,
      invalidParams: invalid,
      ...(this.invalidReason === undefined ? {} : { invalidReason: this.invalidReason }),
      ...(publishLagMs === undefined ? {} : { publishLagMs }),
      ...(paramsAgeMs === undefined ? {} : { paramsAgeMs }),
      stateReloaded: reloaded,
      ...(sharingOutcome ? { sharing: sharingOutcome } : {}),
      ...(publishing && publish?.rejectedBatches === 0
        ? {
            topCampaigns: topCampaignPoints(
              Array.from(planList.top, (i) => plans[i] as PlanAtDay),
              Array.from(planList.top, (i) => spend[i] as PlanSpendSnapshot),
              Array.from(planList.top, (i) => results[i] as PlanResult),
              nowMs,
            ),
          }
        : {}),
      phasesMs: {
        inputs: inputsDone - startedAtMs,
        claimAndSpend: spendDone - inputsDone,
        step: stepDone - spendDone,
        publish: endMs - stepDone,
        ...(reloadMs === undefined ? {} : { reload: reloadMs }),
      },
    };
  }

  /**
   * Brings the budgets up to date. A cold process first loads the shard's snapshot from Redis
   * (written by the publisher), so it can pace — and publish under an override — while DynamoDB
   * is unreachable, and then reads only the changes since the snapshot from DynamoDB.
   */
  private async refreshBudgets(publisher: ShardPublisher): Promise<TickOutcome['budgets']> {
    const budgets = this.options.budgets;
    let fromSnapshot = false;
    if (!budgets.loaded) {
      try {
        const raw = await scanHash(this.options.redis, publisher.keys.budgets);
        const meta = raw.get(SNAPSHOT_META);
        if (meta !== undefined) {
          raw.delete(SNAPSHOT_META);
          const items = [...raw.values()].map((v) => JSON.parse(v) as BudgetItem);
          budgets.importItems(items, (JSON.parse(meta) as SnapshotMeta).takenAtMs);
          // Nothing to mirror back: these items came from the snapshot.
          budgets.drainChanges();
          fromSnapshot = true;
        }
      } catch {
        // No usable snapshot: DynamoDB decides below.
      }
    }
    try {
      const r = await budgets.refresh();
      return { ok: true, changed: r.campaignsChanged, ...(fromSnapshot ? { fromSnapshot } : {}) };
    } catch (error) {
      return {
        ok: false,
        changed: 0,
        error: (error as Error).message,
        ...(fromSnapshot ? { fromSnapshot } : {}),
      };
    }
  }

  /** When the budgets snapshot was last updated; undefined when there is none (or it is unreadable). */
  private async snapshotTakenAt(publisher: ShardPublisher): Promise<number | undefined> {
    const meta = await this.options.redis.hget(publisher.keys.budgets, SNAPSHOT_META);
    if (meta === null) return undefined;
    try {
      const at = (JSON.parse(meta) as Partial<SnapshotMeta>).takenAtMs;
      return typeof at === 'number' && Number.isFinite(at) ? at : undefined;
    } catch {
      return undefined;
    }
  }

  /** How old the shard's last claim is (every instance reports it; the alarm takes the max). */
  private async claimAge(publisher: ShardPublisher): Promise<number | undefined> {
    try {
      const at = await this.options.redis.hget(publisher.keys.claim, 'at');
      return at === null ? undefined : Math.max(0, this.options.clock.now() - Number(at));
    } catch {
      return undefined;
    }
  }

  /**
   * Every distinct plan of the campaigns, with its current day and spend key (one entry per
   * account plan). Rebuilt only when the budgets change or a plan's day ends.
   */
  private uniquePlans(campaigns: readonly CampaignBudgets[], nowMs: number): PlanList {
    const cached = this.planList;
    if (
      cached &&
      cached.generation === this.options.budgets.generation &&
      cached.campaigns === campaigns.length &&
      nowMs < cached.validUntil
    ) {
      return cached;
    }
    const index = new Map<string, number>();
    const list: PlanAtDay[] = [];
    const byCampaign: Int32Array[] = [];
    let validUntil = Number.POSITIVE_INFINITY;
    for (const b of campaigns) {
      const plans = plansOfCampaign(b);
      const idx = new Int32Array(plans.length);
      plans.forEach((plan, j) => {
        const field = planField(plan);
        let at = index.get(field);
        if (at === undefined) {
          const day = dayWindow(nowMs, plan.timeZone);
          if (day.endMs < validUntil) validUntil = day.endMs;
          let memory = this.plans.get(field);
          if (!memory) {
            memory = { plan, state: undefined, forecast: undefined };
            this.plans.set(field, memory);
          }
          memory.plan = plan;
          at = list.length;
          index.set(field, at);
          list.push({ field, plan, day, spendKey: planDayKeys(plan, day.day).state, memory });
        }
        idx[j] = at;
      });
      byCampaign.push(idx);
    }
    // Candidates for the dashboard's largest campaign plans: a few times k by daily budget (the
    // reported order uses the budget the controller paced, which region shares may lower).
    const top = topIndexes(list, 4 * TOP_CAMPAIGNS_REPORTED);
    const id = ++this.planLists;
    for (const p of list) p.memory.listedIn = id;
    this.planList = {
      id,
      generation: this.options.budgets.generation,
      campaigns: campaigns.length,
      validUntil,
      list,
      byCampaign,
      top,
    };
    return this.planList;
  }

  /** Active campaigns, recomputed only when the budgets change. */
  private activeCampaigns(): readonly CampaignBudgets[] {
    const g = this.options.budgets.generation;
    if (this.active?.generation !== g) {
      this.active = {
        generation: g,
        list: this.options.budgets.campaigns().filter((b) => b.campaign.status === 'active'),
      };
    }
    return this.active.list;
  }

  private active: { generation: number; list: readonly CampaignBudgets[] } | undefined;

  /** The first fail-safe reason of the tick in progress (reset as its steps begin). */
  private invalidReason: string | undefined;

  private planList: PlanList | undefined;

  /**
   * One controller step per plan of [from, to) (pure) into `results`, falling back to fail-safe
   * parameters for bad output; returns how many got the fail-safe (invalid). `shares[i - from]`
   * is plan i's region share (absent: its own budget).
   */
  private stepRange(
    plans: readonly PlanAtDay[],
    spend: readonly PlanSpendSnapshot[],
    nowMs: number,
    shares: readonly number[] | undefined,
    results: PlanResult[],
    from: number,
    to: number,
  ): number {
    const { controller } = this.options;
    let invalid = 0;
    for (let i = from; i < to; i++) {
      const { plan, day, memory } = plans[i] as PlanAtDay;
      if (memory.loadedForecast !== undefined) {
        // The loaded text is what the decoded object encodes to: the publish compares it with
        // what is stored without encoding it again (a takeover holds 100,000-odd forecasts).
        const f = controller.decodeForecast(memory.loadedForecast);
        memory.forecast = f;
        memory.forecastTextOf = f;
        memory.forecastText = memory.loadedForecast;
        memory.loadedForecast = undefined;
      }
      let params: PlanPacingParams;
      const budgetMicros = shares?.[i - from];
      try {
        if (memory.loadedState !== undefined) {
          // A state of a mode this version does not know throws (UnknownPacingModeError): the
          // stored text stays loaded, so it is neither continued as another mode nor overwritten,
          // and a leader that knows the mode continues it.
          memory.state = controller.decodeState(memory.loadedState);
          memory.loadedState = undefined;
        }
        // One object shape for every plan (a conditional spread made the controller's reads of
        // its input megamorphic); an undefined share means the plan's own budget.
        const step = controller.step(
          { plan, day, spend: spend[i] as PlanSpendSnapshot, nowMs, budgetMicros, prior: this.priorLookup },
          memory.state,
          memory.forecast,
        );
        assertPublishable(step.params);
        params = step.params;
        memory.state = step.state;
        memory.forecast = step.forecast;
      } catch (error) {
        // A bad input (a corrupt budget, a tick outside the plan's day, a pacing mode of another
        // version) or a bad output of one plan must not stop the shard: that plan gets the
        // fail-safe, counted in ParamsInvalid; the first reason goes into the tick's outcome.
        if (
          !(error instanceof InvalidPacingParamsError) &&
          !(error instanceof PacingInputError) &&
          !(error instanceof UnknownPacingModeError)
        )
          throw error;
        invalid++;
        this.invalidReason ??= `plan ${plan.scope}/${plan.planId}: ${error.message}`;
        params = failSafeParams(plan, day, budgetMicros === undefined ? {} : { budgetMicros });
      }
      results[i] = { params, day };
    }
    return invalid;
  }

  /**
   * The campaign hashes to write this tick (contract v2): nothing for a campaign whose published
   * values are all within the deadband of the computed ones, unless its republish slot comes
   * (then every field that differs at all, and the header); every field for a publisher that
   * does not know what is stored (changed plans, a new campaign) — on a takeover, whose reload
   * read what each hash holds (`stored`, per campaign: `plans`, then `p:` and `e:` per plan), the
   * header and every field that differs from it at all: the hash ends as a whole rewrite leaves it.
   */
  private campaignWrites(
    campaigns: readonly CampaignBudgets[],
    planList: PlanList,
    results: readonly PlanResult[],
    nowMs: number,
    tick: number,
    stored?: readonly (readonly (string | undefined)[] | undefined)[],
  ): { writes: CampaignWrite[]; commit(): void } {
    const writes: CampaignWrite[] = [];
    const updates: [CampaignMemory, number, PlanResult, boolean, string | undefined][] = [];
    const created: [string, CampaignMemory][] = [];
    const refreshed: CampaignMemory[] = [];
    const K = this.republishTicks;
    const dbT = this.deadband.throttle;
    const dbM = this.deadband.multiplier;
    for (let ci = 0; ci < campaigns.length; ci++) {
      const b = campaigns[ci] as CampaignBudgets;
      const idx = planList.byCampaign[ci] as Int32Array;
      const plansKey = plansKeyOf(b);
      const campaignId = b.campaign.campaignId;
      const memory = this.published.get(campaignId);
      // Nothing known of what is stored (a new publisher) or the plans changed: every field.
      const full = !memory || memory.plansKey !== plansKey;
      // Replace the hash (drop fields of removed plans) only when this publisher knows the plans
      // changed; a new publisher overwrites every field instead (readers read only the plans
      // listed in `plans`, so a field left from a removed plan is inert).
      const replace = memory !== undefined && memory.plansKey !== plansKey;
      if (full) {
        // What the hash holds (a takeover's read; a replaced hash holds nothing that stays).
        const held = replace ? undefined : stored?.[ci];
        const fields: string[] = held?.[0] === plansKey ? [] : ['plans', plansKey];
        const m: CampaignMemory = {
          plansKey,
          encoded: new Array(idx.length),
          params: new Array(idx.length),
          days: new Array(idx.length),
          curves: new Array(idx.length),
          encodedCurves: new Array(idx.length),
          expiryRefreshedAt: nowMs,
          phase: memory?.phase ?? phaseOf(campaignId, K),
        };
        for (let j = 0; j < idx.length; j++) {
          const at = idx[j] as number;
          const planId = (planList.list[at] as PlanAtDay).plan.planId;
          const r = results[at] as PlanResult;
          if (r.encoded === undefined) r.encoded = encodePlanParams(r.params, r.day);
          const curve = encodeCurve(r.params.curve);
          if (held?.[1 + 2 * j] !== r.encoded) fields.push(`p:${planId}`, r.encoded);
          if (held?.[2 + 2 * j] !== curve) fields.push(`e:${planId}`, curve);
          m.encodedCurves[j] = curve;
          m.encoded[j] = r.encoded;
          m.params[j] = r.params;
          m.days[j] = r.day;
          m.curves[j] = r.params.curve;
        }
        writes.push({ campaignId, mode: replace ? 'F' : 'X', fields });
        created.push([campaignId, m]);
        continue;
      }
      const m = memory as CampaignMemory;
      const due = (tick + m.phase) % K === 0;
      const refresh = nowMs - m.expiryRefreshedAt >= this.expiryRefreshMs;
      let fields: string[] | undefined;
      for (let j = 0; j < idx.length; j++) {
        const at = idx[j] as number;
        const r = results[at] as PlanResult;
        const p = r.params;
        // A new curve object is compared by its encoding (controllers may rebuild equal curves).
        let curve: string | undefined;
        if (m.curves[j] !== p.curve) {
          curve = encodeCurve(p.curve);
          if (curve === m.encodedCurves[j]) {
            // Same knots as stored: remember the object (safe whatever this publish's fate).
            m.curves[j] = p.curve;
            curve = undefined;
          }
        }
        const curveChanged = curve !== undefined;
        const q = m.params[j] as PlanPacingParams;
        const d = m.days[j] as DayWindow;
        // Within the deadband: same budget, mode and day, throttle and multiplier moved little.
        const within =
          p.budgetMicros === q.budgetMicros &&
          p.mode === q.mode &&
          p.day === q.day &&
          r.day.startMs === d.startMs &&
          r.day.endMs === d.endMs &&
          Math.abs(p.throttle - q.throttle) <= dbT &&
          Math.abs(p.bidMultiplier - q.bidMultiplier) <= dbM * q.bidMultiplier;
        let paramsChanged = false;
        if (!within || due) {
          if (r.encoded === undefined) r.encoded = encodePlanParams(p, r.day);
          paramsChanged = r.encoded !== m.encoded[j];
        }
        if (!paramsChanged && !curveChanged) continue;
        const planId = (planList.list[at] as PlanAtDay).plan.planId;
        fields = fields ?? [];
        if (paramsChanged) fields.push(`p:${planId}`, r.encoded as string);
        if (curve !== undefined) fields.push(`e:${planId}`, curve);
        updates.push([m, j, r, paramsChanged, curve]);
      }
      if (fields || due || refresh) {
        writes.push({ campaignId, mode: refresh ? 'X' : 'P', fields: fields ?? [] });
        if (refresh) refreshed.push(m);
      }
    }
    return {
      writes,
      commit: () => {
        for (const [m, j, r, paramsChanged, curve] of updates) {
          // A plan written for its curve alone keeps the parameters stored before.
          if (paramsChanged) {
            m.encoded[j] = r.encoded as string;
            m.params[j] = r.params;
            m.days[j] = r.day;
          }
          if (curve !== undefined) {
            m.curves[j] = r.params.curve;
            m.encodedCurves[j] = curve;
          }
        }
        for (const [campaignId, m] of created) this.published.set(campaignId, m);
        for (const m of refreshed) m.expiryRefreshedAt = nowMs;
      },
    };
  }

  private staged = noStagedWrites();
  private pendingDeletes: { state: string[]; forecast: string[] } = { state: [], forecast: [] };

  private stateWrites(): { state: string[]; forecast: string[] } {
    const { controller } = this.options;
    const state: string[] = [];
    const forecast: string[] = [];
    const staged = noStagedWrites();
    this.staged = staged;
    for (const [field, m] of this.plans) {
      // A plan not stepped since a takeover loaded its stored state (`loadedState`, decoded at its
      // next step): what is stored is its state; this process's older object must not replace it.
      if (m.state !== undefined && m.loadedState === undefined) {
        const raw = controller.encodeState(m.state);
        if (raw !== m.writtenState) {
          state.push(field, raw);
          staged.state.push(m);
          staged.stateText.push(raw);
        }
      }
      if (m.forecast !== undefined && m.loadedForecast === undefined) {
        if (m.forecastTextOf !== m.forecast) {
          m.forecastText = controller.encodeForecast(m.forecast);
          m.forecastTextOf = m.forecast;
        }
        const raw = m.forecastText as string;
        if (raw !== m.writtenForecast) {
          forecast.push(field, raw);
          staged.forecast.push(m);
          staged.forecastText.push(raw);
        }
      }
    }
    return { state, forecast };
  }

  private commitStateWrites(): void {
    const { state, stateText, forecast, forecastText } = this.staged;
    for (let i = 0; i < state.length; i++) (state[i] as PlanMemory).writtenState = stateText[i];
    for (let i = 0; i < forecast.length; i++) (forecast[i] as PlanMemory).writtenForecast = forecastText[i];
    this.staged = noStagedWrites();
  }

  /**
   * A takeover: loads the controller state and forecasts the previous publisher stored, so this
   * publisher continues them (no jump in the parameters at a leader change), and forgets what it
   * believed was stored (every campaign hash is rewritten whole on this publish). Reads in parts
   * (shared/pacing/state-reload.ts): part k of the tick's plan list, aligned with the spend read's
   * parts, then every other plan of this process and of the budgets (paused campaigns' plans:
   * adopted, not stepped). A plan with nothing stored keeps this process's own state. Fields of
   * plans that no longer exist are looked for only when a hash holds more than the reads found
   * ({@link sweepUnknown}), and deleted with a later publish.
   */
  private beginReload(
    publisher: ShardPublisher,
    planList: PlanList,
    campaigns: readonly CampaignBudgets[],
  ): Reload {
    const startedAt = this.options.clock.now();
    const reloader =
      this.reloader ??
      new StateReloader({
        redis: this.options.redis,
        keys: publisher.keys,
        ...(this.options.redisSilenceMs === undefined ? {} : { timeoutMs: this.options.redisSilenceMs }),
      });
    this.reloader = reloader;
    // A reload of a tick that failed may still be landing: only the latest one adopts.
    const generation = ++this.reloads;
    this.published.clear();
    for (const m of this.plans.values()) {
      m.writtenState = undefined;
      m.writtenForecast = undefined;
    }
    const fields = planList.list.map((p) => p.field);
    // Plans not stepped this tick: this process's other memories, and the plans of the campaigns
    // not paced (paused: the active ones' are all in the list) that it has no memory of (one is
    // made only if something is stored for them).
    const restFields: string[] = [];
    const restPlans: (ResolvedPlan | undefined)[] = [];
    for (const [field, m] of this.plans) {
      if (m.listedIn === planList.id) continue;
      restFields.push(field);
      restPlans.push(undefined);
    }
    const unpaced = new Set<string>();
    for (const b of this.options.budgets.campaigns()) {
      if (b.campaign.status === 'active') continue;
      for (const p of plansOfCampaign(b)) {
        const field = planField(p);
        if (this.plans.has(field) || unpaced.has(field)) continue;
        unpaced.add(field);
        restFields.push(field);
        restPlans.push(p);
      }
    }
    const found = { state: 0, forecast: 0 };
    const adopt = (field: string, plan: ResolvedPlan | undefined, texts: StoredTexts, j: number) => {
      if (generation !== this.reloads) return;
      const s = texts.state[j];
      const f = texts.forecast[j];
      if (s === undefined && f === undefined) return;
      let m = this.plans.get(field);
      if (!m) {
        m = { plan: plan as ResolvedPlan, state: undefined, forecast: undefined };
        this.plans.set(field, m);
      }
      if (s !== undefined) {
        m.loadedState = s;
        m.writtenState = s;
        found.state++;
      }
      if (f !== undefined) {
        m.loadedForecast = f;
        m.writtenForecast = f;
        found.forecast++;
      }
    };
    const sizes = reloader.counts();
    sizes.catch(() => {});
    const parts = reloader.read(fields, SPEND_PART).map((part, k) =>
      part.then((texts) => {
        const from = k * SPEND_PART;
        for (let j = 0; j < texts.state.length; j++) adopt(fields[from + j] as string, undefined, texts, j);
      }),
    );
    const rest = Promise.all(
      reloader.read(restFields, REST_PART).map((part, k) =>
        part.then((texts) => {
          const from = k * REST_PART;
          for (let j = 0; j < texts.state.length; j++) {
            adopt(restFields[from + j] as string, restPlans[from + j], texts, j);
          }
        }),
      ),
    ).then(async () => {
      await Promise.all(parts);
      const stored = await sizes;
      if (stored.state > found.state || stored.forecast > found.forecast) {
        this.sweepUnknown(reloader, stored.state > found.state, stored.forecast > found.forecast, unpaced);
      }
    });
    // What the predecessor published in each campaign hash (read after the state: the state is
    // needed first, to step), so the whole rewrite skips the fields that already hold their value.
    const fieldsByPlans = new Map<string, string[]>();
    const fieldsOf = campaigns.map((b) => {
      const { plans, key } = campaignPlans(b);
      let fields = fieldsByPlans.get(key);
      if (fields === undefined) {
        fields = ['plans'];
        for (const p of plans) fields.push(`p:${p.planId}`, `e:${p.planId}`);
        fieldsByPlans.set(key, fields);
      }
      return fields;
    });
    const published = Promise.all(
      reloader.hmget(
        campaigns.map((b) => publisher.keys.campaign(b.campaign.campaignId)),
        (i) => fieldsOf[i] as string[],
        PUBLISHED_PART,
      ),
    ).then((parts) => parts.flat());
    // Handled here too: a tick that fails at an earlier part never awaits the later ones.
    for (const p of parts) p.catch(() => {});
    rest.catch(() => {});
    published.catch(() => {});
    return { parts, rest, published, startedAt };
  }

  /**
   * Finds the fields of plans that no longer exist (neither in the budgets nor met by this
   * process), off the tick's path; the next publish deletes them. One sweep at a time.
   */
  private sweepUnknown(
    reloader: StateReloader,
    state: boolean,
    forecast: boolean,
    unpaced: Set<string>,
  ): void {
    if (this.sweeping) return;
    // Every plan of the list, and every plan found stored, has a memory by now.
    const isKnown = (field: string) => this.plans.has(field) || unpaced.has(field);
    this.sweeping = Promise.all([
      state ? reloader.unknownFields('state', isKnown) : [],
      forecast ? reloader.unknownFields('forecast', isKnown) : [],
    ])
      .then(([s, f]) => {
        this.pendingDeletes = { state: s, forecast: f };
      })
      // A failed sweep is retried at the next takeover; nothing depends on it but memory.
      .catch(() => {})
      .finally(() => {
        this.sweeping = undefined;
      });
  }

  /** Waits for a sweep of deleted plans' fields in progress (tests). */
  async settled(): Promise<void> {
    await this.sweeping;
  }
}

/** Indexes of the `k` campaign-level plans with the largest daily budgets (one pass, small buffer). */
function topIndexes(list: readonly PlanAtDay[], k: number): Int32Array {
  const top: { i: number; budget: number }[] = [];
  for (let i = 0; i < list.length; i++) {
    const plan = (list[i] as PlanAtDay).plan;
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

/** A campaign's republish slot in [0, k): spreads the forced rewrites evenly over the ticks. */
function phaseOf(campaignId: string, k: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < campaignId.length; i++) h = Math.imul(h ^ campaignId.charCodeAt(i), 0x01000193);
  return (h >>> 0) % k;
}

const plansCache = new WeakMap<CampaignBudgets, { plans: ResolvedPlan[]; key: string }>();

function campaignPlans(b: CampaignBudgets): { plans: ResolvedPlan[]; key: string } {
  let cached = plansCache.get(b);
  if (!cached) {
    const arms = [...b.arms.entries()].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)).map(([, p]) => p);
    const plans = [...plansForBid(b, undefined), ...arms];
    cached = { plans, key: plans.map((p) => p.planId).join(',') };
    plansCache.set(b, cached);
  }
  return cached;
}

/**
 * Every plan of a campaign in publishing order: account, campaign, then arms by id (stable).
 * Cached per budgets object (the cache rebuilds that object when the campaign's budgets change).
 */
export function plansOfCampaign(b: CampaignBudgets): readonly ResolvedPlan[] {
  return campaignPlans(b).plans;
}

/** The `plans` field of a campaign hash: its plan ids in publishing order. */
function plansKeyOf(b: CampaignBudgets): string {
  return campaignPlans(b).key;
}

/** All fields of a hash, read with HSCAN in pages (a shard's state hash can be large). */
export async function scanHash(redis: RedisClient, key: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  let cursor = '0';
  do {
    const [next, flat] = await redis.hscan(key, cursor, 'COUNT', 10_000);
    for (let i = 0; i + 1 < flat.length; i += 2) out.set(flat[i] as string, flat[i + 1] as string);
    cursor = next;
  } while (cursor !== '0');
  return out;
}
