/**
 * The pacing-quality report: per campaign-day and aggregated per strategy (DESIGN.md "Pacing
 * quality"; docs/pacing-quality.md "The report").
 *
 * - utilisation = spent / budget (the budget in force at the day's end);
 * - overspend = max(0, spent − budget) / budget;
 * - deviation: max and RMS over the day's minutes of |spent − E(t)| / budget, E = the curve the
 *   pacer published (what the guard enforced);
 * - minutes alive = minutes with allowance E(t) − spent > 0;
 * - impressions, cost per impression, cost per click.
 *
 * "Fillable" campaign-days are those the ASAP strategy brings to their cap in the same run
 * (utilisation ≥ {@link FILLED}): only there can a pacer be asked to spend the budget, and only
 * there is the deviation from the curve a pacing error rather than a market too small.
 */
import type { Flight } from '../shared/budget/flight.js';
import { pacingModeOf } from '../shared/pacing/modes.js';
import { planDayKey } from './engine/day-figures.js';
import { type FlightRow, flightRows } from './flights.js';
import { type RegionSummary, regionRows } from './regions/report.js';
import type { PlanDayResult, StrategyRun } from './runner.js';
import type { Scenario } from './scenario.js';
import type { StrategyName } from './strategies.js';

/** Utilisation from which ASAP counts as having reached the cap (guards' unspent floats aside). */
export const FILLED = 0.99;

/** One campaign-day row of the report. */
export interface CampaignRow {
  readonly campaignId: string;
  readonly day: string;
  readonly fillable: boolean;
  readonly budget: number;
  readonly utilisation: number;
  readonly overspend: number;
  readonly maxDeviation: number;
  readonly rmsDeviation: number;
  /** Max over the day of (spent − ideal traffic-following curve) / budget (sim/ideal.ts). */
  readonly maxAhead: number;
  readonly minutesAlive: number;
  readonly impressions: number;
  /** Share of the day's bids that lost to another of our own bids (null: no bid, or not counted). */
  readonly lostToOwnShare: number | null;
  readonly costPerImpression: number;
  readonly costPerClick: number | null;
}

/** A strategy's aggregate. */
export interface StrategySummary {
  /** Lowest utilisation of a fillable campaign-day (null: none fillable). */
  readonly utilisationMinFillable: number | null;
  readonly campaignsUnder95Fillable: number;
  readonly fillableCampaignDays: number;
  readonly campaignDays: number;
  readonly utilisationMean: number;
  /** Largest overspend of any scored plan-day (account, campaign and arm plans). */
  readonly overspendMax: number;
  /** Campaign-days over budget by more than 0.5 %. */
  readonly campaignsOverBudget: number;
  /** Largest max-deviation over fillable campaign-days. */
  readonly deviationMax: number | null;
  /** Largest max-deviation over every campaign-day (unspendable ones fall behind by design). */
  readonly deviationMaxAll: number;
  readonly deviationRmsMean: number;
  /** Median over fillable campaign-days of their max-ahead (null: none fillable). */
  readonly aheadMedianFillable: number | null;
  /** Largest max-ahead of a fillable campaign-day. */
  readonly aheadMaxFillable: number | null;
  readonly minutesAliveMean: number;
  readonly impressions: number;
  /** Micros per impression over every campaign-day. */
  readonly costPerImpression: number;
  /**
   * Micros per impression over the fillable campaign-days only (the same set for every strategy:
   * ASAP's run defines it). What pacing saves: an unfillable campaign bids at full value under
   * every strategy, so the all-campaign figure mixes its price into both sides.
   */
  readonly costPerImpressionFillable: number | null;
  readonly costPerClick: number | null;
  /**
   * Over the fillable campaign-days: the share of their bids that lost to another of our own bids
   * (every eligible campaign bids in the exchange's auction, so a campaign's competitor is the rest
   * of the portfolio as well as the market), and the share that lost to the market (null: none
   * fillable, or no bid).
   */
  readonly lostToOwnShareFillable: number | null;
  readonly lostToMarketShareFillable: number | null;
  /** Live counters equal booked spend for every plan-day (exactly-once through faults). */
  readonly countersMatch: boolean;
  readonly errors: number;
  /**
   * Scenarios with dayparted campaigns only: what the exchange charged for impressions of bids
   * made while their windows were closed, micros (docs/spend.md, "Dayparting": 0).
   */
  readonly outsideWindowMicros?: number;
}

const r4 = (x: number) => Math.round(x * 10_000) / 10_000;

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

