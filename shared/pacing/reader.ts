/**
 * `PacingReader`: how an ad server reads pacing parameters (DESIGN requirements 8 and 10).
 *
 * - **One response per campaign**: the account plan's, the campaign plan's and every arm's
 *   parameters come back in one HGETALL of the campaign hash (contract v2, docs/pacing.md); the
 *   shard's freshness comes from one HMGET of its claim hash per refresh round, in the same
 *   pipeline.
 * - **Local cache keyed to tick boundaries**: parameters change once per tick, so a campaign read
 *   once serves every request until the next publish. Lookups of cached campaigns are
 *   synchronous, no I/O ({@link PacingReader.lookup}).
 * - **Refresh-ahead**: the campaigns read during a tick are re-read together (one pipelined batch
 *   per cluster node) `settleMs` after the next tick boundary, when the pacer has published, so hot
 *   campaigns are replaced before they age and never miss; a campaign not read for `idleTicks`
 *   ticks is dropped.
 * - **Batch reads from the reply bytes**: refresh-ahead and prefetch read over raw RESP sockets
 *   (shared/redis/resp/hash-reader.ts), without ioredis' command object, promise and reply object per
 *   hash; an unchanged curve (`e:` text) is not parsed again. Single reads (a miss) use the client.
 *   Fetching and decoding live in {@link PublishedReads}, which several readers of one process can
 *   share (one read of a tick's hashes for all of them).
 * - **Staleness policy**: a plan's parameters older than `maxAgeMs` (or of a day that has ended)
 *   are replaced by the fail-safe — linear E(t) enforced by the guard, the day's last throttle and multiplier (`failSafeParams`) — and
 *   counted; a campaign with nothing published gets the fail-safe throttle too.
 * - **Metrics**: lookups, hits, misses, remote reads, stale serves, decode errors.
 */
import type { ResolvedPlan } from '../budget/model.js';
import { defaultCurve, type TargetCurve } from '../budget/pacing.js';
import type { DayWindow } from '../budget/time-zone.js';
import type { RedisClient } from '../redis/connect.js';
import type { Clock } from '../time/clock.js';
import type { PublishedCampaign, PublishedPlan } from './codec.js';
import { combineForBid, FAIL_SAFE_THROTTLE, failSafeParams } from './controller/index.js';
import { campaignParamsKey, shardClaimKey } from './keys.js';
import { PublishedReads, UNDECODABLE } from './published-reads.js';
import { evaluateCurve, type PlanPacingParams, TICK_MS } from './types.js';

/** Options of {@link PacingReader}. */
export interface PacingReaderOptions {
  readonly redis: RedisClient;
  readonly clock: Clock;
  /** The region's pacer shard count N (campaign keys are found from the account id). */
  readonly shards: number;
  /** @default TICK_MS (10 s) */
  readonly tickMs?: number;
  /** Parameters older than this are stale: the fail-safe is served instead. @default 3 ticks */
  readonly maxAgeMs?: number;
  /** How long after a tick boundary the pacer's publish is expected to have landed. @default 2_000 */
  readonly settleMs?: number;
  /** Campaigns not looked up for this many ticks are dropped from the cache. @default {@link DEFAULT_IDLE_TICKS} (60) */
  readonly idleTicks?: number;
  /** Called with background refresh failures (entries then age into the fail-safe). */
  readonly onError?: (error: unknown) => void;
  /**
   * While started, lookups read the time from a copy refreshed every this many ms instead of
   * asking the clock each time: reading the clock costs ~0.3 µs on a VM without a vDSO clock,
   * more than the rest of a cached lookup. View boundaries move by at most this much. @default 5
   */
  readonly clockResolutionMs?: number;
  /**
   * Batch reads (refresh-ahead, prefetch) over raw RESP sockets of their own, one per node (as
   * the pacer reads spend); false: through the client as pipelined HGETALLs. Single reads always
   * use the client, in order with the caller's other commands. @default true
   */
  readonly rawReads?: boolean;
  /**
   * Shares the fetching and decoding with other readers of this process: their batch reads issued
   * in the same turn of the event loop (refresh-ahead at the same tick boundary) are read and
   * decoded once ({@link PublishedReads}); each reader keeps its own cache, lookups and drops.
   * `rawReads` is then the shared instance's. Not closed with the reader. @default a reader's own
   */
  readonly reads?: PublishedReads;
}

