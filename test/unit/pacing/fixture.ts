/**
 * The controller tests' common ground: one hour, one UTC day, a campaign plan of a given budget
 * and the spend snapshot a tick reads. Kept in one place so every test steps the same day.
 */
import { Metrics } from '@aws-lambda-powertools/metrics';
import { vi } from 'vitest';
import { type ResolvedPlan, resolvePlan } from '../../../shared/budget/model.js';
import { dayWindowOf } from '../../../shared/budget/time-zone.js';
import { recordTick } from '../../../shared/pacing/metrics.js';
import type { TickOutcome } from '../../../shared/pacing/pacer.js';
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

/**
 * The EMF records `recordTick` writes for a publishing tick of shard 3 with `extra` fields
 * (Powertools writes EMF through its own Console on stdout).
 */
export function emittedRecords(
  extra: Partial<Record<keyof TickOutcome, unknown>>,
): Record<string, unknown>[] {
  const lines: string[] = [];
  const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: unknown) => {
    lines.push(...String(chunk).split('\n').filter(Boolean));
    return true;
  });
  try {
    const outcome = {
      shard: 3,
      instanceId: 's3-i0',
      isLeader: true,
      durationMs: 120,
      campaignsPaced: 2,
      lease: { event: 'renewed' },
      fencedWritesRejected: 0,
      invalidParams: 0,
      budgets: { ok: true, changed: 0 },
      controlFresh: true,
      ...extra,
    } as unknown as TickOutcome;
    recordTick(new Metrics({ namespace: 'Paceline', serviceName: 'pacer' }), outcome, 0, 10_000);
  } finally {
    spy.mockRestore();
  }
  return lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
}
