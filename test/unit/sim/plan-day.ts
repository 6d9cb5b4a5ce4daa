/** One plan-day result for the report's unit tests (sim/engine/types.ts `PlanDayResult`). */
import type { PlanDayResult } from '../../../sim/engine/types.js';

/**
 * Campaign `id`'s plan on 2026-03-04: a $1 budget, `spent` micros booked, charged and in the
 * counters, 10 impressions, on its curve all day; `over` replaces any figure.
 */
export function campaignDay(id: string, spent: number, over: Partial<PlanDayResult> = {}): PlanDayResult {
  return {
    plan: `c:${id}/campaign`,
    level: 'campaign',
    campaignId: id,
    day: '2026-03-04',
    scored: true,
    budgetMicros: 1_000_000,
    spentMicros: spent,
    countersMicros: spent,
    chargedMicros: spent,
    impressions: 10,
    clicks: 0,
    maxDeviation: 0,
    rmsDeviation: 0,
    maxOverCapMicros: 0,
    maxAhead: 0,
    minutesAlive: 1439,
    ...over,
  };
}
