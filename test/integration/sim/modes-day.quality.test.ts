/**
 * The pacing-quality bounds on sim/scenarios/modes-day.json (see quality.ts) — every mode on one
 * market, each steered campaign held to its own published curve and (for max-ahead) to its mode's
 * ideal — and the modes' own promises: an `ahead` campaign has spent 15–25 % more than its `even`
 * twin (same budget, targeting and valuation) by local noon of the scored day, and both end on
 * their budget; the `asap-hourly` campaign spends no clock hour more than its cap + 0.5 %, the cap
 * binds (an hour at ≥ 95 % of it), and it spends its budget; the `curve` campaign follows its own
 * curve — at every local hour its spend is within 3 % of the budget of the curve's share by then
 * (not the traffic's) — and spends its budget.
 */
import { describe, expect } from 'vitest';
import { dayWindowOf } from '../../../shared/budget/time-zone.js';
import { hourlyCapMicros } from '../../../shared/pacing/controller/mode-curves.js';
import { loadScenario } from '../../../sim/main.js';
import type { StrategyRun } from '../../../sim/runner.js';
import { qualityBounds } from './quality.js';

const scenario = loadScenario('sim/scenarios/modes-day.json');

const DAY = dayWindowOf('2026-03-04', 'America/New_York');
const NOON = DAY.startMs + 12 * 3_600_000;

/** The scored plan-day of campaign `id` in the Paceline run. */
function scoredDay(runs: readonly StrategyRun[], id: string) {
  const p = runs
    .find((r) => r.strategy === 'paceline')
    ?.plans.find((x) => x.scored && x.plan === `c:${id}/campaign`);
  if (!p?.series) throw new Error(`no scored series for ${id}`);
  return { ...p, series: p.series };
}

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
      const hourly = scoredDay(runs, 'all-asap-hourly');
      const cap = hourlyCapMicros(hourly.budgetMicros, DAY);
      const atHours = hourly.series
        .filter((row) => (row[0] - DAY.startMs) % 3_600_000 === 0)
        .map((row) => row[1]);
      atHours.push(hourly.spentMicros);
      const perHour = atHours.slice(1).map((v, h) => v - (atHours[h] as number));
      for (const [h, spent] of perHour.entries())
        expect(spent, `asap-hourly, hour ${h}`).toBeLessThanOrEqual(1.005 * cap);
      expect(Math.max(...perHour)).toBeGreaterThanOrEqual(0.95 * cap);
      expect(hourly.spentMicros / hourly.budgetMicros).toBeGreaterThanOrEqual(0.98);
      const own = scoredDay(runs, 'news-curve');
      const points = scenario.campaigns.find((c) => c.id === 'news-curve')?.curve ?? [];
      let due = 0;
      for (let h = 1; h <= 24; h++) {
        due += points[h - 1] as number;
        const row = own.series.find((r) => r[0] === DAY.startMs + h * 3_600_000);
        const spent = h === 24 ? own.spentMicros : row?.[1];
        expect(
          Math.abs((spent ?? Number.NaN) / own.budgetMicros - due),
          `curve, by ${h}:00`,
        ).toBeLessThanOrEqual(0.03);
      }
    },
    undefined,
    true,
  ));
