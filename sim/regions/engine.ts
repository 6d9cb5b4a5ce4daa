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
import type { CampaignBudgets, ResolvedPlan } from '../../shared/budget/model.js';
import { allocationConfig } from '../../shared/pacing/regions/allocation-config.js';
import { TICK_MS } from '../../shared/pacing/types.js';
import { prng, type Random } from '../../shared/random/prng.js';
import type { RedisClient } from '../../shared/redis/connect.js';
import { planDayKeys } from '../../shared/spend/keys.js';
import { readPlanDay } from '../../shared/spend/live-counters.js';
import type { SpendTracker } from '../../shared/spend/tracker.js';
import type { ManualClock } from '../../shared/time/clock.js';
import { ScenarioBudgets } from '../budgets.js';
import { minFloat, noticeEvent } from '../engine/bidding.js';
import { minuteRequests, mix } from '../engine/market.js';
import type { RegionRun, StrategyRun } from '../engine/types.js';
import { armOf, dayWindows, NoticeQueue } from '../engine-parts.js';
import { idealTraffic } from '../ideal.js';
import {
  type AuctionBid,
  gaussian,
  loadIpinyouHistogram,
  plannedNotices,
  priceSampler,
  runAuction,
} from '../market/index.js';
import type { Scenario, ScenarioCampaign } from '../scenario.js';
import type { StrategyName } from '../strategies.js';
import { SimRegion } from './region.js';
import { ReplicatedTable } from './replication.js';
import { type ScenarioRegion, trafficAt, within } from './scenario.js';
import { type PlanTrack, Tracks } from './scoring.js';

/** Options of {@link runRegions}. */
export interface RegionsRunOptions {
  /** One empty Redis per scenario region, in the scenario's order. */
  readonly redis: readonly RedisClient[];
  readonly clock: ManualClock;
  readonly scenario: Scenario;
  readonly strategy: StrategyName;
  /** @default scenario.seed */
  readonly seed?: number;
  /** Keep 10-minute series of the combined figures (charts). @default false */
  readonly series?: boolean;
  readonly onProgress?: (line: string) => void;
  /** Stop bidding at this instant instead of the scenario's end (short tests). */
  readonly untilMs?: number;
  /**
   * Called every simulated minute, after the sample, with the regions (tests and diagnostics:
   * their caches, what their pacers published).
   */
  readonly onMinute?: (nowMs: number, regions: readonly RegionProbe[]) => Promise<void> | void;
}

/** What {@link RegionsRunOptions.onMinute} sees of a region. */
export interface RegionProbe {
  readonly name: string;
  readonly up: boolean;
  readonly redis: RedisClient;
  /** The scorer's reader of the region's published parameters (fresh this minute when up). */
  readonly published: SimRegion['monitor'];
}

const MINUTE = 60_000;
const NOTICE_BATCH_MS = 5_000;
/** Salt of the request → region draw (independent of eligibility and bidding draws). */
const ROUTE_SALT = 0x726f7574;

interface Notice {
  readonly event: Parameters<SpendTracker['apply']>[0];
  readonly region: number;
}

interface CampaignRun {
  readonly spec: ScenarioCampaign;
  readonly index: number;
  readonly salt: number;
  readonly timeZone: string;
  budgets: CampaignBudgets | undefined;
  tracksByArm: Map<string, PlanTrack[]>;
}