/** Σ bids lost to our own ÷ Σ bids over `plans` (null: no bid, or a plan without the figures). */
function lostToOwnShare(plans: readonly PlanDayResult[]): number | null {
  return lossShare(plans, (p) => p.lostToOwn as number);
}

function lossShare(plans: readonly PlanDayResult[], pick: (p: PlanDayResult) => number): number | null {
  let lost = 0;
  let bids = 0;
  for (const p of plans) {
    if (p.lostToOwn === undefined || p.lostToMarket === undefined) return null;
    lost += pick(p);
    bids += p.impressions + p.lostToOwn + p.lostToMarket;
  }
  return bids > 0 ? r4(lost / bids) : null;
}

function rowOf(p: PlanDayResult, fillable: boolean): CampaignRow {
  return {
    campaignId: p.campaignId as string,
    day: p.day,
    fillable,
    budget: p.budgetMicros,
    utilisation: r4(p.spentMicros / p.budgetMicros),
    overspend: Math.max(0, (p.spentMicros - p.budgetMicros) / p.budgetMicros),
    maxDeviation: r4(p.maxDeviation),
    rmsDeviation: r4(p.rmsDeviation),
    maxAhead: r4(p.maxAhead ?? 0),
    minutesAlive: p.minutesAlive,
    impressions: p.impressions,
    lostToOwnShare: lostToOwnShare([p]),
    costPerImpression: Math.round(p.chargedMicros / Math.max(1, p.impressions)),
    costPerClick: p.clicks > 0 ? Math.round(p.chargedMicros / p.clicks) : null,
  };
}

/** The fillable (plan, day) keys ({@link planDayKey}): campaign-days ASAP filled. */
export function fillableOf(asap: StrategyRun): Set<string> {
  const out = new Set<string>();
  for (const p of asap.plans)
    if (p.level === 'campaign' && p.scored && p.spentMicros >= FILLED * p.budgetMicros)
      out.add(planDayKey(p));
  return out;
}

/** Campaign rows of a run (scored days only). */
export function campaignRows(run: StrategyRun, fillable: ReadonlySet<string>): CampaignRow[] {
  return run.plans
    .filter((p) => p.level === 'campaign' && p.scored)
    .map((p) => rowOf(p, fillable.has(planDayKey(p))));
}

/**
 * Ids of the campaigns whose scenario mode does not steer along its curve
 * (`asap`, `asap-hourly`): their curve is only the guard's ceiling, so how far spend stays below
 * it, or ahead of the traffic, is not a pacing error. Left out of the deviation and max-ahead
 * aggregates under every strategy (their utilisation, overspend and cost still count).
 */
export function ceilingOnlyOf(scenario: Pick<Scenario, 'campaigns'>): Set<string> {
  const out = new Set<string>();
  for (const c of scenario.campaigns) if (!pacingModeOf(c.pacingMode).paced) out.add(c.id);
  return out;
}

/** The aggregate of one strategy; `ceilingOnly`: see {@link ceilingOnlyOf}. */
export function summarise(
  run: StrategyRun,
  fillable: ReadonlySet<string>,
  ceilingOnly: ReadonlySet<string> = new Set(),
): StrategySummary {
  const rows = campaignRows(run, fillable);
  const fill = rows.filter((r) => r.fillable);
  const steered = fill.filter((r) => !ceilingOnly.has(r.campaignId));
  const scoredPlans = run.plans.filter((p) => p.scored);
  const campaignPlans = scoredPlans.filter((p) => p.level === 'campaign');
  const charged = campaignPlans.reduce((a, p) => a + p.chargedMicros, 0);
  const impressions = campaignPlans.reduce((a, p) => a + p.impressions, 0);
  const fillPlans = campaignPlans.filter((p) => fillable.has(planDayKey(p)));
  const fillImpressions = fillPlans.reduce((a, p) => a + p.impressions, 0);
  const fillCharged = fillPlans.reduce((a, p) => a + p.chargedMicros, 0);
  const clicks = campaignPlans.reduce((a, p) => a + p.clicks, 0);
  const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
  return {
    utilisationMinFillable: fill.length ? Math.min(...fill.map((r) => r.utilisation)) : null,
    campaignsUnder95Fillable: fill.filter((r) => r.utilisation < 0.95).length,
    fillableCampaignDays: fill.length,
    campaignDays: rows.length,
    utilisationMean: r4(mean(rows.map((r) => r.utilisation))),
    overspendMax: r4(
      Math.max(0, ...scoredPlans.map((p) => (p.spentMicros - p.budgetMicros) / p.budgetMicros)),
    ),
    campaignsOverBudget: rows.filter((r) => r.overspend > 0.005).length,
    deviationMax: steered.length ? Math.max(...steered.map((r) => r.maxDeviation)) : null,
    deviationMaxAll: Math.max(0, ...rows.map((r) => r.maxDeviation)),
    deviationRmsMean: r4(mean(rows.map((r) => r.rmsDeviation))),
    aheadMedianFillable: steered.length ? r4(median(steered.map((r) => r.maxAhead))) : null,
    aheadMaxFillable: steered.length ? Math.max(...steered.map((r) => r.maxAhead)) : null,
    minutesAliveMean: Math.round(mean(rows.map((r) => r.minutesAlive))),
    impressions,
    costPerImpression: Math.round(charged / Math.max(1, impressions)),
    costPerImpressionFillable: fillImpressions > 0 ? Math.round(fillCharged / fillImpressions) : null,
    costPerClick: clicks > 0 ? Math.round(charged / clicks) : null,
    lostToOwnShareFillable: lostToOwnShare(fillPlans),
    lostToMarketShareFillable: lossShare(fillPlans, (p) => p.lostToMarket as number),
    countersMatch: run.plans.every((p) => p.countersMicros === p.spentMicros),
    errors: run.errors.length,
    ...outsideWindows(run),
  };
}

