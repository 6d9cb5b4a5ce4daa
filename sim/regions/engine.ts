/**
 * The market simulator with several regions (docs/pacing-quality.md, "Several regions"): the same
 * market, auctions and notices as the single-region engine (`sim/runner.ts`), each request routed
 * to a region by the scenario's traffic shares, and in every region the production path of
 * several regions — its own redis-server, pacer (`RegionalShardPacer`: shares, allocations, the
 * home's authority), ad servers with strict guards, track-spend — exchanging summaries, mailboxes
 * and authority entries only through the lagged `region-spend` stand-in (`replication.ts`).
 *
 * One `ManualClock`, moved second by second; every Redis call is awaited at fixed points of the
 * simulated second and each region talks only to its own server, so a run is deterministic for
 * (scenario, seed). Simpler and slower per request than the single-region engine (no overlap of
 * Redis and the request loop): multi-region scenarios are sized for it.
 */
import type { CampaignBudgets } from '../../shared/budget/model.js';
import { TICK_MS } from '../../shared/pacing/types.js';
import { prng } from '../../shared/random/prng.js';
import type { RedisClient } from '../../shared/redis/connect.js';
import { planDayKeys } from '../../shared/spend/keys.js';
import { readPlanDay } from '../../shared/spend/live-counters.js';
import { ScenarioBudgets } from '../budgets.js';
import { Auctioneer, minFloat, type NoticeEvent } from '../engine/bidding.js';
import { MinuteQueue, mix } from '../engine/market.js';
import { NOTICE_BATCH_MS } from '../engine/notices.js';
import { type RunSpan, runEverySecond, runSpan } from '../engine/span.js';
import type { RegionRun, RegionsRunOptions, StrategyRun } from '../engine/types.js';

export type { RegionProbe, RegionsRunOptions } from '../engine/types.js';

import { recordLoss } from '../engine/day-figures.js';
import { type CampaignRun, tracksOf, World } from '../engine/world.js';
import { dayWindows, NoticeQueue } from '../engine-parts.js';
import { idealTraffic } from '../ideal.js';
import type { Scenario } from '../scenario.js';
import { buildRegions } from './build.js';
import type { SimRegion } from './region.js';
import type { ReplicatedTable } from './replication.js';
import { type ScenarioRegion, trafficAt, within } from './scenario.js';
import { type PlanTrack, Tracks } from './scoring.js';

const MINUTE = 60_000;
/** Salt of the request → region draw (independent of eligibility and bidding draws). */
const ROUTE_SALT = 0x726f7574;

/** Region stats kept over the run (beside the guards' own counters). */
interface RegionStats {
  requests: number;
  bids: number;
  ticks: number;
  published: number;
  granted: number;
  reclaimed: number;
  reclaims: number;
  authorityAgeMax: number;
  lostSeconds: number;
}

/** Runs one strategy over a multi-region scenario (each Redis empty; the caller flushes them). */
export async function runRegions(options: RegionsRunOptions): Promise<StrategyRun> {
  const specs = options.scenario.regions as readonly ScenarioRegion[];
  if (!specs || options.redis.length !== specs.length)
    throw new Error('runRegions needs the scenario’s regions and one Redis per region.');
  return runEverySecond(new RegionsRun(options, specs));
}

/**
 * One strategy's multi-region run: the shared world, market and auctions (sim/engine/), each
 * request routed to a live region, and per region its faults, pacer tick, notices and scoring.
 */
class RegionsRun {
  readonly span: RunSpan;
  private readonly scenario: Scenario;
  private readonly errors: string[] = [];
  private readonly faultLog: string[] = [];
  private readonly windowOf = dayWindows();
  private readonly world: World<PlanTrack>;
  private readonly regions: SimRegion[];
  private readonly table: ReplicatedTable;
  private readonly stats: RegionStats[];
  private readonly noticeQueues: NoticeQueue<NoticeEvent>[];
  private readonly tracks: Tracks;
  /** Every campaign's budgets as track-spend reads them. */
  private readonly live: Map<string, CampaignBudgets>;
  private readonly market: MinuteQueue;
  private readonly auctioneer: Auctioneer<PlanTrack>;
  /** The region of the request being run (the auction's sink books to it). */
  private region = 0;
  private applied = 0;
  private lastLog = 0;
  private readonly wall0 = Date.now();
  private readonly cpu0 = process.cpuUsage();

