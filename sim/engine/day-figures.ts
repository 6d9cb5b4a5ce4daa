/**
 * The running figures of one plan-day that every scorer keeps: the single-region engine's
 * (scoring.ts) and, with per-region figures beside them, the multi-region one's
 * (sim/regions/scoring.ts). One shape and one starting point, so both report the same figures.
 */
import type { ResolvedPlan } from '../../shared/budget/model.js';
import type { DayWindow } from '../../shared/budget/time-zone.js';
import { TICK_MS } from '../../shared/pacing/types.js';
import { IdealCurve, type TrafficDay } from '../ideal.js';
import type { BidLoss } from '../market/index.js';
import type { PlanDayResult } from './types.js';

/** One plan-day's running figures (combined over regions in a multi-region run). */
export interface DayFigures {
  budget: number;
  spent: number;
  charged: number;
  /** What the exchange charged for impressions bid outside a dayparted plan's windows (undefined: not dayparted). */
  outsideWindow: number | undefined;
  impressions: number;
  /** Bids that lost to another of our bids (the portfolio won the auction) and to the market. */
  lostToOwn: number;
  lostToMarket: number;
  clicks: number;
  maxDev: number;
  sumSq: number;
  samples: number;
  maxOver: number;
  /** The last budget change of the day (undefined: none) and the max deviation a tick after it. */
  changedAt: number | undefined;
  maxDevAfter: number;
  /** Max of (spend − the traffic-following ideal curve) / budget (sim/ideal.ts). */
  maxAhead: number;
  ideal: IdealCurve | undefined;
  alive: number;
  /** `[t, spent, curve, throttle, multiplier]` samples (−1 where there is no one published value). */
  series: [number, number, number, number, number][] | undefined;
}

/** A plan-day's figures before its first minute: nothing spent, no sample, no ideal curve yet. */
export function newDayFigures(budget: number, keepSeries: boolean): DayFigures {
  return {
    budget,
    spent: 0,
    charged: 0,
    outsideWindow: undefined,
    impressions: 0,
    lostToOwn: 0,
    lostToMarket: 0,
    clicks: 0,
    maxDev: 0,
    sumSq: 0,
    samples: 0,
    maxOver: Number.NEGATIVE_INFINITY,
    changedAt: undefined,
    maxDevAfter: 0,
    maxAhead: 0,
    ideal: undefined,
    alive: 0,
    series: keepSeries ? [] : undefined,
  };
}

/**
 * A minute's sample, first half: the plan's budget as it stands, and the lead over the
 * traffic-following ideal curve (which starts at the campaign's creation, or at the day's start),
 * run at `pace` × the traffic's share (the plan's mode: `IDEAL_PACE`).
 */
export function sampleIdeal(
  d: DayFigures,
  budget: number,
  traffic: TrafficDay,
  day: DayWindow,
  createdAt: number | undefined,
  now: number,
  pace = 1,
): void {
  d.budget = budget;
  d.ideal ??= new IdealCurve(traffic, Math.max(day.startMs, createdAt ?? day.startMs), budget, pace);
  if (budget > 0) d.maxAhead = Math.max(d.maxAhead, (d.spent - d.ideal.at(now, budget)) / budget);
}

/**
 * A minute's sample, second half, against `e`, the curve's value now (µ$): the deviation, the
 * overspend, and whether the plan-day is alive (the curve still above its spend).
 */
export function sampleCurve(d: DayFigures, e: number, budget: number, now: number): void {
  // A budget of 0 (a flight day before the day before it is closed) has no share to deviate by.
  const dev = budget > 0 ? (d.spent - e) / budget : 0;
  d.maxDev = Math.max(d.maxDev, Math.abs(dev));
  if (d.changedAt !== undefined && now >= d.changedAt + TICK_MS)
    d.maxDevAfter = Math.max(d.maxDevAfter, Math.abs(dev));
  d.sumSq += dev * dev;
  d.samples++;
  d.maxOver = Math.max(d.maxOver, d.spent - budget);
  if (e - d.spent > 0) d.alive++;
}

/** A plan-day result's key in sets and maps of plan-days (the report's fillable set, `fillableOf`). */
export function planDayKey(p: Pick<PlanDayResult, 'plan' | 'day'>): string {
  return `${p.plan}|${p.day}`;
}

/** The identifying head of a plan-day's result, the same in every scorer. */
export function resultHead(
  key: string,
  plan: Pick<ResolvedPlan, 'level' | 'campaignId'>,
  day: string,
  scored: boolean,
  budgetMicros: number,
): Pick<PlanDayResult, 'plan' | 'level' | 'campaignId' | 'day' | 'scored' | 'budgetMicros'> {
  return { plan: key, level: plan.level, campaignId: plan.campaignId, day, scored, budgetMicros };
}

/** A bid of the plan-day that lost: to another of our bids (`own`) or to the market. */
export function recordLoss(d: DayFigures, outcome: BidLoss): void {
  if (outcome === 'own') d.lostToOwn++;
  else d.lostToMarket++;
}

/** The plan-day's lost bids, as its result carries them ({@link PlanDayResult.lostToOwn}). */
export function lossFigures(d: DayFigures): Pick<PlanDayResult, 'lostToOwn' | 'lostToMarket'> {
  return { lostToOwn: d.lostToOwn, lostToMarket: d.lostToMarket };
}
