/**
 * The market simulator's engine: replays a {@link Scenario}'s days of auctions, second by second on
 * a `ManualClock`, against the production pacing path on a real redis-server:
 *
 * - the pacer: `ShardPacer` (budgets from a real `ShardBudgets` cache fed by the scenario's
 *   budget items, live spend through `rawSpendSource` as the pacer function reads it, the
 *   strategy's controller, the fenced claim + publish Lua scripts of `publisher.ts` and the pacing
 *   codec) ticking every 10 s;
 * - ad servers (`scenario.guards` of them): each a `PacingReader` (refresh-ahead after every tick,
 *   `forBid` per bid) and a `BudgetGuard` whose E(t) is `publishedCurve(reader)`;
 * - spend: every win/loss notice through the real `SpendTracker` into the live counters, with an
 *   in-memory ledger holding the DynamoDB ledger's contract; counters lost with Redis are rebuilt
 *   by the real `Reconciler` from it;
 * - the market (`sim/market/`): global request traffic from an hourly shape with noise, spikes
 *   and outages; each request has a segment and is eligible for the campaigns that target it
 *   (deterministic per request and campaign, so every strategy sees the same requests); our
 *   eligible bids and the market's best competing bid (iPinYou clearing prices, scaled, shifted)
 *   meet in one second- or first-price auction; notices are delayed, lost and duplicated;
 * - faults: the leader killed (no publisher for the lease TTL, then a new process takes over
 *   with a higher lease epoch and decodes the stored state), Redis restarted empty (FLUSHALL),
 *   notices stalled (delivered when the stall ends), the region flipped (a new publisher identity
 *   with a higher fence generation g; the old one, still reading the old control value for a few
 *   ticks, is refused by the fence).
 *
 * Deterministic for (scenario, seed): every draw comes from seeded generators, and every Redis
 * call is awaited at fixed points of the simulated second. Calls go over the client's connection,
 * except the lease and apply scripts (the client's raw script connection, shared by the guards and
 * the tracker: one ordered stream, shared/redis/resp/script-caller.ts) and the pacer's spend read (raw
 * sockets that only read once the writes before it are acknowledged); within a phase, what runs on
 * different connections touches disjoint keys.
 */

import { Redis } from 'ioredis';
import type { CampaignBudgets, PacingMode, ResolvedPlan } from '../shared/budget/model.js';
import type { TargetCurve } from '../shared/budget/pacing.js';
import { ShardBudgets } from '../shared/pacing/budgets-cache.js';
import type { ControlSnapshot } from '../shared/pacing/control.js';
import type { LeaseView } from '../shared/pacing/lease.js';
import { ShardPacer, type TickIdentity } from '../shared/pacing/pacer.js';
import { PublishedReads } from '../shared/pacing/published-reads.js';
import { readAuditLog } from '../shared/pacing/publisher.js';
import { PacingReader, publishedCurve } from '../shared/pacing/reader.js';
import { rawSpendSource } from '../shared/pacing/spend-source.js';
import { TICK_MS } from '../shared/pacing/types.js';
import { prng, type Random } from '../shared/random/prng.js';
import type { RedisClient } from '../shared/redis/connect.js';
import { RawScriptCaller } from '../shared/redis/resp/script-caller.js';
import { BudgetGuard } from '../shared/spend/guard.js';
import { planDayKeys } from '../shared/spend/keys.js';
import { readPlanDay } from '../shared/spend/live-counters.js';
import { defaultInFlight, Reconciler } from '../shared/spend/reconcile.js';
import { SpendTracker, type TrackOutcome } from '../shared/spend/tracker.js';
import type { ManualClock } from '../shared/time/clock.js';
import { ScenarioBudgets } from './budgets.js';
import { armOf, dayWindows, memoryLedger, NoticeQueue } from './engine-parts.js';
import { IdealCurve, idealTraffic } from './ideal.js';
import {
  type AuctionBid,
  gaussian,
  loadIpinyouHistogram,
  localHourOf,
  plannedNotices,
  poisson,
  priceSampler,
  runAuction,
  shapeAt,
  shapeMean,
} from './market/index.js';
import type { Scenario, ScenarioCampaign } from './scenario.js';
import { controllerOf, type StrategyName } from './strategies.js';

/** One plan-day's outcome. */
export interface PlanDayResult {
  /** `a:<account>/account`, `c:<campaign>/campaign`, `c:<campaign>/arm:<id>`. */
  readonly plan: string;
  readonly level: 'account' | 'campaign' | 'arm';
  readonly campaignId: string | undefined;
  readonly day: string;
  /** Scored (not a history day). */
  readonly scored: boolean;
  /** Budget in force at the end of the day. */
  readonly budgetMicros: number;
  /** Spend booked by the tracker for bids of that day (duplicates excluded). */
  readonly spentMicros: number;
  /** Confirmed spend in the live counters at the end (equals spentMicros on a clean run). */
  readonly countersMicros: number;
  /** What the exchange charged (above spent only when win notices were lost). */
  readonly chargedMicros: number;
  readonly impressions: number;
  readonly clicks: number;
  /** Max / RMS over the day's minutes of |spent − E(t)| / budget, E = the published curve. */
  readonly maxDeviation: number;
  readonly rmsDeviation: number;
  /** Max over the day's minutes of (spent − budget in force), micros. */
  readonly maxOverCapMicros: number;
  /**
   * Max over the day's minutes of (spent − E*(t)) / budget, at least 0: how far the plan ran
   * ahead of the traffic-following ideal curve E* (sim/ideal.ts), whatever curve was published.
   */
  readonly maxAhead: number;
  /** Minutes with allowance E(t) − spent > 0. */
  readonly minutesAlive: number;
  /**
   * Every 10 minutes (`seriesEveryMs`): [epoch ms, spent, E(t), throttle, bid multiplier] as the
   * monitor read them (−1, −1: nothing fresh published) — charts and diagnostics; only when
   * `series` was asked.
   */
  readonly series?: readonly (readonly [number, number, number, number, number])[];
}

