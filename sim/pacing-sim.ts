/**
 * Simulated days of pacing against the real budget code: a pacing controller (stepped every
 * 10 s tick for every plan, from the live counters in a real Redis), the real `BudgetGuard`
 * (several instances, leasing from the allowance of the published curve E(t)), the real
 * `SpendTracker` applying win/loss notices to the real live counters, and the market of
 * `sim/market/` (traffic, iPinYou competing prices, auctions, notice delay / duplication). Time is
 * a `ManualClock` moved second by second; the run is deterministic for its seeds.
 *
 * The ledger is an in-memory `LedgerStore` with the DynamoDB ledger's contract (first write of a
 * bid wins, entries per campaign-day, start markers): the ledger's own exactly-once behaviour is
 * tested on dynalite in test/integration/spend/, and this path exercises everything the pacing
 * depends on (spendApply, spendLease, reconcile on first use) on real Redis, at a day's volume
 * dynalite could not take in test time.
 *
 * Used by the controller's soak tests (test/integration/pacing/); the market simulator
 * (sim/runner.ts) shares its ledger, day windows and notice batches (sim/engine-parts.ts).
 */
import {
  type Account,
  type BudgetPlan,
  type CampaignBudgets,
  campaignBudgets,
  type PacingMode,
  plansForBid,
  type ResolvedPlan,
} from '../shared/budget/model.js';
import { defaultCurve } from '../shared/budget/pacing.js';
import type { PacingController } from '../shared/pacing/controller/api.js';
import { combineForBid } from '../shared/pacing/controller/combine.js';
import { publishedCurve } from '../shared/pacing/controller/target-curve.js';
import {
  evaluateCurve,
  type PlanPacingParams,
  type PlanSpendSnapshot,
  TICK_MS,
} from '../shared/pacing/types.js';
import { prng, type Random } from '../shared/random/prng.js';
import type { RedisClient } from '../shared/redis/connect.js';
import { BudgetGuard } from '../shared/spend/guard.js';
import { planDayKeys } from '../shared/spend/keys.js';
import { readPlanDay } from '../shared/spend/live-counters.js';
import { defaultInFlight, type InFlightConfig, Reconciler } from '../shared/spend/reconcile.js';
import { SpendTracker } from '../shared/spend/tracker.js';
import type { ManualClock } from '../shared/time/clock.js';
import { dayWindows, memoryLedger, NoticeQueue } from './engine-parts.js';
import {
  type AuctionKind,
  Market,
  type MarketRequest,
  type NoticeOptions,
  plannedNotices,
  runAuction,
  type TrafficOptions,
  valuationSampler,
} from './market/index.js';

/** An experiment arm of a simulated campaign. */
export interface SimArm {
  readonly id: string;
  readonly budgetMicros: number;
  readonly pacingMode?: PacingMode;
  /** Share of the campaign's requests served by this arm. */
  readonly share: number;
}

/** A simulated campaign: its budget plan, its valuation and the market it bids in. */
export interface SimCampaign {
  readonly id: string;
  readonly budgetMicros: number;
  readonly pacingMode: PacingMode;
  readonly arms?: readonly SimArm[];
  /** Median bid (valuation) per impression, micros; bids are lognormal around it. */
  readonly baseBidMicros: number;
  /** @default 0.3 */
  readonly bidSigma?: number;
  /** The requests this campaign is eligible for. */
  readonly traffic: TrafficOptions;
  readonly auction: AuctionKind;
  /** @default '1458' */
  readonly priceCampaign?: string;
  /** @default 10 */
  readonly microsPerUnit?: number;
  /** Market seed: two campaigns with the same seed and traffic see the same requests. */
  readonly seed: number;
  /** Budget changes of the campaign plan at given instants. */
  readonly budgetChanges?: readonly { readonly atMs: number; readonly budgetMicros: number }[];
}

/** A simulated account (advertiser) and its campaigns. */
export interface SimAccount {
  readonly id: string;
  readonly timeZone: string;
  /** An account plan over all its campaigns. */
  readonly budgetMicros?: number;
  readonly pacingMode?: PacingMode;
  readonly campaigns: readonly SimCampaign[];
}

