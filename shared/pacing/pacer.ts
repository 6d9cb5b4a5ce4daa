/**
 * One tick of one pacer shard, in one process: the domain of the pacer function (the handler only
 * wires it). Every instance runs every tick — warm budgets cache, controller state, connections —
 * and only the publisher writes:
 *
 * 1. read the control parameters (SSM: publish switch of the region, leader override of the shard);
 * 2. renew / take the lease (DynamoDB);
 * 3. refresh the shard's budgets (incremental index query; the cache serves through an outage;
 *    a cold process loads the Redis snapshot first: budgets-snapshot.ts);
 * 4. decide the role: the override's named instance, else the lease holder, publishes — only when
 *    the region's `publisher-region` names this region — with fence (g, o, e);
 * 5. the publisher claims the tick (Lua); a claim that does not continue this process's own last
 *    publish reloads the state the previous publisher stored (no jump at a leader change), in parts
 *    read beside the spend (state-reload.ts `TakeoverReloads`), rewriting every campaign hash whole;
 * 6. read every plan-day's live spend (one pipelined read, in parts), step the controller for
 *    each part as its spend (and, on a takeover, its stored state) arrives (plan-list.ts: the
 *    plan memories, the tick's work list, `stepPlans`);
 * 7. the publisher writes the campaign hashes that changed beyond the deadband or are due for
 *    their bounded republish (campaign-writes.ts), changed states and forecasts (fenced Lua
 *    batches); the last batch records the completed publish in the claim hash, which readers take
 *    freshness from (v2). Options and the tick's outcome: tick-outcome.ts.
 */

import type { CampaignBudgets } from '../budget/model.js';
import { refreshBudgets, snapshotTakenAt, snapshotWrites } from './budgets-snapshot.js';
import { CampaignHashes, type CampaignWrites, type PlanResult } from './campaign-writes.js';
import { type ControlSnapshot, overrideActive } from './control.js';
import type { PriorBook, PriorLookup } from './controller/api.js';
import { deliveryCounts } from './delivery-counts.js';
import type { Fence } from './fence.js';
import { shardKeys } from './keys.js';
import { type PlanAtDay, PlanBook, type PlanList, type StepContext, stepPlans } from './plan-list.js';
import { type ClaimOutcome, type PublishOutcome, ShardPublisher } from './publisher.js';
import type { RegionSharing } from './regions/region-shares.js';
import { type Reload, TakeoverReloads } from './state-reload.js';
import {
  type CampaignSpendPoint,
  type ShardPacerOptions,
  skippedOutcome,
  type TickIdentity,
  type TickOutcome,
  topCampaignPoints,
} from './tick-outcome.js';
import type { PlanSpendSnapshot } from './types.js';

export { scanHash } from './budgets-snapshot.js';
export { plansOfCampaign } from './plan-list.js';
export {
  type CampaignSpendPoint,
  type ControlHandle,
  type LeaseHandle,
  type ShardPacerOptions,
  type TickIdentity,
  type TickOutcome,
  TOP_CAMPAIGNS_REPORTED,
  topCampaignPoints,
} from './tick-outcome.js';

/**
 * Plans per part of the parts spend read: small enough that the controller starts early (5,000 left it
 * idle until Redis answered every key, then Redis idle: 3 % of a daytime hour), yet per-part costs are noise.
 */
const SPEND_PART = 300;

/** A plan list and the tick's steps over it. */
interface Stepped {
  readonly claimed: Claimed;
  readonly spend: PlanSpendSnapshot[];
  readonly loaded: Awaited<ReturnType<RegionSharing['load']>> | undefined;
  readonly results: PlanResult[];
  readonly invalid: number;
  /** When the last spend part arrived. */
  readonly spendDone: number;
}

/** The claim step's outcome. */
interface Claimed {
  readonly claim?: ClaimOutcome;
  readonly reload?: Reload;
  readonly ageMs: number | undefined;
}

/** What the tick works on once its inputs are in. */
interface TickWork {
  readonly tick: number;
  readonly who: TickIdentity;
  readonly fence: Fence | undefined;
  readonly publisher: ShardPublisher;
  readonly nowMs: number;
  readonly campaigns: readonly CampaignBudgets[];
  readonly planList: PlanList;
}

/** The pacer of one shard in one process (warm state across ticks and invocations). */
export class ShardPacer {
  private readonly book = new PlanBook();
  private readonly hashes: CampaignHashes;
  private readonly reloads: TakeoverReloads;
  private lastPublished: { publisherId: string; tick: number } | undefined;
  private readonly publishers = new Map<string, ShardPublisher>();
  private readonly republishTicks: number;
  /** Priors for plans without a forecast of their own, from the shard's learned forecasts. */
  private readonly priors: PriorBook | undefined;
  private readonly priorLookup: PriorLookup | undefined;
  private active: { generation: number; list: readonly CampaignBudgets[] } | undefined;
  /** The first fail-safe reason of the tick in progress (reset as its steps begin). */
  private invalidReason: string | undefined;