/** One strategy's run of a scenario. */
export interface StrategyRun {
  readonly strategy: StrategyName;
  readonly plans: PlanDayResult[];
  readonly requests: number;
  /** Auctions we took part in (at least one of our bids). */
  readonly auctions: number;
  readonly bids: number;
  readonly notices: number;
  /** The guards' lease/settle calls to Redis (each one Lua script). */
  readonly leaseCalls: number;
  readonly ticks: number;
  readonly publishedTicks: number;
  /** Claims and publish batches refused by the fence (an old leader after a takeover). */
  readonly fencedWritesRejected: number;
  /** Audit-stream check: after each takeover, no write of an older publisher landed. */
  readonly staleWritesAccepted: number;
  readonly stateReloads: number;
  readonly faults: readonly string[];
  /** Guard and reader background errors (a clean run has none). */
  readonly errors: readonly string[];
  readonly wallMs: number;
  /** CPU time of this process during the run (user + system), ms. */
  readonly cpuMs: number;
  /** CPU time of redis-server during the run (INFO cpu), ms. */
  readonly redisCpuMs: number;
  /** Time per phase (only with {@link RunOptions.phases}). */
  readonly phases?: PhaseTimes;
  /** Several regions (`sim/regions/`): each region's part; `plans` are then the combined figures. */
  readonly regions?: readonly RegionRun[];
}

/** One region's part of a multi-region run (`sim/regions/engine.ts`). */
export interface RegionRun {
  readonly region: string;
  /**
   * The region's own spend per plan-day (its wins); `maxDeviation` / `rmsDeviation` against the
   * curve its own pacer published, over the plan's whole budget, minutes it was up.
   */
  readonly plans: PlanDayResult[];
  /** Requests routed to the region, and its ad servers' bids. */
  readonly requests: number;
  readonly bids: number;
  readonly leaseCalls: number;
  /** Lease calls its allocation (not E) cut short, and no-budget answers that caused. */
  readonly allocationHolds: number;
  readonly allocationRefusals: number;
  readonly ticks: number;
  readonly publishedTicks: number;
  /** As the home: micros granted and reclaimed over the run, reclaims made. */
  readonly grantedMicros: number;
  readonly reclaimedMicros: number;
  readonly reclaims: number;
  /** Oldest authority entry this region followed, ms (the AllocationAuthorityAge alarm's figure). */
  readonly authorityAgeMaxMs: number;
  /** Minutes the region was lost. */
  readonly lostMinutes: number;
}

/** Options of {@link runStrategy}. */
export interface RunOptions {
  readonly redis: RedisClient;
  readonly clock: ManualClock;
  readonly scenario: Scenario;
  readonly strategy: StrategyName;
  /** Seed of the run (market and bidding draws). @default scenario.seed */
  readonly seed?: number;
  /** Keep 10-minute series per plan-day (charts). @default false */
  readonly series?: boolean;
  /** Interval of those series (diagnostics may want every minute). @default 600_000 */
  readonly seriesEveryMs?: number;
  readonly onProgress?: (line: string) => void;
  /** Stop bidding at this instant instead of the scenario's end (short determinism tests). */
  readonly untilMs?: number;
  /** Measure wall and CPU time per phase of the simulated second (benchmarks). @default false */
  readonly phases?: boolean;
  /**
   * Write the guards' lease calls and the tracker's scripts while the second's loops still run
   * ({@link LeaseOverlap}), and await the notices' replies after the request loop; `false` writes
   * them after each loop and awaits the notices before the request loop (Redis idles while the
   * loop runs). The outcome is the same either way (the determinism test compares them).
   * @default true
   */
  readonly overlap?: boolean;
  /**
   * Called at every simulated second while bidding, once the second's tick, notices and the ad
   * servers' refresh are in and before its requests (tests: what the guards see and hold at chosen
   * instants). May read Redis; a run with a probe is not comparable with one without.
   */
  readonly probe?: (view: RunProbe) => Promise<void> | void;
}

/** What {@link RunOptions.probe} sees. */
export interface RunProbe {
  readonly now: number;
  readonly redis: RedisClient;
  /** Every plan of the run's active campaigns (account, campaign, arm plans), as last resolved. */
  readonly plans: readonly ResolvedPlan[];
  /** The ad servers' guard curves (`publishedCurve` of each server's reader), as the guards use them. */
  readonly curves: readonly TargetCurve[];
}

const SHARD = 0;
const SHARDS = 1;
const MINUTE = 60_000;
const NOTICE_BATCH_MS = 5_000;
/**
 * The raw calls' no-reply timeout in the simulator (reads and scripts): minutes of real time. The simulated clock
 * stands still while the process waits, so a slow, shared machine only makes a run longer; the
 * readers' timeouts themselves are tested in test/integration/pacing/.
 */
const SIM_READ_TIMEOUT_MS = 300_000;
/** Ticks an old region's pacer keeps trying with its old fence after a flip (stale SSM view). */
const STALE_TICKS_AFTER_FLIP = 3;

interface DayTrack {
  budget: number;
  spent: number;
  charged: number;
  impressions: number;
  clicks: number;
  maxDev: number;
  sumSq: number;
  samples: number;
  maxOver: number;
  maxAhead: number;
  ideal: IdealCurve | undefined;
  alive: number;
  series: [number, number, number, number, number][] | undefined;
}

interface PlanTrack {
  plan: ResolvedPlan;
  readonly key: string;
  readonly days: Map<string, DayTrack>;
  /** The last day looked up and its track (bids and notices of a day come in runs). */
  lastDay: string | undefined;
  lastTrack: DayTrack | undefined;
}

/** The guard's question for one campaign (and arm), reused for every bid: no object per bid. */
interface ReusableBid {
  readonly campaignId: string;
  readonly armId?: string;
  priceMicros: number;
}

interface CampaignRun {
  readonly spec: ScenarioCampaign;
  readonly index: number;
  readonly salt: number;
  /** The account's time zone (its advertiser day). */
  readonly timeZone: string;
  budgets: CampaignBudgets | undefined;
  /** Plan tracks a bid falls under, without an arm (`''`) and per arm id (set on activation). */
  tracksByArm: Map<string, PlanTrack[]>;
  /** Guard questions, without an arm (`''`) and per arm id. */
  readonly guardBids: Map<string, ReusableBid>;
}

/** A bidder of one auction (pooled: one object per concurrent bidder slot, not per bid). */
interface Bidder extends AuctionBid<number> {
  key: number;
  bidMicros: number;
  armId: string | undefined;
}

/**
 * Wall and CPU time per phase of the simulated second ({@link RunOptions.phases}): what a
 * simulated day spends in the pacer, the readers' refresh, notices, requests and lease waits.
 * The notices issued during a pacer tick (see `tick`) count in `pacer`.
 */
