/**
 * The per-region rows of a multi-region run's report (the combined rows are the usual summary of
 * the run's combined plan-days, `sim/report.ts`): what each region spent of the scored campaign
 * budgets, how far its spend was from the curve its own pacer published, what its allocation cost
 * it (lease calls cut short, no-budget answers that caused), the age of the allocation authority
 * it followed, and — for the home — what it granted and reclaimed.
 */

import { planDayKey } from '../engine/day-figures.js';
import type { StrategyRun } from '../runner.js';

/** One region's row. */
export interface RegionSummary {
  readonly requests: number;
  readonly bids: number;
  readonly impressions: number;
  /** Σ of the region's spend over scored campaign plan-days, micros. */
  readonly spentMicros: number;
  /** The region's part of the combined spend of those plan-days. */
  readonly spendShare: number;
  /** Largest deviation from its own published curve over fillable campaign-days (÷ budget). */
  readonly deviationMaxFillable: number | null;
  readonly allocationHolds: number;
  readonly allocationRefusals: number;
  readonly authorityAgeMaxSeconds: number;
  readonly lostMinutes: number;
  readonly grantedMicros: number;
  readonly reclaimedMicros: number;
  readonly reclaims: number;
}

const r4 = (x: number) => Math.round(x * 10_000) / 10_000;

/** The region rows of a run (empty for a single-region run); `ceilingOnly`: as `summarise`'s. */
export function regionRows(
  run: StrategyRun,
  fillable: ReadonlySet<string>,
  ceilingOnly: ReadonlySet<string> = new Set(),
): Record<string, RegionSummary> {
  const out: Record<string, RegionSummary> = {};
  const combined = run.plans
    .filter((p) => p.level === 'campaign' && p.scored)
    .reduce((a, p) => a + p.spentMicros, 0);
  for (const r of run.regions ?? []) {
    const plans = r.plans.filter((p) => p.level === 'campaign' && p.scored);
    const spent = plans.reduce((a, p) => a + p.spentMicros, 0);
    // Deviation of the steered fillable campaigns (ceilingOnly: as summarise, sim/report.ts).
    const fill = plans.filter((p) => fillable.has(planDayKey(p)) && !ceilingOnly.has(p.campaignId as string));
    out[r.region] = {
      requests: r.requests,
      bids: r.bids,
      impressions: plans.reduce((a, p) => a + p.impressions, 0),
      spentMicros: spent,
      spendShare: combined > 0 ? r4(spent / combined) : 0,
      deviationMaxFillable: fill.length > 0 ? r4(Math.max(...fill.map((p) => p.maxDeviation))) : null,
      allocationHolds: r.allocationHolds,
      allocationRefusals: r.allocationRefusals,
      authorityAgeMaxSeconds: Math.round(r.authorityAgeMaxMs / 1000),
      lostMinutes: r.lostMinutes,
      grantedMicros: r.grantedMicros,
      reclaimedMicros: r.reclaimedMicros,
      reclaims: r.reclaims,
    };
  }
  return out;
}