  constructor(private readonly options: ShardPacerOptions) {
    this.priors = options.controller.createPriorBook?.();
    this.priorLookup = this.priors?.lookup;
    const deadband = options.deadband ?? { throttle: 0.001, multiplier: 0.001 };
    const k = options.republishTicks ?? 6;
    if (!Number.isSafeInteger(k) || k < 1)
      throw new RangeError(
        `republishTicks must be a positive integer (got ${k}): ticks between forced rewrites`,
      );
    if (!(deadband.throttle >= 0 && deadband.multiplier >= 0))
      throw new RangeError('deadband throttle and multiplier must be ≥ 0 (0 and 0: publish every change)');
    this.republishTicks = k;
    this.hashes = new CampaignHashes({
      republishTicks: k,
      deadband,
      expiryRefreshMs: options.expiryRefreshMs ?? 3_600_000,
    });
    this.reloads = new TakeoverReloads({
      redis: options.redis,
      keys: shardKeys(options.shard),
      clock: options.clock,
      book: this.book,
      ...(options.redisSilenceMs === undefined ? {} : { timeoutMs: options.redisSilenceMs }),
    });
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
    const { clock, shard } = this.options;
    const startedAtMs = clock.now();
    const publisher = this.publisher(who.publisherId);
    // SSM, DynamoDB (lease, budgets) and Redis (snapshot) are independent: one round of latency.
    const [control, lease, budgets] = await Promise.all([
      who.control.read(),
      who.lease.tick(),
      refreshBudgets(this.options.redis, publisher.keys.budgets, this.options.budgets),
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
    if (!this.options.budgets.loaded) return skippedOutcome(base, clock.now() - startedAtMs, budgets.error);
    const fence = this.fenceOf(snapshot, who);
    // The claim (publisher) and the spend read (everyone) overlap; the controller steps after the
    // claim, because a new publisher first loads the state its predecessor published.
    const nowMs = clock.now();
    const campaigns = this.activeCampaigns();
    const planList = this.book.list(campaigns, nowMs, this.options.budgets.generation);
    const work: TickWork = { tick, who, fence, publisher, nowMs, campaigns, planList };
    const stepped = await this.claimAndStep(work);
    // With the parts read, `step` is what is left after the last part arrived.
    const stepDone = clock.now();
    const { claimed } = stepped;
    let reloadMs: number | undefined;
    if (claimed.reload) {
      // The plans not stepped this tick hold their stored state before any state is encoded.
      await claimed.reload.rest;
      reloadMs = clock.now() - claimed.reload.startedAt;
    }
    const publishing = claimed.claim?.accepted === true && fence !== undefined;
    const done = publishing ? await this.publish(work, fence, stepped) : undefined;
    if (!publishing) this.book.keepTextsCurrent(this.options.controller, planList, stepped.results);
    const landed = done?.publish.rejectedBatches === 0;
    const sharing = await this.recordSharing(work, stepped, landed);
    const endMs = clock.now();
    const plans = planList.list;
    return {
      ...base,
      durationMs: endMs - startedAtMs,
      isLeader: fence !== undefined,
      published: landed,
      ...(fence ? { fence } : {}),
      ...(claimed.claim ? { claim: { accepted: claimed.claim.accepted, reason: claimed.claim.reason } } : {}),
      ...(done ? { publish: done.publish, publishLagMs: done.lagMs } : {}),
      fencedWritesRejected:
        (claimed.claim && !claimed.claim.accepted ? 1 : 0) + (done?.publish.rejectedBatches ?? 0),
      campaignsPaced: campaigns.length,
      plansPaced: plans.length,
      invalidParams: stepped.invalid,
      ...(this.invalidReason === undefined ? {} : { invalidReason: this.invalidReason }),
      ...(claimed.ageMs === undefined ? {} : { paramsAgeMs: claimed.ageMs }),
      stateReloaded: claimed.reload !== undefined,
      ...(sharing ? { sharing } : {}),
      ...(landed ? { topCampaigns: this.topCampaigns(planList, stepped, nowMs) } : {}),
      // Once a minute (the metrics' period), by the instance that published.
      ...(landed && nowMs % 60_000 < this.options.tickMs
        ? {
            delivery: deliveryCounts({
              plans,
              byCampaign: planList.byCampaign,
              spend: stepped.spend,
              results: stepped.results,
              nowMs,
            }),
          }
        : {}),
      phasesMs: {
        inputs: inputsDone - startedAtMs,
        claimAndSpend: stepped.spendDone - inputsDone,
        step: stepDone - stepped.spendDone,
        publish: endMs - stepDone,
        ...(reloadMs === undefined ? {} : { reload: reloadMs }),
      },
    };
  }

  /** Waits for a sweep of deleted plans' fields in progress (tests). */
  async settled(): Promise<void> {
    await this.reloads.settled();
  }

  /** Closes its own raw connection (takeover reloads) before the client closes: a dropped pacer. */
  close(): void {
    this.reloads.close();
  }

  /**
   * The role: the override's named instance, else the lease holder, publishes — only when the
   * region's `publisher-region` names this region — with fence (g, o, e); undefined: follow.
   */
  private fenceOf(snapshot: ControlSnapshot | undefined, who: TickIdentity): Fence | undefined {
    if (!snapshot || snapshot.publisherRegion !== this.options.region) return undefined;
    if (overrideActive(snapshot)) {
      return snapshot.override === who.instanceId
        ? { g: snapshot.generation, o: snapshot.overrideVersion, e: 0 }
        : undefined;
    }
    if (!who.lease.heldAt(this.options.clock.now())) return undefined;
    return { g: snapshot.generation, o: snapshot.overrideVersion, e: who.lease.epoch };
  }

  /**
   * The claim (a publisher's; a claim that does not continue this process's own last publish
   * begins a takeover's reload) and the age of the shard's last claim (everyone's).
   */
  private async claim(work: TickWork): Promise<Claimed> {
    const { fence, publisher, tick, who } = work;
    if (!fence) return { ageMs: await this.claimAge(publisher) };
    const claim = await publisher.claim(fence, tick, this.options.clock.now());
    if (!claim.accepted) return { claim, ageMs: await this.claimAge(publisher) };
    await this.options.afterClaim?.();
    const continuous =
      claim.previous?.publisher === who.publisherId &&
      this.lastPublished?.publisherId === who.publisherId &&
      this.lastPublished.tick === claim.previous.tick;
    if (continuous) return { claim, ageMs: 0 };
    // Forgets what it believed was stored: every campaign hash is rewritten whole on this publish.
    this.hashes.clear();
    // Not awaited: each part is awaited before it is stepped.
    const reload = this.reloads.begin(
      work.planList,
      work.campaigns,
      this.options.budgets.campaigns(),
      SPEND_PART,
    );
    return { claim, reload, ageMs: 0 };
  }

  /**
   * The claim, the spend read and the peers' shares, then one controller step per plan. With a
   * spend source that reads in parts, each plan steps alone (its region share needs only its own
   * spend and the peers' summaries): each part is stepped as it arrives (once the claim and the
   * peers' load are settled, on a takeover the part's stored state) while Redis serves the rest.
   */
  private async claimAndStep(work: TickWork): Promise<Stepped> {
    const { clock, sharing, spend: source } = this.options;
    const { nowMs } = work;
    const plans = work.planList.list;
    const keys = plans.map((p) => p.spendKey);
    this.invalidReason = undefined;
    const results: PlanResult[] = new Array(plans.length);
    if (!source.readParts) {
      const [claimed, spend, loaded] = await Promise.all([
        this.claim(work),
        source.read(keys, nowMs),
        sharing?.load(nowMs),
      ]);
      if (claimed.reload) await Promise.all(claimed.reload.parts);
      const spendDone = clock.now();
      this.priors?.refresh(nowMs, this.book.plans.values());
      const shares = sharing?.budgets(plans, spend, nowMs);
      const invalid = stepPlans(this.stepping(nowMs), plans, spend, shares, results, 0, plans.length);
      return { claimed, spend, loaded, results, invalid, spendDone };
    }
    const parts = source.readParts(keys, nowMs, SPEND_PART);
    const [claimed, loaded] = await Promise.all([this.claim(work), sharing?.load(nowMs)]);
    this.priors?.refresh(nowMs, this.book.plans.values());
    const spend: PlanSpendSnapshot[] = new Array(plans.length);
    let spendDone = clock.now();
    let invalid = 0;
    for (let k = 0; k < parts.length; k++) {
      const part = await (parts[k] as Promise<PlanSpendSnapshot[]>);
      // A takeover: the part's stored state first (the reload's parts are aligned with these).
      if (claimed.reload) await claimed.reload.parts[k];
      spendDone = clock.now();
      const from = k * SPEND_PART;
      const to = from + part.length;
      for (let j = 0; j < part.length; j++) spend[from + j] = part[j] as PlanSpendSnapshot;
      const shares = sharing?.budgets(plans.slice(from, to), part, nowMs);
      invalid += stepPlans(this.stepping(nowMs), plans, spend, shares, results, from, to);
      // Lets the event loop turn between parts: the reads' commands still queued in this process
      // go out and their replies come in while the controller steps (parts that are already in
      // are awaited in microtasks, which would step them all without a turn while Redis idles).
      if (k + 1 < parts.length) await new Promise<void>((resolve) => setImmediate(resolve));
    }
    return { claimed, spend, loaded, results, invalid, spendDone };
  }

  /**
   * The fenced publish: changed states and forecasts, the budgets snapshot's changes, deleted plans'
   * fields a sweep found, the campaign hashes (built while Redis runs the state batches, sent first;
   * on a takeover once what each hash holds is read, its tail overlapping them). Remembers what landed.
   */
  private async publish(
    work: TickWork,
    fence: Fence,
    stepped: Stepped,
  ): Promise<{ publish: PublishOutcome; lagMs: number }> {
    const { clock, budgets, controller } = this.options;
    const { campaigns, planList, nowMs, tick, publisher } = work;
    const reading = stepped.claimed.reload?.published;
    await this.options.beforePublish?.();
    const { state, forecast } = this.book.stateWrites(controller);
    let writes: CampaignWrites | undefined;
    // The snapshot is written whole only when there is none yet (or it was lost with Redis); a new
    // publisher mirrors only the changes its predecessor may not have (budgets-snapshot.ts).
    const since = reading
      ? await snapshotTakenAt(this.options.redis, publisher.keys.budgets)
      : Number.NEGATIVE_INFINITY;
    const snapshot = snapshotWrites(budgets, since, nowMs);
    // Fields of deleted plans found by a sweep; a plan met again since keeps its own.
    const pending = this.reloads.pendingDeletes;
    const plans = this.book.plans;
    const build = (stored?: (string | undefined)[][]) => {
      writes = this.hashes.writes(campaigns, planList, stepped.results, nowMs, tick, stored);
      return writes.writes;
    };
    const publish = await publisher.publish({
      fence,
      tick,
      nowMs: clock.now(),
      campaigns: reading ? async () => build(await reading) : () => build(),
      state: { set: state, del: pending.state.filter((f) => !plans.has(f)) },
      forecast: { set: forecast, del: pending.forecast.filter((f) => !plans.has(f)) },
      budgets: { set: snapshot.set, del: snapshot.del },
      replaceBudgets: snapshot.replace,
      republishMs: (this.republishTicks + 1) * this.options.tickMs,
    });
    const lagMs = clock.now() - tick * this.options.tickMs;
    if (publish.rejectedBatches === 0) {
      (writes as CampaignWrites | undefined)?.commit();
      this.book.commitStateWrites();
      // A sweep that finished during this publish left its own list for the next one.
      if (this.reloads.pendingDeletes === pending) this.reloads.pendingDeletes = { state: [], forecast: [] };
      this.lastPublished = { publisherId: work.who.publisherId, tick };
    } else {
      // Lost the claim mid-publish: whatever landed, the next publish by this process is whole.
      this.hashes.clear();
      this.lastPublished = undefined;
    }
    return { publish, lagMs };
  }

  /** Region shares: the peers' summaries read and this region's written (when it published). */
  private async recordSharing(
    work: TickWork,
    stepped: Stepped,
    landed: boolean,
  ): Promise<TickOutcome['sharing']> {
    const { sharing } = this.options;
    const { loaded } = stepped;
    if (!sharing || !loaded) return undefined;
    const written = await sharing.record(
      work.planList.list,
      stepped.spend,
      stepped.results.map((r) => r.params),
      work.nowMs,
      work.tick,
      landed ? { writer: work.who.publisherId } : undefined,
    );
    const error = loaded.error ?? written.error;
    return {
      loaded: loaded.ok,
      ...(landed ? { written: written.ok } : {}),
      ...(error ? { error } : {}),
      ...(written.allocation ? { allocation: written.allocation } : {}),
    };
  }

  /** The shard's largest campaign plans against their target (the candidates the list chose). */
  private topCampaigns(planList: PlanList, stepped: Stepped, nowMs: number): CampaignSpendPoint[] {
    const { top, list } = planList;
    return topCampaignPoints(
      Array.from(top, (i) => list[i] as PlanAtDay),
      Array.from(top, (i) => stepped.spend[i] as PlanSpendSnapshot),
      Array.from(top, (i) => stepped.results[i] as PlanResult),
      nowMs,
    );
  }

  /** What each plan's step is given besides its own inputs; the first fail-safe reason is kept. */
  private stepping(nowMs: number): StepContext {
    return {
      controller: this.options.controller,
      prior: this.priorLookup,
      nowMs,
      onInvalid: (reason) => {
        this.invalidReason ??= reason;
      },
    };
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
}