export type PhaseTimes = Record<string, { wallMs: number; cpuMs: number }>;

class Phases {
  readonly times: PhaseTimes = {};
  private wall0 = 0;
  private cpu0 = 0;
  begin(): void {
    this.wall0 = performance.now();
    this.cpu0 = cpuMs();
  }
  end(name: string): void {
    let t = this.times[name];
    if (!t) {
      t = { wallMs: 0, cpuMs: 0 };
      this.times[name] = t;
    }
    t.wallMs += performance.now() - this.wall0;
    t.cpuMs += cpuMs() - this.cpu0;
  }
}

/**
 * Sends the guards' lease calls to Redis while the second's request loop is still running, so
 * redis-server works through them while this process runs the next auctions, without changing
 * what any command sees or returns. The lease and apply scripts go over the raw script connection
 * (shared/redis/resp/script-caller.ts), which writes what was issued at the end of each `process.nextTick`
 * turn — so the yield below is what sends them; commands on the client's own connection (a rebuild
 * after a reset) are collected and written here.
 *
 * A guard issues a lease call from `decide` (synchronously) but reaches the client only a
 * promise job later (its curve's `prepare`); without this, every call of the second is issued,
 * auto-pipelined and written after the loop, and the process waits for all the replies at once
 * (the `idle` phase). Every {@link OVERLAP_EVERY} requests {@link flush} lets those jobs run with
 * the clock at the second's start (as they ran after the loop before), the client's commands
 * collected into one string, then writes it: the same commands, in the same order, on the same
 * connection. No I/O callback runs during the loop (the yield is a `process.nextTick`, which
 * Node runs before returning to the event loop), so no reply is handled before the loop ends and
 * no guard's float changes within it: replies are read after the loop, in order, as before.
 *
 * Standalone clients only (the simulator's); a cluster client keeps auto-pipelining.
 */
class LeaseOverlap {
  private readonly client: Redis | undefined;
  private active = false;
  private autoPipelining = false;
  /** Commands written since the last flush, as one RESP string. */
  private pending = '';

  constructor(redis: RedisClient, enabled: boolean) {
    this.client = enabled && redis instanceof Redis ? redis : undefined;
  }

  /**
   * Before the loop: the client writes each command directly (auto-pipelining off), and the
   * socket's `write` collects them into one string until {@link flush} (as ioredis's own pipeline
   * does): one write per flush, not one `writev` entry per command.
   */
  begin(): void {
    const c = this.client;
    if (c?.status !== 'ready') return;
    this.active = true;
    this.autoPipelining = c.options.enableAutoPipelining === true;
    c.options.enableAutoPipelining = false;
    const socket = c.stream;
    const write = socket.write;
    socket.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
      if (typeof chunk === 'string' && rest.length === 0) {
        this.pending += chunk;
        return true;
      }
      this.writePending();
      return write.call(socket, chunk, ...rest);
    }) as typeof socket.write;
  }

  /** Runs the pending promise jobs with the clock at `secondStart`, writes their commands, puts the clock back. */
  async flush(clock: ManualClock, secondStart: number): Promise<void> {
    if (!this.active) return;
    const at = clock.now();
    clock.set(secondStart);
    await new Promise<void>((resolve) => process.nextTick(resolve));
    this.writePending();
    clock.set(at);
  }

  /** After the loop: everything written, the client as it was. */
  end(): void {
    if (!this.active) return;
    this.active = false;
    const c = this.client as Redis;
    this.writePending();
    // The socket's own write again (the prototype's).
    delete (c.stream as { write?: unknown }).write;
    c.options.enableAutoPipelining = this.autoPipelining;
  }

  private writePending(): void {
    if (this.pending === '') return;
    const socket = (this.client as Redis).stream;
    const data = this.pending;
    this.pending = '';
    Object.getPrototypeOf(socket).write.call(socket, data);
  }
}

/** Requests between two writes of the pending lease calls ({@link LeaseOverlap}). */
const OVERLAP_EVERY = 16;

/**
 * Requests per minute: the hourly shape (local hours of the scenario's zone) × a day level
 * (lognormal, one per UTC day) × minute noise (lognormal) × events, Poisson-sampled — each minute
 * from its own seeded generator, so a run starting on any day sees the same minutes.
 */
export function minuteRequests(
  scenario: Scenario,
  seed: number,
): (minuteMs: number, random: Random) => number {
  const t = scenario.traffic;
  const mean = shapeMean(t.shape);
  const levels = new Map<number, number>();
  return (minuteMs, random) => {
    const day = Math.floor(minuteMs / 86_400_000);
    let level = levels.get(day);
    if (level === undefined) {
      level = Math.exp(t.dayNoise * gaussian(prng(Math.floor(mix(day, seed ^ 0x64617973) * 4294967296))));
      levels.set(day, level);
    }
    let factor = 1;
    for (const e of t.events) if (minuteMs >= e.fromMs && minuteMs < e.toMs) factor *= e.factor;
    const hour = localHourOf(minuteMs + 30_000, scenario.timeZone);
    const noise = Math.exp(t.minuteNoise * gaussian(random));
    return poisson(
      (t.requestsPerDay / 1440) * (shapeAt(t.shape, hour) / mean) * level * noise * factor,
      random,
    );
  };
}

/** The (deterministic) 32-bit mix of a request number and a campaign's salt: eligibility draws. */
export function mix(a: number, b: number): number {
  let h = Math.imul(a ^ 0x9e3779b9, 0x85ebca6b) ^ b;
  h = Math.imul(h ^ (h >>> 16), 0xc2b2ae35);
  h ^= h >>> 13;
  h = Math.imul(h, 0x27d4eb2f);
  return ((h ^ (h >>> 16)) >>> 0) / 4294967296;
}

const planKeyOf = (p: Pick<ResolvedPlan, 'scope' | 'planId'>) => `${p.scope}/${p.planId}`;

function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

async function redisCpuMs(redis: RedisClient): Promise<number> {
  const info = await redis.info('cpu');
  const num = (k: string) => Number(new RegExp(`${k}:([0-9.]+)`).exec(info)?.[1] ?? 0);
  return (num('used_cpu_sys') + num('used_cpu_user')) * 1000;
}