  constructor(
    private readonly options: RegionsRunOptions,
    private readonly specs: readonly ScenarioRegion[],
  ) {
    const { clock, scenario, strategy } = options;
    this.scenario = scenario;
    const seed = options.seed ?? scenario.seed;
    this.span = runSpan(scenario, strategy, options.untilMs);
    clock.set(this.span.startMs);
    const budgets = new ScenarioBudgets(scenario, (m) => (strategy === 'asap' ? 'asap' : m), 0, 1);
    const live = new Map<string, CampaignBudgets>();
    ({ regions: this.regions, table: this.table } = buildRegions(options, specs, budgets, live, (line) =>
      this.errors.push(line),
    ));
    this.stats = specs.map(() => ({
      requests: 0,
      bids: 0,
      ticks: 0,
      published: 0,
      granted: 0,
      reclaimed: 0,
      reclaims: 0,
      authorityAgeMax: 0,
      lostSeconds: 0,
    }));
    this.noticeQueues = specs.map(
      (s) =>
        new NoticeQueue<NoticeEvent>(
          NOTICE_BATCH_MS,
          s.lost.map((l) => ({ atMs: l.fromMs, untilMs: l.toMs })),
        ),
    );
    const createdAt = new Map(scenario.campaigns.map((c) => [c.id, c.createdAtMs]));
    this.tracks = new Tracks(specs.length, options.series === true, idealTraffic(scenario), (id) =>
      createdAt.get(id),
    );
    this.world = new World<PlanTrack>(scenario, seed, budgets);
    this.live = live;
    this.market = new MinuteQueue(scenario, seed);
    this.auctioneer = new Auctioneer<PlanTrack>(
      scenario,
      this.world.campaigns,
      prng(seed ^ 0x62696473),
      minFloat(scenario),
      {
        win: (c, armId, at, price, clicked) => this.win(c, armId, at, price, clicked),
        lost: (c, armId, at, outcome) => {
          const day = this.windowOf(c.timeZone, at).day;
          for (const t of tracksOf(c, armId)) recordLoss(this.tracks.day(t, day), outcome);
        },
        notice: (_c, at, event) =>
          (this.noticeQueues[this.region] as NoticeQueue<NoticeEvent>).add(at, event),
      },
    );
  }

  /** One simulated second: replication, faults, changes, ticks, the minute's work, notices, requests. */
  async second(now: number): Promise<void> {
    const { clock } = this.options;
    clock.set(now);
    const bidding = now < this.span.endMs;
    this.table.deliver(now);
    if (bidding) {
      await this.applyFaults(now);
      if (this.world.applyChanges(now, (c, b) => this.setBudgets(c, b))) await this.prefetchAll();
      if (now % TICK_MS === 0) await this.tick(now);
      if (now % MINUTE === 0) await this.minute(now);
    }
    await this.applyNotices(now);
    if (!bidding) return;
    const market = this.market;
    while (market.hasBefore(now + 1000)) {
      const k = market.next;
      const id = market.firstId + k;
      const at = market.at[k] as number;
      market.next++;
      clock.set(at);
      this.request(id, at, market.competing[k] as number, market.segment[k] as number);
    }
    clock.set(now);
    await Promise.all(this.regions.flatMap((r) => r.servers.map((s) => s.guard.idle())));
  }

  /** A campaign's new budgets: track-spend's view, the scorer's tracks, every region's guards. */
  private setBudgets(c: CampaignRun<PlanTrack>, b: CampaignBudgets): void {
    this.live.set(c.spec.id, b);
    const common = this.tracks.track(b.common);
    c.tracksByArm = new Map([['', common]]);
    for (const arm of c.spec.arms) {
      const p = b.arms.get(arm.id);
      c.tracksByArm.set(arm.id, p ? [...common, ...this.tracks.track([p])] : common);
    }
    for (const r of this.regions) r.setBudgets(b);
  }

  /** Every region's readers prefetch the active campaigns. */
  private async prefetchAll(): Promise<void> {
    for (const r of this.regions) for (const s of r.servers) await s.reader.prefetch(this.world.active);
  }

  /** The minute: the scorer's sample, the probe, the market's requests, the guards' upkeep. */
  private async minute(now: number): Promise<void> {
    const { regions, options } = this;
    const active = this.world.active;
    await Promise.all(regions.map((r) => (r.up ? r.monitor.prefetch(active) : undefined)));
    this.tracks.sample(
      now,
      this.windowOf,
      regions.map((r) => (r.up ? r.monitor : undefined)),
    );
    await options.onMinute?.(
      now,
      regions.map((r, i) => ({
        name: r.name,
        up: r.up,
        redis: options.redis[i] as RedisClient,
        published: r.monitor,
      })),
    );
    this.market.draw(now);
    await Promise.all(regions.flatMap((r) => r.servers.map((s) => s.guard.maintain())));
    if (now - this.lastLog >= 6 * 3_600_000) {
      this.lastLog = now;
      options.onProgress?.(
        `${options.strategy}: ${new Date(now).toISOString()} requests ${this.market.requests} bids ${this.auctioneer.bids}`,
      );
    }
  }

