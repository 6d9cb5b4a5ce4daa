/**
 * The market simulator's engine: replays a scenario's days of auctions, second by second on a
 * `ManualClock`, against the production pacing path on a real redis-server. This file orders the
 * simulated second; each phase of the world is a module of `sim/engine/`:
 *
 * - the pacer (`pacer.ts`): `ShardPacer` (budgets from a real `ShardBudgets` cache fed by the scenario's
 *   budget items, live spend through `rawSpendSource` as the pacer function reads it, the
 *   strategy's controller, the fenced claim + publish Lua scripts of `publisher.ts` and the pacing
 *   codec) ticking every 10 s;
 * - ad servers (`ad-servers.ts`, `bidding.ts`; `scenario.guards` of them): each a `PacingReader` (refresh-ahead after every tick,
 *   `forBid` per bid) and a `BudgetGuard` whose E(t) is `publishedCurve(reader)`;
 * - spend (`notices.ts`): every win/loss notice through the real `SpendTracker` into the live counters, with an
 *   in-memory ledger holding the DynamoDB ledger's contract; counters lost with Redis are rebuilt
 *   by the real `Reconciler` from it;
 * - the market (`market.ts`, `world.ts` over the model of `sim/market/`): global request traffic from an hourly shape with noise, spikes
 *   and outages; each request has a segment and is eligible for the campaigns that target it
 *   (deterministic per request and campaign, so every strategy sees the same requests); our
 *   eligible bids and the market's best competing bid (iPinYou clearing prices, scaled, shifted)
 *   meet in one second- or first-price auction; notices are delayed, lost and duplicated;
 * - faults (`faults.ts`): the leader killed (no publisher for the lease TTL, then a new process takes over
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
 * different connections touches disjoint keys. Scoring per plan-day: `scoring.ts`.
 */

import { TICK_MS } from '../shared/pacing/types.js';
import { prng } from '../shared/random/prng.js';
import { RawScriptCaller } from '../shared/redis/resp/script-caller.js';
import { defaultInFlight, Reconciler } from '../shared/spend/reconcile.js';
import { SpendTracker } from '../shared/spend/tracker.js';
import { ScenarioBudgets } from './budgets.js';
import { AdServers } from './engine/ad-servers.js';
import { Auctioneer, minFloat } from './engine/bidding.js';
import { FaultSchedule } from './engine/faults.js';
import { MinuteQueue } from './engine/market.js';
import { NoticeFlow } from './engine/notices.js';
import { cpuMs, LeaseOverlap, OVERLAP_EVERY, Phases, redisCpuMs } from './engine/overlap.js';
import { SimPacer } from './engine/pacer.js';
import { type PlanTrack, Scorer } from './engine/scoring.js';
import { type RunSpan, runEverySecond, runSpan } from './engine/span.js';
import type { RunOptions, StrategyRun } from './engine/types.js';
import { type CampaignRun, World } from './engine/world.js';
import { dayWindows, memoryLedger } from './engine-parts.js';

export type { PhaseTimes } from './engine/overlap.js';

export type {
  PlanDayResult,
  RegionRun,
  RunOptions,
  RunProbe,
  StrategyRun,
} from './engine/types.js';

const SHARD = 0;
const SHARDS = 1;
const MINUTE = 60_000;
/**
 * The raw calls' no-reply timeout in the simulator (reads and scripts): minutes of real time. The simulated clock
 * stands still while the process waits, so a slow, shared machine only makes a run longer; the
 * readers' timeouts themselves are tested in test/integration/pacing/.
 */
const SIM_READ_TIMEOUT_MS = 300_000;

/** Runs one strategy over the scenario on an empty Redis (the caller flushes between runs). */
export async function runStrategy(options: RunOptions): Promise<StrategyRun> {
  // Script calls wait as long as reads (the client's shared caller takes it when first made).
  RawScriptCaller.of(options.redis, { timeoutMs: SIM_READ_TIMEOUT_MS });
  const run = new SingleRegionRun(options);
  await run.start();
  return runEverySecond(run);
}

/**
 * One strategy's run: the world's phases (sim/engine/) wired together, and the order of one
 * simulated second — faults, budget changes, the pacer's tick and the readers' refresh, at a
 * minute the scorer's sample, the minute's requests and the guards' upkeep; then the notices due,
 * the requests of the second (bids and auctions), and the lease calls landing.
 */