/** Runs one strategy over the scenario on an empty Redis (the caller flushes between runs). */
export async function runStrategy(options: RunOptions): Promise<StrategyRun> {
  const { redis, clock, scenario, strategy } = options;
  // Script calls wait as long as reads (the client's shared caller takes it when first made).
  RawScriptCaller.of(redis, { timeoutMs: SIM_READ_TIMEOUT_MS });
  const wall0 = Date.now();
  const cpu0 = cpuMs();
  const rcpu0 = await redisCpuMs(redis);
  const seed = options.seed ?? scenario.seed;
  const asap = strategy === 'asap';
  const modeOf = (m: PacingMode): PacingMode => (asap ? 'asap' : m);
  const inFlight = defaultInFlight;
  const errors: string[] = [];
  const faultLog: string[] = [];
  const progress = options.onProgress ?? (() => {});
  const phase = options.phases ? new Phases() : undefined;
  // Only Paceline learns from history days; the baselines start on the first scored day.
  const runStart = strategy === 'paceline' ? scenario.startMs : scenario.scoredStartMs;
  clock.set(runStart);

  // ---- Budgets: the items a pacer shard's index would return, and the ad servers' view.
  const budgets = new ScenarioBudgets(scenario, modeOf, SHARD, SHARDS);

  const campaigns: CampaignRun[] = scenario.campaigns.map((spec, index) => ({
    spec,
    index,
    salt: Math.imul(index + 1, 0x2545f491) ^ seed,
    timeZone: budgets.timeZoneOf(spec),
    budgets: undefined,
    tracksByArm: new Map(),
    guardBids: new Map<string, ReusableBid>([
      ['', { campaignId: spec.id, priceMicros: 0 }],
      ...spec.arms.map((a): [string, ReusableBid] => [
        a.id,
        { campaignId: spec.id, armId: a.id, priceMicros: 0 },
      ]),
    ]),
  }));
  const byId = new Map(campaigns.map((c) => [c.spec.id, c]));
  // Campaigns per segment (a campaign without segments targets every segment).
  const segmentNames = [...scenario.segments.keys()];
  const segmentCdf: number[] = [];
  let acc = 0;
  for (const s of segmentNames) {
    acc += scenario.segments.get(s) as number;
    segmentCdf.push(acc);
  }
  const bySegment = segmentNames.map((s) =>
    campaigns.filter((c) => c.spec.segments.length === 0 || c.spec.segments.includes(s)),
  );

  // ---- Spend path.
  const ledger = memoryLedger();
  const live = new Map<string, CampaignBudgets>();
  const reconciler = new Reconciler({
    redis,
    ledger,
    clock,
    inFlight,
    campaignsOfAccount: async (accountId) =>
      campaigns.filter((c) => c.spec.accountId === accountId).map((c) => c.spec.id),
  });
  const tracker = new SpendTracker({
    redis,
    ledger,
    reconciler,
    clock,
    inFlight,
    budgets: async (id) => live.get(id),
  });

  // ---- Plan tracks (scoring).
  const tracks = new Map<string, PlanTrack>();
  const windowOf = dayWindows();
  const trackPlans = (b: CampaignBudgets) => {
    for (const p of [...b.common, ...b.arms.values()]) {
      const key = planKeyOf(p);
      const t = tracks.get(key);
      if (t) t.plan = p;
      else tracks.set(key, { plan: p, key, days: new Map(), lastDay: undefined, lastTrack: undefined });
    }
  };
  const dayTrack = (t: PlanTrack, day: string): DayTrack => {
    if (t.lastDay === day) return t.lastTrack as DayTrack;
    let d = t.days.get(day);
    if (!d) {
      d = {
        budget: t.plan.dailyBudgetMicros,
        spent: 0,
        charged: 0,
        impressions: 0,
        clicks: 0,
        maxDev: 0,
        sumSq: 0,
        samples: 0,
        maxOver: Number.NEGATIVE_INFINITY,
        maxAhead: 0,
        ideal: undefined,
        alive: 0,
        series: options.series ? [] : undefined,
      };
      t.days.set(day, d);
    }
    t.lastDay = day;
    t.lastTrack = d;
    return d;
  };

  // ---- Ad servers: a reader and a guard each.
  // Their readers share the fetch (PublishedReads): the refresh-ahead they all issue at a tick
  // boundary reads and decodes each campaign hash once. Each keeps its own cache, lookups and idle
  // drops, so what each server serves is what it would serve alone.
  const publishedReads = new PublishedReads({ redis, readTimeoutMs: SIM_READ_TIMEOUT_MS });
  const servers = Array.from({ length: scenario.guards }, () => {
    const reader = new PacingReader({
      redis,
      clock,
      shards: SHARDS,
      reads: publishedReads,
      onError: (e) => errors.push(`reader: ${String(e)}`),
    });
    const curve = publishedCurve(reader);
    const guard = new BudgetGuard({
      redis,
      clock,
      inFlight,
      curve,
      minFloatMicros: minFloat(scenario),
      // Small plans' floats sized by their bids (the minimum float is the largest bid any campaign
      // can make: a whole one is several percent of a $2 day, held unspent by each ad server).
      floatSizing: 'bids',
      initPlanDay: (plan, day) => reconciler.reconcile(plan, day),
      onError: (e) => errors.push(`guard: ${String(e)}`),
    });
    return { reader, guard, curve };
  });
  // The scorer's own reader: what the pacer published, read every minute for every campaign.
  // It shares the ad servers' reads: at a minute boundary its read of every campaign is issued with
  // their refresh-ahead (one read of each hash for all; the state is the same: after the publish).
  const monitor = new PacingReader({
    redis,
    clock,
    shards: SHARDS,
    maxAgeMs: 3 * TICK_MS,
    reads: publishedReads,
  });
  const monitorCurve = publishedCurve(monitor);

  // Campaigns with budgets, as the readers' prefetch takes them (rebuilt on activation).
  let active: { accountId: string; campaignId: string }[] = [];
  const activate = (c: CampaignRun, b: CampaignBudgets) => {
    c.budgets = b;
    live.set(c.spec.id, b);
    trackPlans(b);
    // The plans a bid falls under (plansForBid's order: account, campaign, then the arm).
    const common = b.common.map((p) => tracks.get(planKeyOf(p)) as PlanTrack);
    c.tracksByArm = new Map([['', common]]);
    for (const arm of c.spec.arms) {
      const p = b.arms.get(arm.id);
      c.tracksByArm.set(arm.id, p ? [...common, tracks.get(planKeyOf(p)) as PlanTrack] : common);
    }
    for (const s of servers) s.guard.setBudgets(b);
    active = campaigns
      .filter((x) => x.budgets)
      .map((x) => ({ accountId: x.spec.accountId, campaignId: x.spec.id }));
  };

  // ---- The pacer (one shard; a new process per takeover).
  const controller = controllerOf(strategy);
  const source = budgets.source;
  let generation = 1;
  let epoch = 1;
  let region = 'sim-a';
  let processNo = 0;
  // Every pacer process's spend reader (raw sockets), closed at the end of the run.
  const spendSources: ReturnType<typeof rawSpendSource>[] = [];
  // Set by `tick` for one leader tick; the pacer runs it after its controller stepped, before it
  // publishes (at most once: a stale pacer's tick finds it cleared).
  let publishHook: (() => Promise<void>) | undefined;
  const beforePublish = async () => {
    const hook = publishHook;
    publishHook = undefined;
    if (hook) await hook();
  };
  const newPacer = (regionName: string) => {
    processNo++;
    // The pacer function's own spend reader (shared/pacing/regions/wiring.ts): raw RESP, folded
    // from the reply bytes. Its sockets only read, after the tick's writes are acknowledged on the
    // client's connection, so the run stays deterministic.
    const spend = rawSpendSource(redis, { timeoutMs: SIM_READ_TIMEOUT_MS });
    spendSources.push(spend);
    const pacer = new ShardPacer({
      shard: SHARD,
      region: regionName,
      redis,
      controller,
      budgets: new ShardBudgets({ source, clock }),
      spend,
      clock,
      tickMs: TICK_MS,
      logMaxLen: 100_000,
      beforePublish,
    });
    const instanceId = `s${SHARD}-i${processNo}`;
    return { pacer, instanceId, publisherId: `${instanceId}/${regionName}-p${processNo}` };
  };
  const identity = (
    p: ReturnType<typeof newPacer>,
    g: number,
    e: number,
    publisherRegion: string,
  ): TickIdentity => {
    const control: ControlSnapshot = {
      publisherRegion,
      generation: g,
      override: 'auto',
      overrideVersion: 1,
      readAtMs: 0,
      fresh: true,
    };
    const lease: LeaseView = { held: true, epoch: e, record: undefined, event: 'renewed' };
    return {
      instanceId: p.instanceId,
      publisherId: p.publisherId,
      lease: { tick: async () => lease, heldAt: () => true, epoch: e },
      control: { read: async () => ({ snapshot: control }) },
    };
  };
  let leader = newPacer(region);
  let who = identity(leader, generation, epoch, region);
  let pacerDownUntil = Number.NEGATIVE_INFINITY;
  let stale: { pacer: ReturnType<typeof newPacer>; who: TickIdentity; ticksLeft: number } | undefined;
  const takeovers: { fence: string; publisher: string }[] = [];

  // ---- Market.
  const random: Random = prng(seed ^ 0x62696473);
  const requestsOf = minuteRequests(scenario, seed);
  const prices = priceSampler(loadIpinyouHistogram(scenario.market.priceCampaign), {
    microsPerUnit: scenario.market.microsPerUnit,
  });

  // ---- Notices.
  interface Notice {
    readonly event: Parameters<SpendTracker['apply']>[0];
    readonly accountId: string;
  }
  const notices = new NoticeQueue<Notice>(
    NOTICE_BATCH_MS,
    scenario.faults.flatMap((f) => (f.kind === 'notices-stalled' ? [f] : [])),
  );

  let requests = 0;
  let auctions = 0;
  let bids = 0;
  let applied = 0;
  let ticks = 0;
  let published = 0;
  let fenced = 0;
  let reloads = 0;
  let bidNo = 0;
  let changeIdx = 0;
  let faultIdx = 0;

  const trafficOf = idealTraffic(scenario);
  const seriesEvery = options.seriesEveryMs ?? 10 * MINUTE;
  const sampleMinute = (now: number) => {
    for (const t of tracks.values()) {
      const day = windowOf(t.plan.timeZone, now);
      const d = dayTrack(t, day.day);
      const budget = t.plan.dailyBudgetMicros;
      d.budget = budget;
      const created =
        t.plan.campaignId === undefined ? undefined : byId.get(t.plan.campaignId)?.spec.createdAtMs;
      d.ideal ??= new IdealCurve(trafficOf(day), Math.max(day.startMs, created ?? day.startMs), budget);
      d.maxAhead = Math.max(d.maxAhead, (d.spent - d.ideal.at(now, budget)) / budget);
      const e = monitorCurve.expectedMicros(t.plan, day, now);
      const dev = (d.spent - e) / budget;
      d.maxDev = Math.max(d.maxDev, Math.abs(dev));
      d.sumSq += dev * dev;
      d.samples++;
      d.maxOver = Math.max(d.maxOver, d.spent - budget);
      if (e - d.spent > 0) d.alive++;
      if (d.series && now % seriesEvery === 0) {
        const p = monitor.freshPlan(t.plan, day);
        d.series.push([now, d.spent, e, p?.throttle ?? -1, p?.bidMultiplier ?? -1]);
      }
    }
  };

  const applyChanges = async (now: number) => {
    let dirty = false;
    for (const c of campaigns) {
      if (!c.budgets && (c.spec.createdAtMs === undefined || c.spec.createdAtMs <= now)) {
        activate(c, budgets.activate(c.spec, c.spec.createdAtMs ?? scenario.startMs - 86_400_000));
        dirty = true;
      }
    }
    while (
      changeIdx < scenario.budgetChanges.length &&
      (scenario.budgetChanges[changeIdx]?.atMs ?? 0) <= now
    ) {
      const ch = scenario.budgetChanges[changeIdx++] as Scenario['budgetChanges'][number];
      for (const spec of budgets.change(ch, now)) {
        const c = byId.get(spec.id) as CampaignRun;
        if (c.budgets) activate(c, budgets.budgetsOf(spec));
      }
      dirty = true;
    }
    if (dirty) for (const s of servers) await s.reader.prefetch(active);
  };

  const applyFaults = async (now: number) => {
    while (faultIdx < scenario.faults.length && (scenario.faults[faultIdx]?.atMs ?? 0) <= now) {
      const f = scenario.faults[faultIdx++] as Scenario['faults'][number];
      faultLog.push(`${new Date(now).toISOString()} ${f.kind}`);
      if (f.kind === 'leader-killed') {
        // The process dies; the lease expires after its TTL; another instance acquires it with
        // the next epoch (a cold process: empty memory, budgets and state from Redis / DynamoDB).
        pacerDownUntil = now + scenario.leaseTtlMs;
        epoch++;
        leader = newPacer(region);
        who = identity(leader, generation, epoch, region);
      } else if (f.kind === 'region-flipped') {
        // publisher-region now names another region: its version (g) is higher. The old region's
        // pacer keeps its stale control view for a few ticks and is refused by the fence.
        stale = { pacer: leader, who, ticksLeft: STALE_TICKS_AFTER_FLIP };
        generation++;
        region = region === 'sim-a' ? 'sim-b' : 'sim-a';
        leader = newPacer(region);
        who = identity(leader, generation, epoch, region);
      } else if (f.kind === 'redis-restarted') {
        // Restarted empty: every key and script gone (ioredis reloads scripts on NOSCRIPT).
        await redis.flushall();
        await redis.script('FLUSH');
        // A restarted node drops its connections: the raw script caller's too (its next calls load
        // the scripts again, in order, instead of being refused and sent again later).
        RawScriptCaller.of(redis).reconnect();
      }
      // notices-stalled is applied where notices are scheduled.
    }
  };

  /**
   * The pacer's tick, then the ad servers' refresh-ahead issued (not awaited: see the loop; it is
   * returned in an object so that `await tick()` does not wait for it).
   */
  const tick = async (
    now: number,
  ): Promise<{ readonly refreshed: Promise<unknown>; readonly monitored: Promise<unknown> | undefined }> => {
    ticks++;
    const t = Math.floor(now / TICK_MS);
    if (now >= pacerDownUntil) {
      phase?.begin();
      // The second's notices are issued once the controller has stepped, before the publish
      // (ShardPacer's beforePublish): the spend read has landed, so they cannot change what it saw,
      // and they touch none of the keys the publish writes; Redis applies them while this process
      // builds the publish, and this process builds them while Redis would otherwise be the only one
      // working. Not at a minute's tick (the guards' upkeep leases come before the notices there),
      // nor while a stale pacer still ticks after a flip (its spend read follows this tick).
      if (overlapOn && now % MINUTE !== 0 && !(stale && stale.ticksLeft > 0)) {
        publishHook = async () => {
          const due = notices.take(now);
          if (due) await issueNotices(due, now);
        };
      }
      let o: Awaited<ReturnType<ShardPacer['runTick']>>;
      try {
        o = await leader.pacer.runTick(t, who);
      } finally {
        publishHook = undefined;
      }
      phase?.end('pacer');
      if (o.published) published++;
      if (o.stateReloaded) {
        reloads++;
        if (o.fence)
          takeovers.push({ fence: `${o.fence.g}.${o.fence.o}.${o.fence.e}`, publisher: who.publisherId });
      }
      fenced += o.fencedWritesRejected;
      if (o.invalidParams > 0)
        errors.push(`pacer: ${o.invalidParams} plans got fail-safe parameters at ${now}`);
    }
    if (stale && stale.ticksLeft > 0) {
      stale.ticksLeft--;
      const o = await stale.pacer.pacer.runTick(t, stale.who);
      fenced += o.fencedWritesRejected;
      if (o.published) errors.push(`fence: the old region's pacer published tick ${t} after the flip`);
    }
    // Refresh-ahead of every ad server's reader, once the publish has landed (reads only: the
    // servers' pipelines go out together, each gets the same data as one after the other).
    phase?.begin();
    const refreshed = Promise.all(servers.map((s) => s.reader.refreshDue()));
    // The scorer's minute read, merged with it (see `monitor`).
    const monitored = now % MINUTE === 0 ? monitor.prefetch(active) : undefined;
    // Awaited after the refresh (a rejection is not left unhandled if the refresh throws first).
    monitored?.catch(() => undefined);
    phase?.end('refresh');
    return { refreshed, monitored };
  };

  const bookWin = (c: CampaignRun, armId: string | undefined, day: string, micros: number) => {
    if (!c.budgets) return;
    for (const t of tracksOf(c, armId)) dayTrack(t, day).spent += micros;
  };
  const tracksOf = (c: CampaignRun, armId: string | undefined): PlanTrack[] =>
    c.tracksByArm.get(armId ?? '') ?? (c.tracksByArm.get('') as PlanTrack[]);

  const end = Math.min(scenario.endMs, options.untilMs ?? scenario.endMs);
  const drainUntil = end + scenario.notices.maxDelayMs * 3 + 2 * NOTICE_BATCH_MS;
  const valuations = campaigns.map((c) => ({ median: c.spec.medianBidMicros, sigma: c.spec.bidSigma }));
  const cap = minFloat(scenario);
  // The minute's requests in arrival order, as columns (no object per request): arrival instant,
  // the market's best competing bid, segment; request ids are firstId + position.
  let qAt = new Float64Array(0);
  let qCompeting = new Float64Array(0);
  let qSegment = new Uint32Array(0);
  let qLength = 0;
  let firstId = 0;
  let next = 0;
  // Bidders of the current auction, from a pool of reusable objects.
  const bidders: Bidder[] = [];
  const pool: Bidder[] = [];
  let lastLog = 0;

  // Off (`overlap: false`): commands written after each loop and notices awaited before the
  // request loop.
  const overlapOn = options.overlap ?? true;
  const overlap = new LeaseOverlap(redis, overlapOn);
  // The ad servers' refresh-ahead of the last tick, while it is in flight.
  let refreshing: Promise<unknown> | undefined;
  /** Waits for that refresh, if any, to land. */
  const refreshLanded = async () => {
    await refreshing;
    refreshing = undefined;
  };
  // The second's notices while their scripts run (awaited after the request loop, see below).
  let applying: { due: Notice[]; outcomes: Promise<(TrackOutcome | undefined)[]> } | undefined;
  /** Waits for the second's notices and books their spend for the scorer. */
  const noticesLanded = async () => {
    if (!applying) return;
    const { due, outcomes: landing } = applying;
    applying = undefined;
    const outcomes = await landing;
    applied += outcomes.length;
    for (let i = 0; i < outcomes.length; i++) {
      const o = outcomes[i];
      if (!o || o.addedMicros <= 0) continue;
      const ev = (due[i] as Notice).event;
      const c = byId.get(ev.campaignId) as CampaignRun;
      bookWin(c, ev.armId, windowOf(c.timeZone, ev.bidAt).day, o.addedMicros);
    }
  };
  /** Issues the second's notices (see where the loop calls it); their replies land with the leases'. */
  const issueNotices = async (due: Notice[], now: number) => {
    overlap.begin();
    const started: Promise<TrackOutcome | undefined>[] = [];
    for (let i = 0; i < due.length; i++) {
      if (i > 0 && i % (OVERLAP_EVERY * 4) === 0) await overlap.flush(clock, now);
      started.push(
        tracker.apply((due[i] as Notice).event).catch((e: unknown) => {
          errors.push(`tracker: ${String(e)}`);
          return undefined;
        }),
      );
    }
    overlap.end();
    applying = { due, outcomes: Promise.all(started) };
    if (overlapOn) {
      // Every notice's script issued now, before any lease call of the loop below: the promise
      // jobs of each apply run to its script call without waiting for a reply, and a
      // process.nextTick callback runs only once every such job has run.
      await new Promise<void>((resolve) => process.nextTick(resolve));
    }
  };
  // Faults of days a run does not simulate are not replayed at its start.
  while (faultIdx < scenario.faults.length && (scenario.faults[faultIdx]?.atMs ?? 0) < runStart) faultIdx++;
  for (let now = runStart; now < drainUntil; now += 1000) {
    clock.set(now);
    const bidding = now < end;
    if (bidding) {
      await applyFaults(now);
      await applyChanges(now);
      let monitored: Promise<unknown> | undefined;
      if (now % TICK_MS === 0) ({ refreshed: refreshing, monitored } = await tick(now));
      if (now % MINUTE === 0) {
        // The monitor and the guards' upkeep read what the refresh brings (the guards' E(t)).
        phase?.begin();
        await refreshLanded();
        phase?.end('refresh');
        phase?.begin();
        await (monitored ?? monitor.prefetch(active));
        sampleMinute(now);
        phase?.end('monitor');
        // The minute's requests: arrival, the market's best competing bid, the segment.
        // Drawn from the minute's own generator: every strategy sees the same requests, whichever
        // day it starts on.
        const marketRandom = prng(Math.floor(mix(now / MINUTE, seed ^ 0x6d61726b) * 4294967296));
        const n = requestsOf(now, marketRandom);
        let shift = 1;
        for (const s of scenario.market.shifts) if (now >= s.fromMs && now < s.toMs) shift *= s.factor;
        const offset = new Float64Array(n);
        const competing = new Float64Array(n);
        const segment = new Uint32Array(n);
        // Sort key: offset in the minute × n + draw index (unique, exact below 2^53): arrival
        // order, ties in draw order (what a stable sort by arrival gives).
        const order = new Float64Array(n);
        for (let i = 0; i < n; i++) {
          const u = marketRandom();
          let seg = 0;
          while (seg < segmentCdf.length - 1 && u >= (segmentCdf[seg] as number)) seg++;
          const off = Math.floor(marketRandom() * MINUTE);
          offset[i] = off;
          competing[i] = Math.round(prices.sample(marketRandom) * shift);
          segment[i] = seg;
          order[i] = off * n + i;
        }
        order.sort();
        if (qAt.length < n) {
          qAt = new Float64Array(n);
          qCompeting = new Float64Array(n);
          qSegment = new Uint32Array(n);
        }
        for (let k = 0; k < n; k++) {
          const key = order[k] as number;
          const i = key - Math.floor(key / n) * n;
          qAt[k] = now + (offset[i] as number);
          qCompeting[k] = competing[i] as number;
          qSegment[k] = segment[i] as number;
        }
        qLength = n;
        firstId = requests + 1;
        requests += n;
        next = 0;
        phase?.begin();
        // Both guards' upkeep at once: each settles its own floats (the commands reach Redis in the
        // same order as one after the other: the first guard's, then the second's).
        await Promise.all(servers.map((s) => s.guard.maintain()));
        phase?.end('maintain');
        if (now - lastLog >= 6 * 3_600_000) {
          lastLog = now;
          progress(`${strategy}: ${new Date(now).toISOString()} requests ${requests} bids ${bids}`);
        }
      }
    }
    // Taken already when the pacer's tick issued them (see `tick`).
    const due = notices.take(now);
    if (due) {
      phase?.begin();
      // Applied while the refresh's replies are still coming in: the two touch disjoint keys
      // (published parameters are read; live counters are written), and nothing that uses the
      // readers runs until both are awaited, so the outcome is the same as one after the other,
      // with Redis and this process working at once. Their replies are awaited after the request
      // loop (noticesLanded, with the lease replies): the scripts are queued on the raw script
      // connection ahead of every lease call the loop issues, so Redis applies them all before
      // any of those leases, as when they were awaited here — while this process runs the loop.
      // Only the scorer's booking waits, and nothing reads it before the next minute's sample.
      // Issued in runs of OVERLAP_EVERY × 4, each written before the next is built (LeaseOverlap):
      // Redis applies one run while the tracker builds the next. The scripts of a batch commute
      // (each adds to or releases its own plan-day's counters, dedup per bid; the batch's clock is
      // one instant), so the order within the batch does not change any reply.
      await issueNotices(due, now);
      await refreshLanded();
      if (!bidding || !overlapOn) await noticesLanded();
      phase?.end('notices');
    }
    if (refreshing) {
      phase?.begin();
      await refreshLanded();
      phase?.end('refresh');
    }
    if (!bidding) continue;
    if (options.probe) {
      await options.probe({
        now,
        redis,
        plans: [...tracks.values()].map((t) => t.plan),
        curves: servers.map((x) => x.curve),
      });
    }
    phase?.begin();
    overlap.begin();
    let sinceFlush = 0;
    while (next < qLength && (qAt[next] as number) < now + 1000) {
      const at = qAt[next] as number;
      if (++sinceFlush === OVERLAP_EVERY) {
        sinceFlush = 0;
        await overlap.flush(clock, now);
      }
      const id = firstId + next;
      const competingMicros = qCompeting[next] as number;
      const eligible = bySegment[qSegment[next] as number] as CampaignRun[];
      next++;
      clock.set(at);
      const server = servers[id % servers.length] as (typeof servers)[number];
      bidders.length = 0;
      for (const c of eligible) {
        if (!c.budgets) continue;
        const u = mix(id, c.salt);
        if (u >= c.spec.reach) continue;
        const armId = armOf(c.spec, u);
        const pacing = server.reader.forBid(c.spec.accountId, c.spec.id, armId);
        if (pacing.throttle < 1 && random() >= pacing.throttle) continue;
        const v = valuations[c.index] as { median: number; sigma: number };
        const value = v.median * Math.exp(v.sigma * gaussian(random));
        const bid = Math.min(cap, Math.max(1, Math.round(value * pacing.bidMultiplier)));
        const question = c.guardBids.get(armId ?? '') as ReusableBid;
        question.priceMicros = bid;
        if (server.guard.decide(question) !== 'bid') continue;
        let b = pool[bidders.length];
        if (!b) {
          b = { key: 0, bidMicros: 0, armId: undefined };
          pool.push(b);
        }
        b.key = c.index;
        b.bidMicros = bid;
        b.armId = armId;
        bidders.push(b);
      }
      if (bidders.length === 0) continue;
      auctions++;
      bids += bidders.length;
      const result = runAuction(
        scenario.market.auction,
        bidders,
        competingMicros,
        scenario.market.floorMicros,
      );
      for (const b of bidders) {
        const c = campaigns[b.key] as CampaignRun;
        const won = result.winner === b.key;
        if (won) {
          const day = windowOf(c.timeZone, at).day;
          const clicked = random() < c.spec.ctr;
          for (const t of tracksOf(c, b.armId)) {
            const d = dayTrack(t, day);
            d.impressions++;
            d.charged += result.priceMicros;
            if (clicked) d.clicks++;
          }
        }
        const bidId = `b${++bidNo}`;
        for (const pn of plannedNotices(won, at, scenario.notices, random)) {
          notices.add(pn.at, {
            accountId: c.spec.accountId,
            event: noticeEvent(
              pn.kind,
              bidId,
              c.spec.id,
              b.armId,
              at,
              b.bidMicros,
              pn.at,
              result.priceMicros,
            ),
          });
        }
      }
    }
    overlap.end();
    phase?.end('requests');
    clock.set(now);
    phase?.begin();
    // Lease calls of this second, of every guard, land before the next one (awaits only).
    await Promise.all(servers.map((s) => s.guard.idle()));
    await noticesLanded();
    phase?.end('idle');
  }
  for (const s of servers) {
    await s.guard.close();
    s.reader.close();
  }
  publishedReads.close();
  monitor.close();
  for (const s of spendSources) s.close();

  // Fencing evidence from the server's own audit stream: after each takeover's first accepted
  // claim, no accepted write of a lower fence.
  let staleWritesAccepted = 0;
  if (takeovers.length > 0) {
    const log = await readAuditLog(redis, SHARD, 1_000_000);
    const cmp = (a: string, b: string) => {
      const x = a.split('.').map(Number);
      const y = b.split('.').map(Number);
      for (let i = 0; i < 3; i++) if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) - (y[i] ?? 0);
      return 0;
    };
    let highest = '0.0.0';
    for (const e of log) {
      if (!e.accepted) continue;
      if (cmp(e.fence, highest) < 0) staleWritesAccepted++;
      else highest = e.fence;
    }
  }

  const scored = new Set(scenario.scoredDays);
  const plans: PlanDayResult[] = [];
  for (const t of tracks.values()) {
    for (const [day, d] of t.days) {
      if (d.samples === 0 && d.spent === 0) continue;
      let snap = await readPlanDay(redis, planDayKeys(t.plan, day).state, drainUntil);
      if (snap.epoch === undefined && d.spent > 0) {
        // Lost with a Redis restart after its last notice: rebuilt on first use, as a guard or
        // the tracker would (the real reconcile path, from the ledger).
        await reconciler.reconcile(t.plan, day);
        snap = await readPlanDay(redis, planDayKeys(t.plan, day).state, drainUntil);
      }
      plans.push({
        plan: t.key,
        level: t.plan.level,
        campaignId: t.plan.campaignId,
        day,
        scored: scored.has(day),
        budgetMicros: d.budget,
        spentMicros: d.spent,
        countersMicros: snap.confirmedMicros,
        chargedMicros: d.charged,
        impressions: d.impressions,
        clicks: d.clicks,
        maxDeviation: d.maxDev,
        rmsDeviation: d.samples > 0 ? Math.sqrt(d.sumSq / d.samples) : 0,
        maxOverCapMicros: d.maxOver,
        maxAhead: d.maxAhead,
        minutesAlive: d.alive,
        ...(d.series ? { series: d.series } : {}),
      });
    }
  }
  plans.sort((a, b) => a.plan.localeCompare(b.plan) || a.day.localeCompare(b.day));
  return {
    strategy,
    plans,
    requests,
    auctions,
    bids,
    notices: applied,
    leaseCalls: servers.reduce((a, s) => a + s.guard.stats.leaseCalls, 0),
    ticks,
    publishedTicks: published,
    fencedWritesRejected: fenced,
    staleWritesAccepted,
    stateReloads: reloads,
    faults: faultLog,
    errors,
    wallMs: Date.now() - wall0,
    cpuMs: Math.round(cpuMs() - cpu0),
    redisCpuMs: Math.round((await redisCpuMs(redis)) - rcpu0),
    ...(phase ? { phases: phase.times } : {}),
  };
}