interface Bidder extends AuctionBid<number> {
  key: number;
  bidMicros: number;
  armId: string | undefined;
}

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
  const { clock, scenario, strategy } = options;
  const specs = scenario.regions as readonly ScenarioRegion[];
  if (!specs || options.redis.length !== specs.length)
    throw new Error('runRegions needs the scenario’s regions and one Redis per region.');
  const wall0 = Date.now();
  const cpu0 = process.cpuUsage();
  const seed = options.seed ?? scenario.seed;
  const asap = strategy === 'asap';
  const names = specs.map((s) => s.name);
  const config = allocationConfig(names);
  const errors: string[] = [];
  const faultLog: string[] = [];
  const runStart = strategy === 'paceline' ? scenario.startMs : scenario.scoredStartMs;
  clock.set(runStart);

  const budgets = new ScenarioBudgets(scenario, (m) => (asap ? 'asap' : m), 0, 1);
  const live = new Map<string, CampaignBudgets>();
  const table = new ReplicatedTable({
    regions: names,
    lagMsOf: (r) => specs[names.indexOf(r)]?.replicationLagMs ?? 0,
    cutAt: (r, at) => within(specs[names.indexOf(r)]?.unreachable ?? [], at),
    clock,
  });
  const campaignsOfAccount = (a: string) =>
    scenario.campaigns.filter((c) => c.accountId === a).map((c) => c.id);
  const regions: SimRegion[] = [];
  /** When a write region `from` made at `atMs` reaches region `to`'s replica (lag, then cuts). */
  const arrivalAt = (from: string, to: string, atMs: number): number => {
    let at = atMs + (specs[names.indexOf(from)]?.replicationLagMs ?? 0);
    const cuts = [
      ...(specs[names.indexOf(from)]?.unreachable ?? []),
      ...(specs[names.indexOf(to)]?.unreachable ?? []),
    ];
    for (let moved = true; moved; ) {
      moved = false;
      for (const c of cuts)
        if (at >= c.fromMs && at < c.toMs) {
          at = c.toMs;
          moved = true;
        }
    }
    return at;
  };
  /** What `region` confirmed of a plan-day in `asker`'s replica of the ledger (its reclaims). */
  const confirmedOf =
    (asker: string) =>
    async (region: string, plan: ResolvedPlan, day: string): Promise<number> => {
      const r = regions[names.indexOf(region)];
      if (!r) return 0;
      const now = clock.now();
      const ids = plan.level === 'account' ? campaignsOfAccount(plan.accountId) : [plan.campaignId as string];
      let total = 0;
      for (const id of ids)
        for (const e of await r.ledger.entries(id, day, plan.level === 'arm' ? plan.armId : undefined)) {
          const booked = r.bookedAt.get(e.bidId) ?? 0;
          if (region === asker || arrivalAt(region, asker, booked) <= now) total += e.clearingPriceMicros;
        }
      return total;
    };
  specs.forEach((spec, i) => {
    regions.push(
      new SimRegion({
        spec,
        redis: options.redis[i] as RedisClient,
        clock,
        config,
        strategy,
        budgets,
        live,
        table,
        guards: scenario.guards,
        minFloatMicros: minFloat(scenario),
        campaignsOfAccount,
        confirmedOf: confirmedOf(spec.name),
        onError: (line) => errors.push(line),
      }),
    );
  });
  const stats: RegionStats[] = specs.map(() => ({
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
  const noticeQueues = specs.map(
    (s) =>
      new NoticeQueue<Notice>(
        NOTICE_BATCH_MS,
        s.lost.map((l) => ({ atMs: l.fromMs, untilMs: l.toMs })),
      ),
  );

  const createdAt = new Map(scenario.campaigns.map((c) => [c.id, c.createdAtMs]));
  const tracks = new Tracks(specs.length, options.series === true, idealTraffic(scenario), (id) =>
    createdAt.get(id),
  );
  const windowOf = dayWindows();
  const campaigns: CampaignRun[] = scenario.campaigns.map((spec, index) => ({
    spec,
    index,
    salt: Math.imul(index + 1, 0x2545f491) ^ seed,
    timeZone: budgets.timeZoneOf(spec),
    budgets: undefined,
    tracksByArm: new Map(),
  }));
  const byId = new Map(campaigns.map((c) => [c.spec.id, c]));
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
  let active: { accountId: string; campaignId: string }[] = [];
  const activeBudgets = () => campaigns.flatMap((c) => (c.budgets ? [c.budgets] : []));
  const setBudgets = (c: CampaignRun, b: CampaignBudgets) => {
    c.budgets = b;
    live.set(c.spec.id, b);
    const common = tracks.track(b.common);
    c.tracksByArm = new Map([['', common]]);
    for (const arm of c.spec.arms) {
      const p = b.arms.get(arm.id);
      c.tracksByArm.set(arm.id, p ? [...common, ...tracks.track([p])] : common);
    }
    for (const r of regions) r.setBudgets(b);
    active = campaigns
      .filter((x) => x.budgets)
      .map((x) => ({ accountId: x.spec.accountId, campaignId: x.spec.id }));
  };
  const tracksOf = (c: CampaignRun, armId: string | undefined) =>
    c.tracksByArm.get(armId ?? '') ?? (c.tracksByArm.get('') as PlanTrack[]);

  let changeIdx = 0;
  const applyChanges = async (now: number) => {
    let dirty = false;
    for (const c of campaigns) {
      if (!c.budgets && (c.spec.createdAtMs === undefined || c.spec.createdAtMs <= now)) {
        setBudgets(c, budgets.activate(c.spec, c.spec.createdAtMs ?? scenario.startMs - 86_400_000));
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
        if (c.budgets) setBudgets(c, budgets.budgetsOf(spec));
      }
      dirty = true;
    }
    if (dirty) for (const r of regions) for (const s of r.servers) await s.reader.prefetch(active);
  };

  /** Regions lost and back at `now` (a lost region's processes die; back, they start cold). */
  const applyFaults = async (now: number) => {
    for (let i = 0; i < regions.length; i++) {
      const r = regions[i] as SimRegion;
      const spec = specs[i] as ScenarioRegion;
      const lost = within(spec.lost, now);
      if (lost && r.up) {
        r.crash();
        faultLog.push(`${new Date(now).toISOString()} region-lost ${r.name}`);
      } else if (!lost && !r.up) {
        if (now > runStart) faultLog.push(`${new Date(now).toISOString()} region-back ${r.name}`);
        r.start(activeBudgets());
        for (const s of r.servers) await s.reader.prefetch(active);
      }
      if (lost) (stats[i] as RegionStats).lostSeconds++;
      for (const u of spec.unreachable)
        if (u.fromMs === now || u.toMs === now)
          faultLog.push(
            `${new Date(now).toISOString()} home-region-${u.fromMs === now ? 'unreachable' : 'reachable'} ${r.name}`,
          );
    }
  };

  const tick = async (now: number) => {
    const t = Math.floor(now / TICK_MS);
    for (let i = 0; i < regions.length; i++) {
      const run = regions[i]?.tick(t);
      if (!run) continue;
      const st = stats[i] as RegionStats;
      const o = await run;
      st.ticks++;
      if (o.own.published) st.published++;
      const alloc = o.own.sharing?.allocation;
      if (alloc?.authorityAgeMs !== undefined)
        st.authorityAgeMax = Math.max(st.authorityAgeMax, alloc.authorityAgeMs);
      if (o.own.sharing?.error) errors.push(`${names[i]} sharing at ${now}: ${o.own.sharing.error}`);
      if (o.own.invalidParams > 0)
        errors.push(`${names[i]} pacer: ${o.own.invalidParams} fail-safe plans at ${now}`);
      if (o.authority) {
        st.granted += o.authority.grantedMicros;
        st.reclaimed += o.authority.reclaimedMicros;
        st.reclaims += o.authority.reclaims.length;
        if (o.authority.error) errors.push(`${names[i]} authority at ${now}: ${o.authority.error}`);
      }
    }
    await Promise.all(regions.flatMap((r) => r.servers.map((s) => s.reader.refreshDue())));
  };

  const random: Random = prng(seed ^ 0x62696473);
  const requestsOf = minuteRequests(scenario, seed);
  const prices = priceSampler(loadIpinyouHistogram(scenario.market.priceCampaign), {
    microsPerUnit: scenario.market.microsPerUnit,
  });
  const valuations = campaigns.map((c) => ({ median: c.spec.medianBidMicros, sigma: c.spec.bidSigma }));
  const cap = minFloat(scenario);
  const end = Math.min(scenario.endMs, options.untilMs ?? scenario.endMs);
  const drainUntil = end + scenario.notices.maxDelayMs * 3 + 2 * NOTICE_BATCH_MS;
  let queue: { at: number; competing: number; segment: number }[] = [];
  let next = 0;
  let firstId = 0;
  let requests = 0;
  let auctions = 0;
  let bids = 0;
  let applied = 0;
  let bidNo = 0;
  let lastLog = 0;
  const bidders: Bidder[] = [];

  /** The region of request `id` at `at`: by the live regions' traffic shares. */
  const route = (id: number, at: number): number => {
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
  };

  const minute = (now: number) => {
    const marketRandom = prng(Math.floor(mix(now / MINUTE, seed ^ 0x6d61726b) * 4294967296));
    const n = requestsOf(now, marketRandom);
    let shift = 1;
    for (const s of scenario.market.shifts) if (now >= s.fromMs && now < s.toMs) shift *= s.factor;
    const drawn: { at: number; competing: number; segment: number; order: number }[] = [];
    for (let i = 0; i < n; i++) {
      const u = marketRandom();
      let seg = 0;
      while (seg < segmentCdf.length - 1 && u >= (segmentCdf[seg] as number)) seg++;
      const off = Math.floor(marketRandom() * MINUTE);
      drawn.push({
        at: now + off,
        competing: Math.round(prices.sample(marketRandom) * shift),
        segment: seg,
        order: off * n + i,
      });
    }
    drawn.sort((a, b) => a.order - b.order);
    queue = drawn;
    next = 0;
    firstId = requests + 1;
    requests += n;
  };

  const request = (id: number, r: { at: number; competing: number; segment: number }) => {
    const ri = route(id, r.at);
    const region = regions[ri] as SimRegion;
    const st = stats[ri] as RegionStats;
    st.requests++;
    const server = region.servers[id % region.servers.length];
    if (!server) return;
    bidders.length = 0;
    for (const c of bySegment[r.segment] as CampaignRun[]) {
      if (!c.budgets) continue;
      const u = mix(id, c.salt);
      if (u >= c.spec.reach) continue;
      const armId = armOf(c.spec, u);
      const pacing = server.reader.forBid(c.spec.accountId, c.spec.id, armId);
      if (pacing.throttle < 1 && random() >= pacing.throttle) continue;
      const v = valuations[c.index] as { median: number; sigma: number };
      const bid = Math.min(
        cap,
        Math.max(1, Math.round(v.median * Math.exp(v.sigma * gaussian(random)) * pacing.bidMultiplier)),
      );
      const question =
        armId === undefined
          ? { campaignId: c.spec.id, priceMicros: bid }
          : { campaignId: c.spec.id, armId, priceMicros: bid };
      if (server.guard.decide(question) !== 'bid') continue;
      bidders.push({ key: c.index, bidMicros: bid, armId });
    }
    if (bidders.length === 0) return;
    auctions++;
    bids += bidders.length;
    st.bids += bidders.length;
    const result = runAuction(scenario.market.auction, bidders, r.competing, scenario.market.floorMicros);
    for (const b of bidders) {
      const c = campaigns[b.key] as CampaignRun;
      const won = result.winner === b.key;
      if (won) {
        const day = windowOf(c.timeZone, r.at).day;
        const clicked = random() < c.spec.ctr;
        for (const t of tracksOf(c, b.armId)) {
          const d = tracks.day(t, day);
          d.impressions++;
          d.charged += result.priceMicros;
          (d.regionImpressions as Float64Array)[ri] = (d.regionImpressions[ri] as number) + 1;
          (d.regionCharged as Float64Array)[ri] = (d.regionCharged[ri] as number) + result.priceMicros;
          if (clicked) {
            d.clicks++;
            (d.regionClicks as Float64Array)[ri] = (d.regionClicks[ri] as number) + 1;
          }
        }
      }
      const bidId = `b${++bidNo}`;
      for (const pn of plannedNotices(won, r.at, scenario.notices, random))
        (noticeQueues[ri] as NoticeQueue<Notice>).add(pn.at, {
          region: ri,
          event: noticeEvent(
            pn.kind,
            bidId,
            c.spec.id,
            b.armId,
            r.at,
            b.bidMicros,
            pn.at,
            result.priceMicros,
          ),
        });
    }
  };

  const applyNotices = async (now: number) => {
    for (let i = 0; i < regions.length; i++) {
      const due = (noticeQueues[i] as NoticeQueue<Notice>).take(now);
      if (!due) continue;
      const region = regions[i] as SimRegion;
      const outcomes = await Promise.all(
        due.map((n) =>
          region.tracker.apply(n.event).catch((e: unknown) => {
            errors.push(`${region.name} tracker: ${String(e)}`);
            return undefined;
          }),
        ),
      );
      applied += outcomes.length;
      outcomes.forEach((o, k) => {
        if (!o || o.addedMicros <= 0) return;
        const ev = (due[k] as Notice).event;
        const c = byId.get(ev.campaignId) as CampaignRun;
        const day = windowOf(c.timeZone, ev.bidAt).day;
        for (const t of tracksOf(c, ev.armId)) {
          const d = tracks.day(t, day);
          d.spent += o.addedMicros;
          (d.regionSpent as Float64Array)[i] = (d.regionSpent[i] as number) + o.addedMicros;
        }
      });
    }
  };

  for (let now = runStart; now < drainUntil; now += 1000) {
    clock.set(now);
    const bidding = now < end;
    table.deliver(now);
    if (bidding) {
      await applyFaults(now);
      await applyChanges(now);
      if (now % TICK_MS === 0) await tick(now);
      if (now % MINUTE === 0) {
        await Promise.all(regions.map((r) => (r.up ? r.monitor.prefetch(active) : undefined)));
        tracks.sample(
          now,
          windowOf,
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
        minute(now);
        await Promise.all(regions.flatMap((r) => r.servers.map((s) => s.guard.maintain())));
        if (now - lastLog >= 6 * 3_600_000) {
          lastLog = now;
          options.onProgress?.(
            `${strategy}: ${new Date(now).toISOString()} requests ${requests} bids ${bids}`,
          );
        }
      }
    }
    await applyNotices(now);
    if (!bidding) continue;
    while (next < queue.length && (queue[next]?.at as number) < now + 1000) {
      const r = queue[next] as { at: number; competing: number; segment: number };
      const id = firstId + next;
      next++;
      clock.set(r.at);
      request(id, r);
    }
    clock.set(now);
    await Promise.all(regions.flatMap((r) => r.servers.map((s) => s.guard.idle())));
  }
  for (const r of regions) await r.close();

  // Live counters of every plan-day, per region (rebuilt from the region's own wins if lost).
  const counters = new Map<string, number[]>();
  for (const t of tracks.byKey.values()) {
    for (const day of t.days.keys()) {
      const per: number[] = [];
      for (let i = 0; i < regions.length; i++) {
        const redis = options.redis[i] as RedisClient;
        const key = planDayKeys(t.plan, day).state;
        let snap = await readPlanDay(redis, key, drainUntil);
        const spent = t.days.get(day)?.regionSpent[i] ?? 0;
        if (snap.epoch === undefined && spent > 0) {
          await (regions[i] as SimRegion).reconciler.reconcile(t.plan, day);
          snap = await readPlanDay(redis, key, drainUntil);
        }
        per.push(snap.confirmedMicros);
      }
      counters.set(`${t.key}|${day}`, per);
    }
  }
  const scored = new Set(scenario.scoredDays);
  const countOf = (region?: number) => (t: PlanTrack, day: string) => {
    const per = counters.get(`${t.key}|${day}`) ?? [];
    return region === undefined ? per.reduce((a, b) => a + b, 0) : (per[region] ?? 0);
  };
  const regionRuns: RegionRun[] = regions.map((r, i) => {
    const st = stats[i] as RegionStats;
    return {
      region: r.name,
      plans: tracks.results(scored, countOf(i), i),
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
  const cpu = process.cpuUsage(cpu0);
  return {
    strategy,
    plans: tracks.results(scored, countOf()),
    requests,
    auctions,
    bids,
    notices: applied,
    leaseCalls: regionRuns.reduce((a, r) => a + r.leaseCalls, 0),
    ticks: regionRuns.reduce((a, r) => a + r.ticks, 0),
    publishedTicks: regionRuns.reduce((a, r) => a + r.publishedTicks, 0),
    fencedWritesRejected: 0,
    staleWritesAccepted: 0,
    stateReloads: 0,
    faults: faultLog,
    errors,
    wallMs: Date.now() - wall0,
    cpuMs: Math.round((cpu.user + cpu.system) / 1000),
    redisCpuMs: 0,
    regions: regionRuns,
  };
}
