/**
 * The controller tests' common ground: one hour, one UTC day, a campaign plan of a given budget
 * and the spend snapshot a tick reads. Kept in one place so every test steps the same day.
 */
import { type ResolvedPlan, resolvePlan } from '../../../shared/budget/model.js';
import { dayWindowOf } from '../../../shared/budget/time-zone.js';
import type { PlanSpendSnapshot } from '../../../shared/pacing/types.js';

/** One hour in milliseconds. */
export const H = 3_600_000;

/** The day the controller tests run on: 2026-11-16 in UTC. */
export const DAY = dayWindowOf('2026-11-16', 'UTC');

/** A campaign plan `a/c` with `budget` micros a day, paced `mode` in `timeZone`. */
export function planOf(budget: number, mode: 'even' | 'asap' = 'even', timeZone = 'UTC'): ResolvedPlan {
  return resolvePlan(
    { level: 'campaign', accountId: 'a', campaignId: 'c', dailyBudgetMicros: budget, pacingMode: mode },
    timeZone,
  );
}

/** The spend a tick reads: confirmed, in flight and leased micros. */
export function spendOf(confirmed: number, inFlight = 0, leased = 0, initialised = true): PlanSpendSnapshot {
  return { initialised, confirmedMicros: confirmed, inFlightMicros: inFlight, leasedMicros: leased };
}