/** A win or loss notice of a bid, as the exchange sends it (built without spreads: hot path). */
export function noticeEvent(
  kind: 'win' | 'loss',
  bidId: string,
  campaignId: string,
  armId: string | undefined,
  bidAt: number,
  bidPriceMicros: number,
  at: number,
  clearingPriceMicros: number,
): Parameters<SpendTracker['apply']>[0] {
  if (kind === 'win')
    return armId === undefined
      ? { v: 1, type: 'win', bidId, campaignId, bidAt, bidPriceMicros, at, clearingPriceMicros }
      : { v: 1, type: 'win', bidId, campaignId, armId, bidAt, bidPriceMicros, at, clearingPriceMicros };
  return armId === undefined
    ? { v: 1, type: 'loss', bidId, campaignId, bidAt, bidPriceMicros, at }
    : { v: 1, type: 'loss', bidId, campaignId, armId, bidAt, bidPriceMicros, at };
}

/**
 * The guards' minimum float: the largest bid any campaign makes (its valuation's 99.99th
 * percentile, bids above are capped at it), so a float always covers one bid.
 */
export function minFloat(scenario: Scenario): number {
  let m = 5_000;
  for (const c of scenario.campaigns)
    m = Math.max(m, Math.round(c.medianBidMicros * Math.exp(3.72 * c.bidSigma)));
  return m;
}
