/**
 * The acceptance of one budget across regions on a shipped multi-region scenario, as tests: the
 * scenario runs once per file (Paceline and ASAP, which defines the fillable campaigns, on the
 * same seed; each region on its own redis-server), then
 * - every scored plan-day's combined spend (Σ over regions) is ≤ its budget + max(0.5 %, one
 *   bid), for Paceline and ASAP alike;
 * - Paceline spends ≥ 98 % of every fillable campaign-day combined (a scenario may state a lower
 *   bound for a fault that stops regions, never silently);
 * - Paceline's combined spend stays within 5 % of the budget of the combined published curve on
 *   every fillable campaign-day;
 * - at every simulated minute, what the regions can still spend of a plan-day — a region whose
 *   allocation lease holds: max(its allocation, what it committed); else what it committed —
 *   adds up to ≤ the budget + max(0.5 %, one bid): the hard bound, checked across the caches;
 * - every win is booked once in its region (live counters = booked spend), no background errors.
 */
import { beforeAll, expect, it } from 'vitest';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import { planDayKeys } from '../../../shared/spend/keys.js';
import { readPlanDay } from '../../../shared/spend/live-counters.js';
import { minFloat } from '../../../sim/engine/bidding.js';
import { loadScenario, simulate } from '../../../sim/main.js';
import type { SimJson } from '../../../sim/report.js';
import type { StrategyRun } from '../../../sim/runner.js';
import type { Scenario } from '../../../sim/scenario.js';

/** Bounds of the multi-region acceptance. */
export interface RegionBounds {
  /** Lowest combined utilisation of a fillable campaign-day. */
  readonly utilisationMin: number;
  /** Largest combined deviation from the combined published curve (fillable campaign-days). */
  readonly deviationMax: number;
}

/** The acceptance: ≥ 98 %, ≤ 5 %. */
export const REGION_ACCEPTANCE: RegionBounds = { utilisationMin: 0.98, deviationMax: 0.05 };

/** A plan-day's worst minute of the hard bound (what the regions could still spend, Σ). */
interface BoundSample {
  readonly plan: string;
  readonly atMs: number;
  readonly spendable: number;
  readonly budget: number;
}

/** Declares the tests of `sim/scenarios/<name>.json`. */
export function regionQuality(
  name: string,
  extra?: (json: SimJson, runs: readonly StrategyRun[], scenario: Scenario) => void,
  bounds: RegionBounds = REGION_ACCEPTANCE,
): void {
  let scenario: Scenario | undefined;
  let result: { json: SimJson; runs: StrategyRun[] } | undefined;
  /** Per strategy, the worst minute of every plan-day. */
  const worst = new Map<string, BoundSample>();
  beforeAll(async () => {
    const s = loadScenario(`sim/scenarios/${name}.json`);
    scenario = s;
    const plans = s.campaigns.map((c) => ({
      key: `${c.id}`,
      plan: { scope: `c:${c.id}`, planId: 'campaign' },
      budget: c.budgetMicros,
      timeZone: s.accounts.find((a) => a.id === c.accountId)?.timeZone ?? s.timeZone,
    }));
    result = await simulate(s, {
      strategies: ['paceline'],
      onMinute: async (strategy, now, regions) => {
        for (const p of plans) {
          const key = planDayKeys(p.plan, dayWindow(now, p.timeZone).day).state;
          let spendable = 0;
          for (const r of regions) {
            const [a, ae] = await r.redis.hmget(key, 'a', 'ae');
            const live = await readPlanDay(r.redis, key, now);
            const committed = live.confirmedMicros + live.inFlightMicros + live.leasedMicros;
            const leasing = r.up && ae !== null && now <= Number(ae);
            spendable += leasing && a !== null ? Math.max(Number(a), committed) : committed;
          }
          const id = `${strategy}|${p.key}`;
          const w = worst.get(id);
          if (!w || spendable - p.budget > w.spendable - w.budget)
            worst.set(id, { plan: p.key, atMs: now, spendable, budget: p.budget });
        }
      },
    });
    console.log(JSON.stringify(result.json));
    console.log(JSON.stringify({ worstMinute: [...worst.values()] }));
  }, 3_600_000);
  const get = () => {
    if (!result || !scenario) throw new Error('The simulation did not run (see the beforeAll error).');
    return { ...result, scenario };
  };
  const slack = (budget: number) => Math.max(0.005 * budget, minFloat(get().scenario));

  it(`${name}: combined spend ≤ budget + max(0.5 %, one bid) on every plan-day (Paceline and ASAP)`, () => {
    for (const run of get().runs) {
      for (const p of run.plans) {
        if (!p.scored) continue;
        expect(p.spentMicros - p.budgetMicros, `${run.strategy} ${p.plan} ${p.day}`).toBeLessThanOrEqual(
          slack(p.budgetMicros),
        );
      }
    }
  });

  it(`${name}: what the regions can still spend adds up to ≤ the bound at every minute`, () => {
    expect(worst.size).toBeGreaterThan(0);
    for (const [id, w] of worst) {
      expect(w.spendable - w.budget, `${id} at ${new Date(w.atMs).toISOString()}`).toBeLessThanOrEqual(
        slack(w.budget),
      );
    }
  });

  it(`${name}: Paceline ≥ ${bounds.utilisationMin * 100} % of every fillable campaign, within ${bounds.deviationMax * 100} % of the combined curve`, () => {
    const p = get().json.strategies.paceline;
    if (!p) throw new Error('paceline did not run');
    expect(p.fillableCampaignDays).toBeGreaterThan(0);
    expect(p.utilisationMinFillable).toBeGreaterThanOrEqual(bounds.utilisationMin);
    expect(p.deviationMax).toBeLessThanOrEqual(bounds.deviationMax);
    expect(Object.keys(p.regions ?? {})).toEqual(get().scenario.regions?.map((r) => r.name));
  });

  it(`${name}: every win booked once in its region, no background errors`, () => {
    for (const run of get().runs) {
      expect(run.errors).toEqual([]);
      for (const p of run.plans)
        expect(p.countersMicros, `${run.strategy} ${p.plan} ${p.day}`).toBe(p.spentMicros);
      for (const r of run.regions ?? [])
        for (const p of r.plans)
          expect(p.countersMicros, `${run.strategy} ${r.region} ${p.plan} ${p.day}`).toBe(p.spentMicros);
    }
  });

  if (extra) it(`${name}: scenario-specific checks`, () => extra(get().json, get().runs, get().scenario));
}
