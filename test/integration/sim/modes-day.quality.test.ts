/**
 * The pacing-quality bounds on sim/scenarios/modes-day.json (see quality.ts) — every mode on one
 * market, each campaign held to its own published curve and (for max-ahead) to its mode's ideal —
 * and the modes' own promise: an `ahead` campaign has spent 15–25 % more than its `even` twin (same
 * budget, targeting and valuation) by local noon of the scored day, and both end on their budget.
 */
import { describe, expect } from 'vitest';
import { dayWindowOf } from '../../../shared/budget/time-zone.js';
import type { StrategyRun } from '../../../sim/runner.js';
import { qualityBounds } from './quality.js';

const NOON = dayWindowOf('2026-03-04', 'America/New_York').startMs + 12 * 3_600_000;

/** Spend of campaign `id` on the scored day at local noon, from its 10-minute series. */
function spentAtNoon(
  runs: readonly StrategyRun[],
  id: string,
): { noon: number; spent: number; budget: number } {
  const run = runs.find((r) => r.strategy === 'paceline');
  const p = run?.plans.find((x) => x.scored && x.plan === `c:${id}/campaign`);
  const at = p?.series?.find((row) => row[0] === NOON);
  if (!p || !at) throw new Error(`no scored series for ${id} at local noon`);
  return { noon: at[1], spent: p.spentMicros, budget: p.budgetMicros };
}

describe('simulator: modes-day', () =>
  qualityBounds(
    'modes-day',
    (_json, runs) => {
      for (const segment of ['news', 'sports', 'games']) {
        const even = spentAtNoon(runs, `${segment}-even`);
        const ahead = spentAtNoon(runs, `${segment}-ahead`);
        const lead = ahead.noon / even.noon;
        expect(lead, `${segment}: ahead / even at noon`).toBeGreaterThanOrEqual(1.15);
        expect(lead, `${segment}: ahead / even at noon`).toBeLessThanOrEqual(1.25);
        for (const r of [even, ahead]) expect(r.spent / r.budget).toBeGreaterThanOrEqual(0.98);
      }
    },
    undefined,
    true,
  ));