  /** Regions lost and back at `now` (a lost region's processes die; back, they start cold). */
  private async applyFaults(now: number): Promise<void> {
    for (let i = 0; i < this.regions.length; i++) {
      const r = this.regions[i] as SimRegion;
      const spec = this.specs[i] as ScenarioRegion;
      const lost = within(spec.lost, now);
      if (lost && r.up) {
        r.crash();
        this.faultLog.push(`${new Date(now).toISOString()} region-lost ${r.name}`);
      } else if (!lost && !r.up) {
        if (now > this.span.startMs)
          this.faultLog.push(`${new Date(now).toISOString()} region-back ${r.name}`);
        r.start(this.world.activeBudgets());
        for (const s of r.servers) await s.reader.prefetch(this.world.active);
      }
      if (lost) (this.stats[i] as RegionStats).lostSeconds++;
      for (const u of spec.unreachable)
        if (u.fromMs === now || u.toMs === now)
          this.faultLog.push(
            `${new Date(now).toISOString()} home-region-${u.fromMs === now ? 'unreachable' : 'reachable'} ${r.name}`,
          );
    }
  }

  /** Every live region's pacer tick, then every reader's refresh-ahead. */
  private async tick(now: number): Promise<void> {
    const t = Math.floor(now / TICK_MS);
    const { regions, errors } = this;
    for (let i = 0; i < regions.length; i++) {
      const run = regions[i]?.tick(t);
      if (!run) continue;
      const st = this.stats[i] as RegionStats;
      const name = regions[i]?.name;
      const o = await run;
      st.ticks++;
      if (o.own.published) st.published++;
      const alloc = o.own.sharing?.allocation;
      if (alloc?.authorityAgeMs !== undefined)
        st.authorityAgeMax = Math.max(st.authorityAgeMax, alloc.authorityAgeMs);
      if (o.own.sharing?.error) errors.push(`${name} sharing at ${now}: ${o.own.sharing.error}`);
      if (o.own.invalidParams > 0)
        errors.push(`${name} pacer: ${o.own.invalidParams} fail-safe plans at ${now}`);
      if (o.authority) {
        st.granted += o.authority.grantedMicros;
        st.reclaimed += o.authority.reclaimedMicros;
        st.reclaims += o.authority.reclaims.length;
        if (o.authority.error) errors.push(`${name} authority at ${now}: ${o.authority.error}`);
      }
    }
    await Promise.all(regions.flatMap((r) => r.servers.map((s) => s.reader.refreshDue())));
  }

  /** The region of request `id` at `at`: by the live regions' traffic shares. */
  private route(id: number, at: number): number {
    const { regions, specs } = this;
    let total = 0;
    for (let i = 0; i < regions.length; i++)
      if (regions[i]?.up) total += trafficAt(specs[i] as ScenarioRegion, at);
    const up = regions.filter((r) => r.up).length;
    let u = mix(id, ROUTE_SALT) * (total > 0 ? total : up);
    let last = -1;
    for (let i = 0; i < regions.length; i++) {
      if (!regions[i]?.up) continue;
      last = i;
      u -= total > 0 ? trafficAt(specs[i] as ScenarioRegion, at) : 1;
      if (u < 0) return i;
    }
    return last;
  }

  /** Request `id`: routed to a region, bid on by that region's ad server. */
  private request(id: number, at: number, competing: number, segment: number): void {
    const ri = this.route(id, at);
    const region = this.regions[ri] as SimRegion;
    const st = this.stats[ri] as RegionStats;
    st.requests++;
    const server = region.servers[id % region.servers.length];
    if (!server) return;
    this.region = ri;
    const eligible = this.world.bySegment[segment] as CampaignRun<PlanTrack>[];
    st.bids += this.auctioneer.run(id, at, competing, eligible, server);
  }

  /** A won impression, combined and in the request's region. */
  private win(
    c: CampaignRun<PlanTrack>,
    armId: string | undefined,
    at: number,
    price: number,
    clicked: boolean,
  ) {
    const ri = this.region;
    const day = this.windowOf(c.timeZone, at).day;
    for (const t of tracksOf(c, armId)) {
      const d = this.tracks.day(t, day);
      d.impressions++;
      d.charged += price;
      (d.regionImpressions as Float64Array)[ri] = (d.regionImpressions[ri] as number) + 1;
      (d.regionCharged as Float64Array)[ri] = (d.regionCharged[ri] as number) + price;
      if (clicked) {
        d.clicks++;
        (d.regionClicks as Float64Array)[ri] = (d.regionClicks[ri] as number) + 1;
      }
    }
  }