/** Freshness of what a lookup returns. */
export type PacingStatus = 'fresh' | 'stale' | 'missing';

/** A campaign's parameters as an ad server uses them. */
export interface CampaignPacing {
  readonly campaignId: string;
  readonly status: PacingStatus;
  /** Tick of the publish (undefined when missing). */
  readonly tick?: number;
  /** Age of the publish at lookup, ms. */
  readonly ageMs?: number;
  /** Per plan id (`account`, `campaign`, `arm:<id>`); stale plans carry the fail-safe. */
  readonly plans: ReadonlyMap<string, PlanPacingParams>;
}

/** Throttle and multiplier for one bid (every plan that applies combined). */
export interface BidParams {
  readonly throttle: number;
  readonly bidMultiplier: number;
  readonly status: PacingStatus;
}

/** Counters (monotonic) of a reader. */
export interface ReaderMetrics {
  lookups: number;
  hits: number;
  /** Lookups that found nothing cached (a remote read was needed first). */
  misses: number;
  /** Campaign hashes read from Redis (misses and refresh-ahead). */
  remoteReads: number;
  /** Shard claim hashes read (contract v2 freshness: one per shard per fetch round). */
  shardReads: number;
  /** Lookups served fail-safe parameters for at least one plan (stale or missing). */
  staleServes: number;
  /** Campaign hashes that could not be decoded (served as missing). */
  decodeErrors: number;
  /** Refresh-ahead rounds run. */
  refreshes: number;
}

interface Entry {
  readonly accountId: string;
  readonly key: string;
  /** The campaign hash's and its shard claim's keys (computed once: a hash of the account id). */
  readonly paramsKey: string;
  readonly claimKey: string;
  published: PublishedCampaign | undefined;
  fetchedAtMs: number;
  lastLookupTick: number;
  // The view of the current tick, reused by every lookup until it expires (lookups allocate
  // nothing). Flat fields, all set when the entry is created: one object shape, few cache lines.
  /** The view is valid in [viewFrom, viewUntil): this tick, or until a plan turns stale. */
  viewFrom: number;
  viewUntil: number;
  viewValue: CampaignPacing | undefined;
  /** Combined parameters for bids without an arm, and per arm id. */
  noArm: BidParams | undefined;
  arms: Map<string, BidParams> | undefined;
}

/**
 * Default `idleTicks`: 60 ticks (10 min). A campaign is dropped from the cache only after this long
 * without a lookup, and a lookup of a dropped campaign is a miss served the fail-safe (throttle 1,
 * multiplier 1: full speed). One lookup a minute is common for small or narrowly targeted
 * campaigns (night traffic, one of several ad servers); with a one-minute window nearly every such
 * lookup missed and the controller's throttle never reached them (docs/pacing-quality.md).
 */
export const DEFAULT_IDLE_TICKS = 60;

const NO_PLANS: ReadonlyMap<string, PlanPacingParams> = new Map();

