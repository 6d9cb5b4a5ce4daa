/**
 * What a campaign wins at full speed beside what ASAP won (docs/pacing-quality.md, "What the
 * portfolios' remaining failures are made of"): over the series intervals in which a fillable
 * campaign-day that ended short bid at full speed under the paced strategy (throttle 1 and bid
 * multiplier 1 at both ends) while its ASAP run had not reached its cap, the paced run's spend
 * against the ASAP run's. A ratio below 1 is what the rest of the portfolio, still bidding when
 * paced, took from a campaign that could not bid more: no controller of that campaign can win it
 * back. Needs both runs' series (`npm run sim -- … --full-speed`).
 */

import { planDayKey } from './engine/day-figures.js';
import type { PlanDayResult, StrategyRun } from './engine/types.js';

/** Throttle and multiplier at least this count as full speed (both are exactly 1 there). */
const FULL = 0.999;
/** ASAP's run counts as still spending while below this share of the budget. */
const ASAP_OPEN = 0.97;

/** One campaign-day's full-speed intervals. */
export interface FullSpeedRow {
  readonly campaignId: string;
  readonly day: string;
  readonly budgetMicros: number;
  /** Series intervals counted. */
  readonly intervals: number;
  /** Spend over them under the paced strategy and under ASAP, micros. */
  readonly pacedMicros: number;
  readonly asapMicros: number;
}

/**
 * Every counted campaign-day, and the ratio of the paced run's spend to ASAP's summed as shares of
 * each budget (every campaign weighs alike, whatever its budget; null: no interval counted).
 */
export interface FullSpeedReport {
  readonly rows: readonly FullSpeedRow[];
  readonly ratio: number | null;
}

type Sample = readonly [number, number, number, number, number];

const atFullSpeed = (s: Sample | undefined): s is Sample => s !== undefined && s[3] >= FULL && s[4] >= FULL;

/**
 * The full-speed comparison of `paced` against `asap` over the fillable campaign-days (`fillable`:
 * report.ts `fillableOf`) that `paced` left under `under` of their budget.
 */
export function fullSpeedAgainstAsap(
  paced: Pick<StrategyRun, 'plans'>,
  asap: Pick<StrategyRun, 'plans'>,
  fillable: ReadonlySet<string>,
  under = 0.98,
): FullSpeedReport {
  const asapOf = new Map<string, PlanDayResult>();
  for (const p of asap.plans) asapOf.set(planDayKey(p), p);
  const rows: FullSpeedRow[] = [];
  let paced$ = 0;
  let asap$ = 0;
  for (const p of paced.plans) {
    const key = planDayKey(p);
    const a = asapOf.get(key);
    if (p.level !== 'campaign' || !p.scored || !fillable.has(key) || !a?.series || !p.series) continue;
    if (!(p.spentMicros < under * p.budgetMicros)) continue;
    let intervals = 0;
    let mine = 0;
    let theirs = 0;
    const n = Math.min(p.series.length, a.series.length);
    for (let i = 1; i < n; i++) {
      const s0 = p.series[i - 1];
      const s1 = p.series[i];
      const a0 = a.series[i - 1] as Sample;
      const a1 = a.series[i] as Sample;
      if (!atFullSpeed(s0) || !atFullSpeed(s1) || !(a1[1] < ASAP_OPEN * a.budgetMicros)) continue;
      intervals++;
      mine += s1[1] - s0[1];
      theirs += a1[1] - a0[1];
    }
    if (intervals === 0) continue;
    rows.push({
      campaignId: p.campaignId as string,
      day: p.day,
      budgetMicros: p.budgetMicros,
      intervals,
      pacedMicros: mine,
      asapMicros: theirs,
    });
    paced$ += mine / p.budgetMicros;
    asap$ += theirs / p.budgetMicros;
  }
  return { rows, ratio: asap$ > 0 ? Math.round((paced$ / asap$) * 1000) / 1000 : null };
}