class SingleRegionRun {
  readonly span: RunSpan;
  private readonly seed: number;
  private readonly errors: string[] = [];
  private readonly phase: Phases | undefined;
  private readonly windowOf = dayWindows();
  private readonly world: World<PlanTrack>;
  private readonly reconciler: Reconciler;
  private readonly scorer: Scorer;
  private readonly ads: AdServers;
  private readonly pacer: SimPacer;
  private readonly faults: FaultSchedule;
  private readonly market: MinuteQueue;
  private readonly auctioneer: Auctioneer<PlanTrack>;
  private readonly notices: NoticeFlow;
  /** Off (`overlap: false`): commands written after each loop and notices awaited before the request loop. */
  private readonly overlapOn: boolean;
  private readonly overlap: LeaseOverlap;
  private readonly createdAt: Map<string, number | undefined>;
  /** The ad servers' refresh-ahead of the last tick, while it is in flight. */
  private refreshing: Promise<unknown> | undefined;
  private lastLog = 0;
  private wall0 = 0;
  private cpu0 = 0;
  private rcpu0 = 0;

  constructor(private readonly options: RunOptions) {
    const { redis, clock, scenario, strategy } = options;
    this.seed = options.seed ?? scenario.seed;
    this.phase = options.phases ? new Phases() : undefined;
    this.span = runSpan(scenario, strategy, options.untilMs);
    const onError = (line: string) => this.errors.push(line);
    // Budgets: the items a pacer shard's index would return, and the ad servers' view.
    const budgets = new ScenarioBudgets(scenario, (m) => (strategy === 'asap' ? 'asap' : m), SHARD, SHARDS);
    this.world = new World<PlanTrack>(scenario, this.seed, budgets);
    this.createdAt = new Map(scenario.campaigns.map((c) => [c.id, c.createdAtMs]));
    // Spend path: an in-memory ledger with the DynamoDB ledger's contract.
    const ledger = memoryLedger();
    const inFlight = defaultInFlight;
    const campaigns = this.world.campaigns;
    this.reconciler = new Reconciler({
      redis,
      ledger,
      clock,
      inFlight,
      campaignsOfAccount: async (accountId) =>
        campaigns.filter((c) => c.spec.accountId === accountId).map((c) => c.spec.id),
    });
    const live = new Map(campaigns.map((c) => [c.spec.id, c]));
    const tracker = new SpendTracker({
      redis,
      ledger,
      reconciler: this.reconciler,
      clock,
      inFlight,
      budgets: async (id) => live.get(id)?.budgets,
    });
    this.scorer = new Scorer(
      scenario,
      this.windowOf,
      options.series ? (options.seriesEveryMs ?? 10 * MINUTE) : undefined,
    );
    const cap = minFloat(scenario);
    this.ads = new AdServers({
      redis,
      clock,
      count: scenario.guards,
      minFloatMicros: cap,
      reconciler: this.reconciler,
      readTimeoutMs: SIM_READ_TIMEOUT_MS,
      onError,
    });
    this.pacer = new SimPacer({
      redis,
      clock,
      strategy,
      auction: scenario.market.auction,
      audienceTimeZone: scenario.timeZone,
      budgets,
      readTimeoutMs: SIM_READ_TIMEOUT_MS,
      leaseTtlMs: scenario.leaseTtlMs,
      ...(options.takeoverEveryTick ? { takeoverEveryTick: true } : {}),
      onError,
    });
    this.faults = new FaultSchedule(scenario, redis, this.pacer, this.span.startMs);
    this.market = new MinuteQueue(scenario, this.seed);
    this.overlapOn = options.overlap ?? true;
    this.overlap = new LeaseOverlap(redis, this.overlapOn);
    this.notices = new NoticeFlow({
      scenario,
      clock,
      tracker,
      overlap: this.overlap,
      overlapOn: this.overlapOn,
      onError,
      book: (ev, micros) => {
        const c = this.world.byId.get(ev.campaignId);
        if (c) this.scorer.book(c, ev.armId, this.windowOf(c.timeZone, ev.bidAt).day, micros);
      },
    });
    this.auctioneer = new Auctioneer<PlanTrack>(scenario, campaigns, prng(this.seed ^ 0x62696473), cap, {
      win: (c, armId, at, price, clicked) => this.scorer.win(c, armId, at, price, clicked),
      notice: (_c, at, event) => this.notices.add(at, event),
      lost: (c, armId, at, outcome) => this.scorer.lost(c, armId, at, outcome),
    });
  }