/** Reads and caches published pacing parameters (one per ad-server process). */
export class PacingReader {
  readonly metrics: ReaderMetrics = {
    lookups: 0,
    hits: 0,
    misses: 0,
    remoteReads: 0,
    shardReads: 0,
    staleServes: 0,
    decodeErrors: 0,
    refreshes: 0,
  };
  private readonly entries = new Map<string, Entry>();
  /** Campaign ids cached per account (the account plan's parameters are in each of them). */
  private readonly byAccount = new Map<string, Set<string>>();
  private readonly inflight = new Map<string, Promise<Entry>>();
  /** Fetches and decodes campaign hashes (shared with other readers when given in the options). */
  private readonly reads: PublishedReads;
  /** Whether `reads` is this reader's own (closed with it). */
  private readonly ownsReads: boolean;
  private readonly tickMs: number;
  private readonly maxAgeMs: number;
  private readonly settleMs: number;
  private readonly idleTicks: number;
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  /** The coarse time while started (see `clockResolutionMs`); undefined: ask the clock. */
  private coarseNow: number | undefined;
  private coarseTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: PacingReaderOptions) {
    this.tickMs = options.tickMs ?? TICK_MS;
    this.maxAgeMs = options.maxAgeMs ?? 3 * this.tickMs;
    this.settleMs = options.settleMs ?? 2_000;
    this.idleTicks = options.idleTicks ?? DEFAULT_IDLE_TICKS;
    this.ownsReads = options.reads === undefined;
    this.reads = options.reads ?? new PublishedReads({ redis: options.redis, rawReads: options.rawReads });
  }

  /**
   * The campaign's parameters from the cache, synchronously; undefined when not cached (then
   * call {@link get}, or serve the fail-safe and let {@link prefetch} fill the cache).
   */
  lookup(campaignId: string): CampaignPacing | undefined {
    const now = this.options.clock.now();
    this.metrics.lookups++;
    const entry = this.entries.get(campaignId);
    if (!entry) return undefined;
    this.metrics.hits++;
    return this.view(entry, now);
  }

  /** The campaign's parameters: from the cache, else one remote read (then cached). */
  async get(accountId: string, campaignId: string): Promise<CampaignPacing> {
    const cached = this.lookup(campaignId);
    if (cached) return cached;
    this.metrics.misses++;
    const entry = await this.fetchOne(accountId, campaignId);
    return this.view(entry, this.options.clock.now());
  }

  /**
   * Throttle and bid multiplier for a bid of `campaignId` (arm `armId`), from the cache only
   * (synchronous); a campaign not cached yet gets the fail-safe throttle and is fetched in the
   * background.
   */
  forBid(accountId: string, campaignId: string, armId?: string): BidParams {
    const entry = this.entries.get(campaignId);
    this.metrics.lookups++;
    if (!entry) {
      this.metrics.misses++;
      this.metrics.staleServes++;
      void this.fetchOne(accountId, campaignId).catch((e: unknown) => this.options.onError?.(e));
      return { throttle: FAIL_SAFE_THROTTLE, bidMultiplier: 1, status: 'missing' };
    }
    this.metrics.hits++;
    // Fast path: this tick's view of the campaign, with the combination per arm memoised.
    const now = this.coarseNow ?? this.options.clock.now();
    if (now >= entry.viewUntil || now < entry.viewFrom) this.view(entry, now);
    else if ((entry.viewValue as CampaignPacing).status !== 'fresh') this.metrics.staleServes++;
    if (armId === undefined) {
      if (entry.noArm) return entry.noArm;
    } else {
      const hit = entry.arms?.get(armId);
      if (hit) return hit;
    }
    const pacing = entry.viewValue as CampaignPacing;
    const plans: PlanPacingParams[] = [];
    const a = pacing.plans.get('account');
    const c = pacing.plans.get('campaign');
    if (a) plans.push(a);
    if (c) plans.push(c);
    if (armId !== undefined) {
      const arm = pacing.plans.get(`arm:${armId}`);
      if (arm) plans.push(arm);
    }
    const combined =
      pacing.status === 'missing' ? { throttle: FAIL_SAFE_THROTTLE, bidMultiplier: 1 } : combineForBid(plans);
    const out: BidParams = { ...combined, status: pacing.status };
    if (armId === undefined) entry.noArm = out;
    else {
      entry.arms = entry.arms ?? new Map();
      entry.arms.set(armId, out);
    }
    return out;
  }

  /**
   * Reads one campaign into the cache now (joining a read already in progress), whether cached or
   * not: the guard's curve calls it before a lease when it holds nothing fresh for the campaign.
   */
  async refresh(accountId: string, campaignId: string): Promise<void> {
    await this.fetchOne(accountId, campaignId);
  }

  /** Reads campaigns into the cache ahead of traffic (one pipelined batch per node). */
  async prefetch(campaigns: readonly { accountId: string; campaignId: string }[]): Promise<void> {
    await this.fetchMany(
      campaigns.map((c) => ({ accountId: c.accountId, campaignId: c.campaignId })),
      true,
    );
  }

  /**
   * Refresh-ahead round: re-reads every campaign looked up in the last `idleTicks` ticks and drops
   * the others. {@link start} runs it `settleMs` after every tick boundary; tests call it directly.
   */
  async refreshDue(): Promise<void> {
    const tick = Math.floor(this.options.clock.now() / this.tickMs);
    const due: { accountId: string; campaignId: string }[] = [];
    for (const [campaignId, e] of this.entries) {
      if (tick - e.lastLookupTick > this.idleTicks) {
        this.entries.delete(campaignId);
        this.byAccount.get(e.accountId)?.delete(campaignId);
      } else due.push({ accountId: e.accountId, campaignId });
    }
    this.metrics.refreshes++;
    if (due.length > 0) await this.fetchMany(due, true);
  }

  /** Starts refresh-ahead on real timers, `settleMs` after each tick boundary of the clock. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.coarseNow = this.options.clock.now();
    this.coarseTimer = setInterval(() => {
      this.coarseNow = this.options.clock.now();
    }, this.options.clockResolutionMs ?? 5);
    this.coarseTimer.unref?.();
    const arm = () => {
      if (!this.running) return;
      const now = this.options.clock.now();
      const next = (Math.floor((now - this.settleMs) / this.tickMs) + 1) * this.tickMs + this.settleMs;
      this.timer = setTimeout(() => {
        void this.refreshDue()
          .catch((e: unknown) => this.options.onError?.(e))
          .finally(arm);
      }, next - now);
      this.timer.unref?.();
    };
    arm();
  }

  /** Stops refresh-ahead. */
  close(): void {
    this.running = false;
    if (this.timer) clearTimeout(this.timer);
    if (this.coarseTimer) clearInterval(this.coarseTimer);
    this.coarseNow = undefined;
    if (this.ownsReads) this.reads.close();
  }

  /** Published parameters of a plan, if cached and fresh (the guard's curve uses this). */
  freshPlan(
    plan: Pick<ResolvedPlan, 'accountId' | 'campaignId' | 'planId'>,
    day: DayWindow,
  ): PublishedPlan | undefined {
    const now = this.options.clock.now();
    const entry =
      plan.campaignId !== undefined ? this.entries.get(plan.campaignId) : this.accountEntry(plan.accountId);
    const published = entry?.published;
    if (!published || now - published.publishedAtMs > this.maxAgeMs) return undefined;
    const p = published.plans.get(plan.planId);
    if (!p || p.day !== day.day || now >= p.dayWindow.endMs) return undefined;
    return p;
  }

  private accountEntry(accountId: string): Entry | undefined {
    // Any campaign of the account carries the account plan's parameters; take the freshest.
    let best: Entry | undefined;
    for (const campaignId of this.byAccount.get(accountId) ?? []) {
      const e = this.entries.get(campaignId);
      if (!e?.published?.plans.has('account')) continue;
      if (!best || e.published.publishedAtMs > (best.published?.publishedAtMs ?? 0)) best = e;
    }
    return best;
  }

  private view(entry: Entry, now: number): CampaignPacing {
    const tick = Math.floor(now / this.tickMs);
    entry.lastLookupTick = tick;
    if (entry.viewValue && now >= entry.viewFrom && now < entry.viewUntil) {
      if (entry.viewValue.status !== 'fresh') this.metrics.staleServes++;
      return entry.viewValue;
    }
    const value = this.build(entry, now);
    if (value.status !== 'fresh') this.metrics.staleServes++;
    const published = entry.published;
    let staleAfter = Number.POSITIVE_INFINITY;
    if (published) {
      staleAfter = published.publishedAtMs + this.maxAgeMs;
      for (const p of published.plans.values()) staleAfter = Math.min(staleAfter, p.dayWindow.endMs);
    }
    const tickStartMs = tick * this.tickMs;
    entry.viewFrom = tickStartMs;
    entry.viewUntil = Math.min(staleAfter, tickStartMs + this.tickMs);
    entry.viewValue = value;
    entry.noArm = undefined;
    entry.arms = undefined;
    return value;
  }

  private build(entry: Entry, now: number): CampaignPacing {
    const campaignId = entry.key;
    const published = entry.published;
    if (!published) return { campaignId, status: 'missing', plans: NO_PLANS };
    const ageMs = now - published.publishedAtMs;
    const tooOld = ageMs > this.maxAgeMs;
    let stale = tooOld;
    const plans = new Map<string, PlanPacingParams>();
    for (const [planId, p] of published.plans) {
      if (tooOld || now >= p.dayWindow.endMs) {
        stale = true;
        plans.set(
          planId,
          // The last parameters of the same day stay the best guess of the market (throttle and
          // multiplier); E(t) becomes the linear day curve, which the guard enforces.
          failSafeParams(
            { planId, pacingMode: p.mode, dailyBudgetMicros: p.budgetMicros },
            p.dayWindow,
            tooOld ? { last: p } : {},
          ),
        );
      } else plans.set(planId, p);
    }
    return { campaignId, status: stale ? 'stale' : 'fresh', tick: published.tick, ageMs, plans };
  }

  private async fetchOne(accountId: string, campaignId: string): Promise<Entry> {
    const pending = this.inflight.get(campaignId);
    if (pending) return pending;
    const p = this.fetchMany([{ accountId, campaignId }]).then(() => this.entries.get(campaignId) as Entry);
    this.inflight.set(campaignId, p);
    try {
      return await p;
    } finally {
      this.inflight.delete(campaignId);
    }
  }

  /**
   * Reads campaign hashes (and their shards' claim hashes) into the cache. `batch` (refresh-ahead,
   * prefetch): merged with the batch reads other readers sharing `reads` issue in this turn, over
   * the raw sockets when enabled; a single read (a miss, `refresh`) goes through the client,
   * ordered with the caller's other commands.
   */
  private async fetchMany(
    items: readonly { accountId: string; campaignId: string }[],
    batch = false,
  ): Promise<void> {
    const keyed = items.map((i) => {
      // A cached campaign's keys are the entry's (refresh-ahead re-reads every campaign each tick).
      const e = this.entries.get(i.campaignId);
      return e !== undefined && e.accountId === i.accountId
        ? { accountId: i.accountId, campaignId: i.campaignId, key: e.paramsKey, claim: e.claimKey }
        : {
            accountId: i.accountId,
            campaignId: i.campaignId,
            key: campaignParamsKey(i.accountId, i.campaignId, this.options.shards),
            claim: shardClaimKey(i.accountId, this.options.shards),
          };
    });
    const decoded = batch ? await this.reads.batch(keyed) : await this.reads.direct(keyed);
    const now = this.options.clock.now();
    const tick = Math.floor(now / this.tickMs);
    this.metrics.remoteReads += keyed.length;
    this.metrics.shardReads += new Set(keyed.map((i) => i.claim)).size;
    for (let i = 0; i < keyed.length; i++) {
      const item = keyed[i] as (typeof keyed)[number];
      const read = decoded[i];
      let published: PublishedCampaign | undefined;
      if (read === UNDECODABLE) this.metrics.decodeErrors++;
      else published = read;
      const prev = this.entries.get(item.campaignId);
      if (prev !== undefined && prev.accountId === item.accountId) {
        // Updated in place: refresh-ahead replaces every cached campaign each tick, and entries
        // that stay put (no object per campaign per tick) keep the collector's work down.
        prev.published = published;
        prev.fetchedAtMs = now;
        prev.viewFrom = 0;
        prev.viewUntil = 0;
        prev.viewValue = undefined;
        prev.noArm = undefined;
        prev.arms = undefined;
        continue;
      }
      const set = this.byAccount.get(item.accountId) ?? new Set<string>();
      this.byAccount.set(item.accountId, set);
      set.add(item.campaignId);
      this.entries.set(item.campaignId, {
        accountId: item.accountId,
        key: item.campaignId,
        paramsKey: item.key,
        claimKey: item.claim,
        published,
        fetchedAtMs: now,
        lastLookupTick: prev?.lastLookupTick ?? tick,
        viewFrom: 0,
        viewUntil: 0,
        viewValue: undefined,
        noArm: undefined,
        arms: undefined,
      });
    }
  }
}

/**
 * The budget guard's E(t) from the pacer's published curves (a {@link TargetCurve} over the
 * reader), so the hard cap and the pacing agree: the published curve when fresh, the linear curve
 * (`fallback`) when stale or missing — never above the plan's own daily budget.
 */
export function publishedCurve(reader: PacingReader, fallback: TargetCurve = defaultCurve): TargetCurve {
  return {
    // Before a lease: a campaign this reader does not hold fresh (never looked up, dropped as idle,
    // refresh not landed) is read now, so the guard caps at the published curve, not at the
    // fail-safe — the fail-safe is for parameters that are stale or missing in Redis.
    async prepare(plan, day) {
      if (plan.campaignId === undefined || reader.freshPlan(plan, day)) return;
      await reader.refresh(plan.accountId, plan.campaignId);
    },
    expectedMicros(plan, day, nowMs) {
      const p = reader.freshPlan(plan, day);
      // The fallback's copy of the plan only when it is used (every lease call comes here).
      const e = p
        ? evaluateCurve(p.curve, nowMs)
        : fallback.expectedMicros({ ...plan, pacingMode: 'even' }, day, nowMs);
      return Math.min(e, plan.dailyBudgetMicros);
    },
  };
}