/** Options of {@link runPacingSim}. */
export interface PacingSimOptions<S, F> {
  readonly redis: RedisClient;
  readonly clock: ManualClock;
  readonly accounts: readonly SimAccount[];
  /** First instant simulated (a day start of the accounts' zone, typically). */
  readonly startMs: number;
  /** Simulated duration, ms (notices still in the air are drained afterwards). */
  readonly durationMs: number;
  readonly controller: PacingController<S, F>;
  /**
   * Store state and forecast as their encoded strings between ticks (decode before every step),
   * as a new leader would read them. @default false
   */
  readonly roundTrip?: boolean;
  /** @default 2 */
  readonly guards?: number;
  /** @default defaultInFlight */
  readonly inFlight?: InFlightConfig;
  /** @default 10_000 (must cover the largest bid) */
  readonly minFloatMicros?: number;
  /** @default 0.0002 */
  readonly floatFraction?: number;
  readonly notices?: NoticeOptions;
  /** Notices due are applied every this many ms (in one batch, like a track-spend invocation). @default 5_000 */
  readonly noticeBatchMs?: number;
  /** Seed of the simulation's own draws (throttle, guard choice, notices). @default 1 */
  readonly seed?: number;
  /** Called once per tick after every plan was stepped, with every plan's parameters and spend read. */
  readonly onTick?: (
    nowMs: number,
    params: ReadonlyMap<string, PlanPacingParams>,
    spend: ReadonlyMap<string, PlanSpendSnapshot>,
  ) => void;
}

/** Per plan and advertiser day: what happened. */
export interface PlanDayReport {
  readonly plan: string;
  readonly day: string;
  /** The plan's budget at the end of the day. */
  readonly budgetMicros: number;
  /** Spend booked by the tracker for bids of that day (notices applied, duplicates excluded). */
  readonly spentMicros: number;
  /** Confirmed spend in the live counters at the end of the run (must equal spentMicros). */
  readonly countersMicros: number;
  readonly impressions: number;
  /** What the exchange charged (equals spent unless win notices are lost). */
  readonly chargedMicros: number;
  /** Max |spent − E(t)| / budget over the day's minutes (E = the curve published then). */
  readonly maxDeviation: number;
  readonly rmsDeviation: number;
  /** Max |spent − E(t)| / budget after the last budget change of the day (undefined: none). */
  readonly maxDeviationAfterChange: number | undefined;
  /** Max over the day's minutes of (spent − budget in force), micros (> 0 = over the cap). */
  readonly maxOverCapMicros: number;
  /** Minutes with a non-zero allowance E(t) − spent. */
  readonly minutesAlive: number;
}

/** Result of a run. */
export interface PacingSimReport {
  readonly plans: PlanDayReport[];
  /** Ticks stepped, auctions run, notices applied. */
  readonly ticks: number;
  readonly auctions: number;
  readonly notices: number;
  readonly guardLeaseCalls: number;
  /** Background failures of the guards (lease calls); a clean run has none. */
  readonly errors: string[];
}

interface Notice {
  readonly event: Parameters<SpendTracker['apply']>[0];
}

interface PlanTrack {
  plan: ResolvedPlan;
  readonly key: string;
  state: unknown;
  stateText: string | undefined;
  forecast: unknown;
  forecastText: string | undefined;
  params: PlanPacingParams | undefined;
  /** Per advertiser day. */
  readonly days: Map<string, DayTrack>;
}

interface DayTrack {
  /** Budget in force at the last sample of the day. */
  budget: number;
  spent: number;
  charged: number;
  impressions: number;
  maxDev: number;
  sumSq: number;
  samples: number;
  changedAt: number | undefined;
  maxDevAfter: number;
  maxOver: number;
  alive: number;
}

interface CampaignRun {
  readonly spec: SimCampaign;
  readonly account: SimAccount;
  budgets: CampaignBudgets;
  readonly market: Market;
  readonly valuation: (random: Random) => number;
  queue: MarketRequest[];
  next: number;
  changesApplied: number;
}

const planKey = (p: Pick<ResolvedPlan, 'scope' | 'planId'>) => `${p.scope}/${p.planId}`;