  /** Takes the CPU baselines and sets the clock to the run's start. */
  async start(): Promise<void> {
    this.wall0 = Date.now();
    this.cpu0 = cpuMs();
    this.rcpu0 = await redisCpuMs(this.options.redis);
    this.options.clock.set(this.span.startMs);
  }

  /** One simulated second (class comment). */
  async second(now: number): Promise<void> {
    const { clock } = this.options;
    const phase = this.phase;
    clock.set(now);
    const bidding = now < this.span.endMs;
    if (bidding) await this.beforeRequests(now);
    // Taken already when the pacer's tick issued them (see `tick`).
    const due = this.notices.take(now);
    if (due) {
      phase?.begin();
      // Applied while the refresh's replies are still coming in: the two touch disjoint keys
      // (published parameters are read; live counters are written), and nothing that uses the
      // readers runs until both are awaited, so the outcome is the same as one after the other,
      // with Redis and this process working at once. Their replies are awaited after the request
      // loop (with the lease replies): the scripts are queued on the raw script connection ahead
      // of every lease call the loop issues, so Redis applies them all before any of those
      // leases, as when they were awaited here — while this process runs the loop. Only the
      // scorer's booking waits, and nothing reads it before the next minute's sample. Issued in
      // runs of OVERLAP_EVERY × 4, each written before the next is built (LeaseOverlap): Redis
      // applies one run while the tracker builds the next. The scripts of a batch commute (each
      // adds to or releases its own plan-day's counters, dedup per bid; the batch's clock is one
      // instant), so the order within the batch does not change any reply.
      await this.notices.issue(due, now);
      await this.refreshLanded();
      if (!bidding || !this.overlapOn) await this.notices.landed();
      phase?.end('notices');
    }
    if (this.refreshing) {
      phase?.begin();
      await this.refreshLanded();
      phase?.end('refresh');
    }
    if (!bidding) return;
    if (this.options.probe) {
      await this.options.probe({
        now,
        redis: this.options.redis,
        plans: this.scorer.plans(),
        curves: this.ads.servers.map((x) => x.curve),
      });
    }
    phase?.begin();
    await this.requests(now);
    phase?.end('requests');
    clock.set(now);
    phase?.begin();
    // Lease calls of this second, of every guard, land before the next one (awaits only).
    await this.ads.idle();
    await this.notices.landed();
    phase?.end('idle');
  }

  /** Faults, budget changes, the tick, and at a minute the sample, the market and the upkeep. */
  private async beforeRequests(now: number): Promise<void> {
    const phase = this.phase;
    await this.faults.apply(now);
    if (
      this.world.applyChanges(
        now,
        (c, b) => {
          this.scorer.link(c, b, now);
          this.ads.setBudgets(b);
        },
        // Flight days close at the pacer's ticks, as the closer runs beside them.
        now % TICK_MS === 0 ? (c, day) => this.scorer.campaignSpent(c.spec.id, day) : undefined,
      )
    )
      await this.ads.prefetch(this.world.active);
    let monitored: Promise<unknown> | undefined;
    if (now % TICK_MS === 0) ({ refreshed: this.refreshing, monitored } = await this.tick(now));
    if (now % MINUTE !== 0) return;
    // The monitor and the guards' upkeep read what the refresh brings (the guards' E(t)).
    phase?.begin();
    await this.refreshLanded();
    phase?.end('refresh');
    phase?.begin();
    await (monitored ?? this.ads.monitor.prefetch(this.world.active));
    this.scorer.sample(now, this.ads.monitor, this.ads.monitorCurve, (id) => this.createdAt.get(id));
    phase?.end('monitor');
    this.market.draw(now);
    phase?.begin();
    await this.ads.maintain();
    phase?.end('maintain');
    if (now - this.lastLog >= 6 * 3_600_000) {
      this.lastLog = now;
      this.options.onProgress?.(
        `${this.options.strategy}: ${new Date(now).toISOString()} requests ${this.market.requests} bids ${this.auctioneer.bids}`,
      );
    }
  }

