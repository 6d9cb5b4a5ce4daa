/**
 * The scoring phase of the single-region engine, per plan-day: spend booked by the tracker,
 * what the exchange charged, and every minute the deviation from the curve the pacer published
 * (read by the scorer's own reader; over the day, and after a budget change of the day from the
 * tick that publishes the new budget's curve), the lead over the traffic-following ideal curve
 * (sim/ideal.ts), the overspend and the minutes alive.
 */
import { isOpenAt, planDayWindows } from '../../shared/budget/daypart.js';
import { type CampaignBudgets, planOnDay, type ResolvedPlan } from '../../shared/budget/model.js';
import type { TargetCurve } from '../../shared/budget/pacing.js';
import type { DayWindow } from '../../shared/budget/time-zone.js';
import { planShapeOf } from '../../shared/pacing/controller/step-parts.js';
import type { PacingReader } from '../../shared/pacing/reader.js';
import type { RedisClient } from '../../shared/redis/connect.js';
import { planDayKeys } from '../../shared/spend/keys.js';
import { readPlanDay } from '../../shared/spend/live-counters.js';
import type { Reconciler } from '../../shared/spend/reconcile.js';
import { curveTraffic, IDEAL_PACE, idealTraffic, openTraffic } from '../ideal.js';
import type { BidLoss } from '../market/index.js';
import type { Scenario } from '../scenario.js';
import {
  type DayFigures,
  lossFigures,
  newDayFigures,
  recordLoss,
  resultHead,
  sampleCurve,
  sampleIdeal,
} from './day-figures.js';
import type { PlanDayResult } from './types.js';
import { type CampaignRun, tracksOf } from './world.js';

/** A plan's days. */
export interface PlanTrack {
  plan: ResolvedPlan;
  readonly key: string;
  readonly days: Map<string, DayFigures>;
  /** The last day looked up and its track (bids and notices of a day come in runs). */
  lastDay: string | undefined;
  lastTrack: DayFigures | undefined;
}

const planKeyOf = (p: Pick<ResolvedPlan, 'scope' | 'planId'>) => `${p.scope}/${p.planId}`;

/** The plan tracks of a run (module comment). */
export class Scorer {
  readonly tracks = new Map<string, PlanTrack>();
  private readonly trafficOf: ReturnType<typeof idealTraffic>;

  constructor(
    private readonly scenario: Scenario,
    private readonly windowOf: (timeZone: string, nowMs: number) => DayWindow,
    /** Keep series every `seriesEveryMs` (undefined: none). */
    private readonly seriesEveryMs: number | undefined,
  ) {
    this.trafficOf = idealTraffic(scenario);
  }

  /**
   * Tracks a campaign's (new) budgets at `now` and links the campaign to the plans its bids fall
   * under; a plan whose budget differs from the one tracked changed it at `now`.
   */
  link(c: CampaignRun<PlanTrack>, b: CampaignBudgets, now: number): void {
    const { tracks } = this;
    for (const p of [...b.common, ...b.arms.values()]) {
      const key = planKeyOf(p);
      const t = tracks.get(key);
      if (!t) {
        tracks.set(key, { plan: p, key, days: new Map(), lastDay: undefined, lastTrack: undefined });
        continue;
      }
      const today = this.windowOf(p.timeZone, now).day;
      if (planOnDay(t.plan, today).dailyBudgetMicros !== planOnDay(p, today).dailyBudgetMicros) {
        const d = this.day(t, today);
        d.changedAt = now;
        d.maxDevAfter = 0;
      }
      t.plan = p;
    }
    // The plans a bid falls under (plansForBid's order: account, campaign, then the arm).
    const common = b.common.map((p) => tracks.get(planKeyOf(p)) as PlanTrack);
    c.tracksByArm = new Map([['', common]]);
    for (const arm of c.spec.arms) {
      const p = b.arms.get(arm.id);
      c.tracksByArm.set(arm.id, p ? [...common, tracks.get(planKeyOf(p)) as PlanTrack] : common);
    }
  }

  /** What the tracker booked for campaign `campaignId`'s own plan on `day`, micros. */
  campaignSpent(campaignId: string, day: string): number {
    return this.tracks.get(`c:${campaignId}/campaign`)?.days.get(day)?.spent ?? 0;
  }

  /** Every tracked plan, as last resolved. */
  plans(): ResolvedPlan[] {
    return [...this.tracks.values()].map((t) => t.plan);
  }

  private day(t: PlanTrack, day: string): DayFigures {
    if (t.lastDay === day) return t.lastTrack as DayFigures;
    let d = t.days.get(day);
    if (!d) {
      d = newDayFigures(planOnDay(t.plan, day).dailyBudgetMicros, this.seriesEveryMs !== undefined);
      t.days.set(day, d);
    }
    t.lastDay = day;
    t.lastTrack = d;
    return d;
  }