function budgetsOf(account: SimAccount, c: SimCampaign, campaignBudget: number): CampaignBudgets {
  const a: Account = { accountId: account.id, name: account.id, timeZone: account.timeZone, currency: 'USD' };
  const plans: BudgetPlan[] = [
    {
      level: 'campaign',
      accountId: account.id,
      campaignId: c.id,
      dailyBudgetMicros: campaignBudget,
      pacingMode: c.pacingMode,
    },
  ];
  if (account.budgetMicros !== undefined) {
    plans.push({
      level: 'account',
      accountId: account.id,
      dailyBudgetMicros: account.budgetMicros,
      pacingMode: account.pacingMode ?? 'even',
    });
  }
  for (const arm of c.arms ?? []) {
    plans.push({
      level: 'arm',
      accountId: account.id,
      campaignId: c.id,
      armId: arm.id,
      dailyBudgetMicros: arm.budgetMicros,
      pacingMode: arm.pacingMode ?? c.pacingMode,
    });
  }
  return campaignBudgets(a, { campaignId: c.id, accountId: account.id, name: c.id, status: 'active' }, plans);
}

/** Runs the simulation; see the module comment. */
export async function runPacingSim<S, F>(options: PacingSimOptions<S, F>): Promise<PacingSimReport> {
  const { redis, clock, controller } = options;
  const inFlight = options.inFlight ?? defaultInFlight;
  const random = prng(options.seed ?? 1);
  const ledger = memoryLedger();
  const campaigns: CampaignRun[] = [];
  for (const account of options.accounts) {
    for (const spec of account.campaigns) {
      campaigns.push({
        spec,
        account,
        budgets: budgetsOf(account, spec, spec.budgetMicros),
        market: new Market({
          traffic: spec.traffic,
          auction: spec.auction,
          seed: spec.seed,
          ...(spec.priceCampaign === undefined ? {} : { priceCampaign: spec.priceCampaign }),
          ...(spec.microsPerUnit === undefined ? {} : { microsPerUnit: spec.microsPerUnit }),
        }),
        valuation: valuationSampler(spec.baseBidMicros, spec.bidSigma ?? 0.3),
        queue: [],
        next: 0,
        changesApplied: 0,
      });
    }
  }
  const byCampaign = new Map(campaigns.map((c) => [c.spec.id, c]));
  const campaignsOfAccount = (accountId: string) =>
    campaigns.filter((c) => c.account.id === accountId).map((c) => c.spec.id);
  const reconciler = new Reconciler({
    redis,
    ledger,
    clock,
    inFlight,
    campaignsOfAccount: async (accountId) => campaignsOfAccount(accountId),
  });
  const tracker = new SpendTracker({
    redis,
    ledger,
    reconciler,
    clock,
    inFlight,
    budgets: async (id) => byCampaign.get(id)?.budgets,
  });

  // Every plan the pacer steps: account plans once, campaign and arm plans per campaign.
  const tracks = new Map<string, PlanTrack>();
  const trackOf = (plan: ResolvedPlan): PlanTrack => {
    const key = planKey(plan);
    let t = tracks.get(key);
    if (!t) {
      t = {
        plan,
        key,
        state: undefined,
        stateText: undefined,
        forecast: undefined,
        forecastText: undefined,
        params: undefined,
        days: new Map(),
      };
      tracks.set(key, t);
    }
    t.plan = plan;
    return t;
  };
  const refreshPlans = (c: CampaignRun) => {
    for (const p of c.budgets.common) trackOf(p);
    for (const p of c.budgets.arms.values()) trackOf(p);
  };
  for (const c of campaigns) refreshPlans(c);

  const errors: string[] = [];
  const published = new Map<string, PlanPacingParams>();
  const curve = publishedCurve((plan) => published.get(planKey(plan)), defaultCurve);
  const guards = Array.from(
    { length: options.guards ?? 2 },
    () =>
      new BudgetGuard({
        redis,
        clock,
        inFlight,
        curve,
        floatFraction: options.floatFraction ?? 0.0002,
        minFloatMicros: options.minFloatMicros ?? 10_000,
        initPlanDay: (plan, day) => reconciler.reconcile(plan, day),
        onError: (e) => errors.push(String(e)),
      }),
  );
  for (const g of guards) for (const c of campaigns) g.setBudgets(c.budgets);

  const dayTrack = (t: PlanTrack, day: string): DayTrack => {
    let d = t.days.get(day);
    if (!d) {
      d = {
        budget: t.plan.dailyBudgetMicros,
        spent: 0,
        charged: 0,
        impressions: 0,
        maxDev: 0,
        sumSq: 0,
        samples: 0,
        changedAt: undefined,
        maxDevAfter: 0,
        maxOver: Number.NEGATIVE_INFINITY,
        alive: 0,
      };
      t.days.set(day, d);
    }
    return d;
  };

  // Notices are delivered in batches every `noticeBatchMs` (a track-spend invocation takes a batch
  // from the stream too); fewer, larger Redis round trips keep a simulated day fast.
  const notices = new NoticeQueue<Notice>(options.noticeBatchMs ?? 5_000);

  let ticks = 0;
  let auctions = 0;
  let applied = 0;
  let bidNo = 0;
  const windowOf = dayWindows();

  const tick = async (now: number) => {
    ticks++;
    const list = [...tracks.values()];
    const spendRead = new Map<string, PlanSpendSnapshot>();
    const snaps = await Promise.all(
      list.map((t) => readPlanDay(redis, planDayKeys(t.plan, windowOf(t.plan.timeZone, now).day).state, now)),
    );
    list.forEach((t, i) => {
      const snap = snaps[i] as Awaited<ReturnType<typeof readPlanDay>>;
      const day = windowOf(t.plan.timeZone, now);
      let prev = t.state as S | undefined;
      let fc = t.forecast as F | undefined;
      if (options.roundTrip) {
        prev = t.stateText === undefined ? undefined : controller.decodeState(t.stateText);
        fc = t.forecastText === undefined ? undefined : controller.decodeForecast(t.forecastText);
      }
      const spend: PlanSpendSnapshot = {
        initialised: snap.epoch !== undefined,
        confirmedMicros: snap.confirmedMicros,
        inFlightMicros: snap.inFlightMicros,
        leasedMicros: snap.leasedMicros,
      };
      spendRead.set(t.key, spend);
      const r = controller.step({ plan: t.plan, day, nowMs: now, spend }, prev, fc);
      // As the publisher does: the state every tick, the forecast only when it changed.
      if (r.forecast !== undefined && r.forecast !== t.forecast)
        t.forecastText = controller.encodeForecast(r.forecast);
      t.state = r.state;
      t.forecast = r.forecast;
      t.stateText = controller.encodeState(r.state);
      t.params = r.params;
      published.set(t.key, r.params);
    });
    options.onTick?.(now, published, spendRead);
  };

  const sampleMinute = (now: number) => {
    for (const t of tracks.values()) {
      const p = t.params;
      if (!p) continue;
      const day = windowOf(t.plan.timeZone, now);
      if (p.day !== day.day) continue;
      const d = dayTrack(t, day.day);
      const budget = t.plan.dailyBudgetMicros;
      d.budget = budget;
      const e = Math.min(budget, evaluateCurve(p.curve, now));
      const dev = budget > 0 ? (d.spent - e) / budget : 0;
      d.maxDev = Math.max(d.maxDev, Math.abs(dev));
      d.sumSq += dev * dev;
      d.samples++;
      if (d.changedAt !== undefined && now >= d.changedAt + TICK_MS)
        d.maxDevAfter = Math.max(d.maxDevAfter, Math.abs(dev));
      d.maxOver = Math.max(d.maxOver, d.spent - budget);
      if (e - d.spent > 0) d.alive++;
    }
  };

  const applyChanges = (now: number) => {
    for (const c of campaigns) {
      const changes = c.spec.budgetChanges ?? [];
      while (
        c.changesApplied < changes.length &&
        (changes[c.changesApplied] as { atMs: number }).atMs <= now
      ) {
        const ch = changes[c.changesApplied++] as { atMs: number; budgetMicros: number };
        c.budgets = budgetsOf(c.account, c.spec, ch.budgetMicros);
        for (const g of guards) g.setBudgets(c.budgets);
        refreshPlans(c);
        const t = tracks.get(planKey(c.budgets.common.find((p) => p.level === 'campaign') as ResolvedPlan));
        if (t) dayTrack(t, windowOf(c.account.timeZone, now).day).changedAt = now;
      }
    }
  };

  const bookWin = (c: CampaignRun, armId: string | undefined, day: string, micros: number) => {
    for (const p of plansForBid(c.budgets, armId)) {
      const t = tracks.get(planKey(p));
      if (t) dayTrack(t, day).spent += micros;
    }
  };

  const end = options.startMs + options.durationMs;
  const drainUntil = end + (options.notices?.maxDelayMs ?? 60_000) * 3 + 2_000;
  for (let now = options.startMs; now < drainUntil; now += 1000) {
    clock.set(now);
    const bidding = now < end;
    if (bidding) {
      applyChanges(now);
      if (now % TICK_MS === 0) await tick(now);
      if (now % 60_000 === 0) {
        sampleMinute(now);
        for (const c of campaigns) {
          c.queue = c.market.minute(now);
          c.next = 0;
        }
        for (const g of guards) await g.maintain();
      }
    }
    const due = notices.take(now);
    if (due) {
      const outcomes = await Promise.all(due.map((n) => tracker.apply(n.event)));
      applied += outcomes.length;
      outcomes.forEach((o, i) => {
        const ev = (due[i] as Notice).event;
        if (o.addedMicros > 0) {
          const c = byCampaign.get(ev.campaignId) as CampaignRun;
          bookWin(c, ev.armId, windowOf(c.account.timeZone, ev.bidAt).day, o.addedMicros);
        }
      });
    }
    if (!bidding) continue;
    for (const c of campaigns) {
      const day = windowOf(c.account.timeZone, now).day;
      while (c.next < c.queue.length && (c.queue[c.next] as MarketRequest).at < now + 1000) {
        const rq = c.queue[c.next++] as MarketRequest;
        let armId: string | undefined;
        if (c.spec.arms && c.spec.arms.length > 0) {
          let x = rq.audience;
          for (const a of c.spec.arms) {
            armId = a.id;
            x -= a.share;
            if (x < 0) break;
          }
        }
        const plans = plansForBid(c.budgets, armId);
        const pacing = combineForBid(plans.map((p) => published.get(planKey(p))));
        if (random() >= pacing.throttle) continue;
        const bid = Math.max(1, Math.round(c.valuation(random) * pacing.bidMultiplier));
        const guard = guards[Math.floor(random() * guards.length)] as BudgetGuard;
        const campaignId = c.spec.id;
        if (
          guard.decide({ campaignId, ...(armId === undefined ? {} : { armId }), priceMicros: bid }) !== 'bid'
        )
          continue;
        auctions++;
        const result = runAuction(
          c.spec.auction,
          [{ key: 0, bidMicros: bid }],
          rq.competingMicros,
          c.market.floorMicros,
        );
        const won = result.winner !== undefined;
        if (won) {
          for (const p of plans) {
            const t = tracks.get(planKey(p));
            if (!t) continue;
            const d = dayTrack(t, day);
            d.impressions++;
            d.charged += result.priceMicros;
          }
        }
        const bidId = `b${++bidNo}`;
        for (const pn of plannedNotices(won, now, options.notices ?? {}, random)) {
          const base = {
            v: 1 as const,
            bidId,
            campaignId,
            ...(armId === undefined ? {} : { armId }),
            bidAt: now,
            bidPriceMicros: bid,
            at: pn.at,
          };
          notices.add(
            pn.at,
            pn.kind === 'win'
              ? { event: { ...base, type: 'win', clearingPriceMicros: result.priceMicros } }
              : { event: { ...base, type: 'loss' } },
          );
        }
      }
    }
    for (const g of guards) await g.idle();
  }
  for (const g of guards) await g.close();

  const plans: PlanDayReport[] = [];
  for (const t of tracks.values()) {
    for (const [day, d] of t.days) {
      const snap = await readPlanDay(redis, planDayKeys(t.plan, day).state, drainUntil);
      plans.push({
        plan: t.key,
        day,
        budgetMicros: d.budget,
        spentMicros: d.spent,
        countersMicros: snap.confirmedMicros,
        impressions: d.impressions,
        chargedMicros: d.charged,
        maxDeviation: d.maxDev,
        rmsDeviation: d.samples > 0 ? Math.sqrt(d.sumSq / d.samples) : 0,
        maxDeviationAfterChange: d.changedAt === undefined ? undefined : d.maxDevAfter,
        maxOverCapMicros: d.maxOver,
        minutesAlive: d.alive,
      });
    }
  }
  return {
    plans,
    ticks,
    auctions,
    notices: applied,
    guardLeaseCalls: guards.reduce((a, g) => a + g.stats.leaseCalls, 0),
    errors,
  };
}