/** {@link StrategySummary.outsideWindowMicros}, present when some plan is dayparted. */
function outsideWindows(run: StrategyRun): { outsideWindowMicros?: number } {
  const dayparted = run.plans.filter((p) => p.outsideWindowMicros !== undefined);
  if (dayparted.length === 0) return {};
  return { outsideWindowMicros: dayparted.reduce((x, p) => x + (p.outsideWindowMicros as number), 0) };
}

/** The report's final JSON object (one line). */
export interface SimJson {
  readonly scenario: string;
  readonly seed: number;
  readonly auctionsPerSec: number;
  readonly requests: number;
  readonly auctions: number;
  readonly wallSeconds: number;
  readonly cpuSeconds: number;
  readonly redisCpuSeconds: number;
  /**
   * Per strategy: the summary (with several regions, of the combined plan-days: Σ over regions)
   * and, with several regions, one row per region.
   */
  readonly strategies: Partial<
    Record<
      StrategyName,
      StrategySummary & {
        readonly faults?: object;
        readonly regions?: Record<string, RegionSummary>;
        /** The scenario's flights (sim/flights.ts), when it has any. */
        readonly flights?: readonly FlightRow[];
      }
    >
  >;
}

/** Builds the final JSON from the runs (ASAP's run defines the fillable set). */
export function simJson(
  scenario: string,
  seed: number,
  runs: readonly StrategyRun[],
  ceilingOnly: ReadonlySet<string> = new Set(),
  flights: ReadonlyMap<string, { flight: Flight; capMicros: number }> = new Map(),
): SimJson {
  const asap = runs.find((r) => r.strategy === 'asap');
  const fillable = asap ? fillableOf(asap) : new Set<string>();
  const strategies: SimJson['strategies'] = {};
  for (const run of runs) {
    const faults =
      run.faults.length > 0
        ? {
            faults: {
              injected: run.faults,
              stateReloads: run.stateReloads,
              fencedWritesRejected: run.fencedWritesRejected,
              staleWritesAccepted: run.staleWritesAccepted,
            },
          }
        : {};
    strategies[run.strategy] = {
      ...summarise(run, fillable, ceilingOnly),
      ...faults,
      ...(run.regions ? { regions: regionRows(run, fillable, ceilingOnly) } : {}),
      ...(flights.size > 0 ? { flights: flightRows(run, flights, asap) } : {}),
    };
  }
  const wall = runs.reduce((a, r) => a + r.wallMs, 0) / 1000;
  const requests = runs.reduce((a, r) => a + r.requests, 0);
  return {
    scenario,
    seed,
    // Requests auctioned (each a market auction, with or without our bids) per wall second.
    auctionsPerSec: Math.round(requests / Math.max(1e-3, wall)),
    requests,
    auctions: runs.reduce((a, r) => a + r.auctions, 0),
    wallSeconds: Math.round(wall * 10) / 10,
    cpuSeconds: Math.round(runs.reduce((a, r) => a + r.cpuMs, 0) / 100) / 10,
    redisCpuSeconds: Math.round(runs.reduce((a, r) => a + r.redisCpuMs, 0) / 100) / 10,
    strategies,
  };
}