  /** A won impression of a bid of `c` at `at`. */
  win(
    c: CampaignRun<PlanTrack>,
    armId: string | undefined,
    at: number,
    priceMicros: number,
    clicked: boolean,
  ): void {
    const window = this.windowOf(c.timeZone, at);
    const day = window.day;
    for (const t of tracksOf(c, armId)) {
      const d = this.day(t, day);
      d.impressions++;
      d.charged += priceMicros;
      const w = planDayWindows(t.plan, window);
      if (w) d.outsideWindow = (d.outsideWindow ?? 0) + (isOpenAt(w, at) ? 0 : priceMicros);
      if (clicked) d.clicks++;
    }
  }

  /** A bid of `c` made at `at` that lost (to another of our bids, or to the market). */
  lost(c: CampaignRun<PlanTrack>, armId: string | undefined, at: number, outcome: BidLoss): void {
    const day = this.windowOf(c.timeZone, at).day;
    for (const t of tracksOf(c, armId)) recordLoss(this.day(t, day), outcome);
  }

  /** Spend the tracker booked for a bid of `c` made on advertiser day `day`. */
  book(c: CampaignRun<PlanTrack>, armId: string | undefined, day: string, micros: number): void {
    if (!c.budgets) return;
    for (const t of tracksOf(c, armId)) this.day(t, day).spent += micros;
  }

  /** The minute's sample of every plan against `monitor`'s published curve (read fresh this minute). */
  sample(
    now: number,
    monitor: PacingReader,
    monitorCurve: TargetCurve,
    createdAtOf: (id: string) => number | undefined,
  ): void {
    for (const t of this.tracks.values()) {
      const day = this.windowOf(t.plan.timeZone, now);
      const d = this.day(t, day.day);
      // A flight plan's day is a daily plan of the day's budget (shared/budget/flight.ts).
      const plan = planOnDay(t.plan, day.day);
      const budget = plan.dailyBudgetMicros;
      const created = plan.campaignId === undefined ? undefined : createdAtOf(plan.campaignId);
      const w = planDayWindows(plan, day);
      d.outsideWindow ??= w ? 0 : undefined;
      // A curve plan's ideal is its own curve (its windows already in its weights).
      const own = plan.curve ? planShapeOf(plan, day, w).quarters : undefined;
      const traffic = own ? curveTraffic(own, day) : this.trafficOf(day);
      sampleIdeal(
        d,
        budget,
        w && !own ? openTraffic(traffic, w) : traffic,
        day,
        created,
        now,
        IDEAL_PACE[plan.pacingMode],
      );
      const e = monitorCurve.expectedMicros(plan, day, now);
      sampleCurve(d, e, budget, now);
      if (d.series && now % (this.seriesEveryMs as number) === 0) {
        const p = monitor.freshPlan(t.plan, day);
        d.series.push([now, d.spent, e, p?.throttle ?? -1, p?.bidMultiplier ?? -1]);
      }
    }
  }

  /**
   * Every plan-day's result, with the live counters at `atMs` (a plan-day lost with a Redis
   * restart after its last notice is rebuilt first, as a guard or the tracker would: the real
   * reconcile path, from the ledger).
   */
  async results(redis: RedisClient, reconciler: Reconciler, atMs: number): Promise<PlanDayResult[]> {
    const scored = new Set(this.scenario.scoredDays);
    const plans: PlanDayResult[] = [];
    for (const t of this.tracks.values()) {
      for (const [day, d] of t.days) {
        if (d.samples === 0 && d.spent === 0) continue;
        let snap = await readPlanDay(redis, planDayKeys(t.plan, day).state, atMs);
        if (snap.epoch === undefined && d.spent > 0) {
          await reconciler.reconcile(t.plan, day);
          snap = await readPlanDay(redis, planDayKeys(t.plan, day).state, atMs);
        }
        plans.push({
          ...resultHead(t.key, t.plan, day, scored.has(day), d.budget),
          spentMicros: d.spent,
          countersMicros: snap.confirmedMicros,
          chargedMicros: d.charged,
          ...(d.outsideWindow === undefined ? {} : { outsideWindowMicros: d.outsideWindow }),
          impressions: d.impressions,
          ...lossFigures(d),
          clicks: d.clicks,
          maxDeviation: d.maxDev,
          rmsDeviation: d.samples > 0 ? Math.sqrt(d.sumSq / d.samples) : 0,
          maxOverCapMicros: d.maxOver,
          ...(d.changedAt === undefined ? {} : { maxDeviationAfterChange: d.maxDevAfter }),
          maxAhead: d.maxAhead,
          minutesAlive: d.alive,
          ...(d.series ? { series: d.series } : {}),
        });
      }
    }
    plans.sort((a, b) => a.plan.localeCompare(b.plan) || a.day.localeCompare(b.day));
    return plans;
  }
}
