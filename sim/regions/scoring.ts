/**
 * Scoring of a multi-region run, per plan-day: combined (Σ over regions) and per region.
 *
 * - combined spend = what every region's tracker booked for bids of that advertiser day;
 * - the combined curve at a minute = Σ over regions of the curve the region's pacer published
 *   (its share of the budget, what its guards enforce), a region not publishing (lost, or not
 *   yet after its return) counting what it has spent: it aims at nothing more;
 * - combined deviation = |combined spend − combined curve| / budget; a region's deviation =
 *   |its spend − its published curve| / budget, over the minutes it published.
 */
import type { ResolvedPlan } from '../../shared/budget/model.js';
import type { DayWindow } from '../../shared/budget/time-zone.js';
import type { PacingReader } from '../../shared/pacing/reader.js';
import { evaluateCurve } from '../../shared/pacing/types.js';
import {
  type DayFigures,
  lossFigures,
  newDayFigures,
  resultHead,
  sampleCurve,
  sampleIdeal,
} from '../engine/day-figures.js';
import type { PlanDayResult } from '../engine/types.js';
import { IDEAL_PACE, type TrafficDay } from '../ideal.js';

const MINUTE = 60_000;

/** One plan-day's figures, combined and per region. */
export interface DayTrack extends DayFigures {
  readonly regionSpent: Float64Array;
  readonly regionCharged: Float64Array;
  readonly regionImpressions: Float64Array;
  readonly regionClicks: Float64Array;
  readonly regionMaxDev: Float64Array;
  readonly regionSumSq: Float64Array;
  readonly regionSamples: Float64Array;
}

/** A plan's days. */
export interface PlanTrack {
  plan: ResolvedPlan;
  readonly key: string;
  readonly days: Map<string, DayTrack>;
}

/** The plan tracks of a run. */
export class Tracks {
  readonly byKey = new Map<string, PlanTrack>();

  /**
   * @param trafficOf the market's expected traffic per day window (all regions together: the
   *   ideal curve is the plan-day's, whichever region serves a request)
   * @param createdAtOf when a campaign was created (its ideal curve starts there), if at all
   */
  constructor(
    private readonly regions: number,
    private readonly series: boolean,
    private readonly trafficOf: (day: DayWindow) => TrafficDay,
    private readonly createdAtOf: (campaignId: string) => number | undefined,
  ) {}

  /** Registers (or updates) the plans of a campaign's budgets. */
  track(plans: readonly ResolvedPlan[]): PlanTrack[] {
    return plans.map((p) => {
      const key = `${p.scope}/${p.planId}`;
      let t = this.byKey.get(key);
      if (t) t.plan = p;
      else {
        t = { plan: p, key, days: new Map() };
        this.byKey.set(key, t);
      }
      return t;
    });
  }

  /** The day's figures of a plan (created at first use). */
  day(t: PlanTrack, day: string): DayTrack {
    let d = t.days.get(day);
    if (!d) {
      const n = this.regions;
      d = {
        ...newDayFigures(t.plan.dailyBudgetMicros, this.series),
        regionSpent: new Float64Array(n),
        regionCharged: new Float64Array(n),
        regionImpressions: new Float64Array(n),
        regionClicks: new Float64Array(n),
        regionMaxDev: new Float64Array(n),
        regionSumSq: new Float64Array(n),
        regionSamples: new Float64Array(n),
      };
      t.days.set(day, d);
    }
    return d;
  }

  /**
   * The minute's sample of every plan-day: `monitors[i]` is region i's reader of its published
   * parameters, undefined while the region is not up.
   */
  sample(
    now: number,
    windowOf: (timeZone: string, atMs: number) => DayWindow,
    monitors: readonly (PacingReader | undefined)[],
  ): void {
    for (const t of this.byKey.values()) {
      const day = windowOf(t.plan.timeZone, now);
      const d = this.day(t, day.day);
      const budget = t.plan.dailyBudgetMicros;
      const created = t.plan.campaignId === undefined ? undefined : this.createdAtOf(t.plan.campaignId);
      sampleIdeal(d, budget, this.trafficOf(day), day, created, now, IDEAL_PACE[t.plan.pacingMode]);
      let e = 0;
      for (let i = 0; i < monitors.length; i++) {
        const spent = d.regionSpent[i] as number;
        const p = monitors[i]?.freshPlan(t.plan, day);
        if (!p) {
          e += spent;
          continue;
        }
        const ei = Math.min(evaluateCurve(p.curve, now), budget);
        e += ei;
        const dev = (spent - ei) / budget;
        d.regionMaxDev[i] = Math.max(d.regionMaxDev[i] as number, Math.abs(dev));
        (d.regionSumSq as Float64Array)[i] = (d.regionSumSq[i] as number) + dev * dev;
        (d.regionSamples as Float64Array)[i] = (d.regionSamples[i] as number) + 1;
      }
      e = Math.min(e, budget);
      sampleCurve(d, e, budget, now);
      if (d.series && now % (10 * MINUTE) === 0) d.series.push([now, d.spent, e, -1, -1]);
    }
  }

  /** The combined results (`region` undefined) or one region's. */
  results(
    scored: ReadonlySet<string>,
    counters: (t: PlanTrack, day: string) => number,
    region?: number,
  ): PlanDayResult[] {
    const out: PlanDayResult[] = [];
    for (const t of this.byKey.values()) {
      for (const [day, d] of t.days) {
        if (d.samples === 0 && d.spent === 0) continue;
        const r = region;
        const samples = r === undefined ? d.samples : (d.regionSamples[r] as number);
        const sumSq = r === undefined ? d.sumSq : (d.regionSumSq[r] as number);
        const spent = r === undefined ? d.spent : (d.regionSpent[r] as number);
        out.push({
          ...resultHead(t.key, t.plan, day, scored.has(day), d.budget),
          spentMicros: spent,
          countersMicros: counters(t, day),
          chargedMicros: r === undefined ? d.charged : (d.regionCharged[r] as number),
          impressions: r === undefined ? d.impressions : (d.regionImpressions[r] as number),
          ...(r === undefined ? lossFigures(d) : {}),
          clicks: r === undefined ? d.clicks : (d.regionClicks[r] as number),
          maxDeviation: r === undefined ? d.maxDev : (d.regionMaxDev[r] as number),
          rmsDeviation: samples > 0 ? Math.sqrt(sumSq / samples) : 0,
          maxOverCapMicros: r === undefined ? d.maxOver : spent - d.budget,
          minutesAlive: d.alive,
          // Ahead is a property of the plan-day's combined spend: a region's row repeats it.
          maxAhead: d.maxAhead,
          ...(d.series && r === undefined ? { series: d.series } : {}),
        });
      }
    }
    out.sort((a, b) => a.plan.localeCompare(b.plan) || a.day.localeCompare(b.day));
    return out;
  }
}