  /**
   * The pacer's tick, then the ad servers' refresh-ahead issued (not awaited: see `second`; it is
   * returned in an object so that `await tick()` does not wait for it).
   */
  private async tick(
    now: number,
  ): Promise<{ readonly refreshed: Promise<unknown>; readonly monitored: Promise<unknown> | undefined }> {
    const { pacer, phase } = this;
    pacer.ticks++;
    if (pacer.upAt(now)) {
      phase?.begin();
      // The second's notices are issued once the controller has stepped, before the publish
      // (ShardPacer's beforePublish): the spend read has landed, so they cannot change what it
      // saw, and they touch none of the keys the publish writes; Redis applies them while this
      // process builds the publish, and this process builds them while Redis would otherwise be
      // the only one working. Not at a minute's tick (the guards' upkeep leases come before the
      // notices there), nor while a stale pacer still ticks after a flip (its spend read follows
      // this tick).
      if (this.overlapOn && now % MINUTE !== 0 && !pacer.staleTicking) {
        pacer.publishHook = async () => {
          const due = this.notices.take(now);
          if (due) await this.notices.issue(due, now);
        };
      }
      try {
        await pacer.leaderTick(now);
      } finally {
        pacer.publishHook = undefined;
      }
      phase?.end('pacer');
    }
    await pacer.staleTick(now);
    // Refresh-ahead of every ad server's reader, once the publish has landed.
    phase?.begin();
    const refreshed = this.ads.refreshDue();
    // The scorer's minute read, merged with it (see `AdServers.monitor`).
    const monitored = now % MINUTE === 0 ? this.ads.monitor.prefetch(this.world.active) : undefined;
    // Awaited after the refresh (a rejection is not left unhandled if the refresh throws first).
    monitored?.catch(() => undefined);
    phase?.end('refresh');
    return { refreshed, monitored };
  }

  /** Waits for the refresh, if any, to land. */
  private async refreshLanded(): Promise<void> {
    await this.refreshing;
    this.refreshing = undefined;
  }

  /** The second's requests, each at its instant: bids, auction, notices planned. */
  private async requests(now: number): Promise<void> {
    const { market, overlap } = this;
    const { clock } = this.options;
    const bySegment = this.world.bySegment;
    overlap.begin();
    let sinceFlush = 0;
    while (market.hasBefore(now + 1000)) {
      const k = market.next;
      const at = market.at[k] as number;
      if (++sinceFlush === OVERLAP_EVERY) {
        sinceFlush = 0;
        await overlap.flush(clock, now);
      }
      const id = market.firstId + k;
      market.next++;
      clock.set(at);
      this.auctioneer.run(
        id,
        at,
        market.competing[k] as number,
        bySegment[market.segment[k] as number] as CampaignRun<PlanTrack>[],
        this.ads.serverOf(id),
      );
    }
    overlap.end();
  }

  /** Closes the processes and scores the run. */
  async finish(): Promise<StrategyRun> {
    const { redis, strategy } = this.options;
    await this.ads.close();
    this.pacer.close();
    const staleWritesAccepted = await this.pacer.staleWritesAccepted();
    const plans = await this.scorer.results(redis, this.reconciler, this.span.drainUntilMs);
    const { pacer, market, auctioneer } = this;
    return {
      strategy,
      plans,
      requests: market.requests,
      auctions: auctioneer.auctions,
      bids: auctioneer.bids,
      notices: this.notices.applied,
      leaseCalls: this.ads.leaseCalls,
      ticks: pacer.ticks,
      publishedTicks: pacer.published,
      fencedWritesRejected: pacer.fenced,
      staleWritesAccepted,
      stateReloads: pacer.reloads,
      deliveryMinutes: pacer.deliveryMinutes,
      faults: this.faults.log,
      errors: this.errors,
      wallMs: Date.now() - this.wall0,
      cpuMs: Math.round(cpuMs() - this.cpu0),
      redisCpuMs: Math.round((await redisCpuMs(redis)) - this.rcpu0),
      ...(this.phase ? { phases: this.phase.times } : {}),
    };
  }
}