  /** Each region's notices due at `now`, through its tracker; their spend booked. */
  private async applyNotices(now: number): Promise<void> {
    for (let i = 0; i < this.regions.length; i++) {
      const due = (this.noticeQueues[i] as NoticeQueue<NoticeEvent>).take(now);
      if (!due) continue;
      const region = this.regions[i] as SimRegion;
      const outcomes = await Promise.all(
        due.map((ev) =>
          region.tracker.apply(ev).catch((e: unknown) => {
            this.errors.push(`${region.name} tracker: ${String(e)}`);
            return undefined;
          }),
        ),
      );
      this.applied += outcomes.length;
      outcomes.forEach((o, k) => {
        if (!o || o.addedMicros <= 0) return;
        const ev = due[k] as NoticeEvent;
        const c = this.world.byId.get(ev.campaignId) as CampaignRun<PlanTrack>;
        const day = this.windowOf(c.timeZone, ev.bidAt).day;
        for (const t of tracksOf(c, ev.armId)) {
          const d = this.tracks.day(t, day);
          d.spent += o.addedMicros;
          (d.regionSpent as Float64Array)[i] = (d.regionSpent[i] as number) + o.addedMicros;
        }
      });
    }
  }

  /** Live counters of every plan-day, per region (rebuilt from the region's own wins if lost). */
  private async counters(): Promise<Map<string, number[]>> {
    const counters = new Map<string, number[]>();
    for (const t of this.tracks.byKey.values()) {
      for (const day of t.days.keys()) {
        const per: number[] = [];
        for (let i = 0; i < this.regions.length; i++) {
          const redis = this.options.redis[i] as RedisClient;
          const key = planDayKeys(t.plan, day).state;
          let snap = await readPlanDay(redis, key, this.span.drainUntilMs);
          const spent = t.days.get(day)?.regionSpent[i] ?? 0;
          if (snap.epoch === undefined && spent > 0) {
            await (this.regions[i] as SimRegion).reconciler.reconcile(t.plan, day);
            snap = await readPlanDay(redis, key, this.span.drainUntilMs);
          }
          per.push(snap.confirmedMicros);
        }
        counters.set(`${t.key}|${day}`, per);
      }
    }
    return counters;
  }

  /** Closes the regions and scores the run, combined and per region. */
  async finish(): Promise<StrategyRun> {
    for (const r of this.regions) await r.close();
    const counters = await this.counters();
    const scored = new Set(this.scenario.scoredDays);
    const countOf = (region?: number) => (t: PlanTrack, day: string) => {
      const per = counters.get(`${t.key}|${day}`) ?? [];
      return region === undefined ? per.reduce((a, b) => a + b, 0) : (per[region] ?? 0);
    };
    const regionRuns: RegionRun[] = this.regions.map((r, i) => {
      const st = this.stats[i] as RegionStats;
      return {
        region: r.name,
        plans: this.tracks.results(scored, countOf(i), i),
        requests: st.requests,
        bids: st.bids,
        leaseCalls: r.totals.leaseCalls,
        allocationHolds: r.totals.allocationHolds,
        allocationRefusals: r.totals.allocationRefusals,
        ticks: st.ticks,
        publishedTicks: st.published,
        grantedMicros: st.granted,
        reclaimedMicros: st.reclaimed,
        reclaims: st.reclaims,
        authorityAgeMaxMs: st.authorityAgeMax,
        lostMinutes: Math.round(st.lostSeconds / 60),
      };
    });
    const cpu = process.cpuUsage(this.cpu0);
    return {
      strategy: this.options.strategy,
      plans: this.tracks.results(scored, countOf()),
      requests: this.market.requests,
      auctions: this.auctioneer.auctions,
      bids: this.auctioneer.bids,
      notices: this.applied,
      leaseCalls: regionRuns.reduce((a, r) => a + r.leaseCalls, 0),
      ticks: regionRuns.reduce((a, r) => a + r.ticks, 0),
      publishedTicks: regionRuns.reduce((a, r) => a + r.publishedTicks, 0),
      fencedWritesRejected: 0,
      staleWritesAccepted: 0,
      stateReloads: 0,
      faults: this.faultLog,
      errors: this.errors,
      wallMs: Date.now() - this.wall0,
      cpuMs: Math.round((cpu.user + cpu.system) / 1000),
      redisCpuMs: 0,
      regions: regionRuns,
    };
  }
}
