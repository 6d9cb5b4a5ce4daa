/**
 * The pacing-quality bounds on sim/scenarios/daypart-week.json (see quality.ts) — each dayparted
 * campaign held to its own published curve (flat outside its windows) and to the traffic of its
 * open hours — and dayparting's promises (docs/spend.md, "Dayparting"): no impression of a bid
 * made outside a window, under Paceline and under ASAP (the guard's rule); a fillable
 * campaign-day spends ≥ 98 % of its budget inside its windows; a day without a window spends
 * nothing; and the windows follow the local clock across the spring DST change (the Monday's
 * 08:00-20:00 window opens at 08:00 PDT: nothing spent before it, ≥ 98 % by its close).
 */
import { describe, expect } from 'vitest';
import { dayWindowsOf } from '../../../shared/budget/daypart.js';
import { dayWindowOf } from '../../../shared/budget/time-zone.js';
import { loadScenario } from '../../../sim/main.js';
import { qualityBounds } from './quality.js';

const scenario = loadScenario('sim/scenarios/daypart-week.json');
const ZONE = scenario.timeZone;

describe('simulator: daypart-week', () =>
  qualityBounds(
    'daypart-week',
    (json, runs) => {
      for (const [name, s] of Object.entries(json.strategies)) expect(s?.outsideWindowMicros, name).toBe(0);
      const asap = runs.find((r) => r.strategy === 'asap');
      for (const run of runs) {
        for (const c of scenario.campaigns) {
          if (!c.daypart) continue;
          for (const p of run.plans.filter((x) => x.scored && x.plan === `c:${c.id}/campaign`)) {
            const what = `${run.strategy} ${c.id} ${p.day}`;
            expect(p.outsideWindowMicros, what).toBe(0);
            const open = dayWindowsOf(c.daypart, ZONE, dayWindowOf(p.day, ZONE)).openMs;
            if (open === 0) expect(p.spentMicros, what).toBe(0);
            const a = asap?.plans.find((x) => x.plan === p.plan && x.day === p.day);
            const fillable = a !== undefined && a.spentMicros >= 0.99 * a.budgetMicros;
            if (open > 0 && fillable)
              expect(p.spentMicros / p.budgetMicros, what).toBeGreaterThanOrEqual(0.98);
          }
        }
      }
      // After the DST change: Monday 08:00 and 20:00 PDT (UTC−7).
      const monday = runs
        .find((r) => r.strategy === 'paceline')
        ?.plans.find((x) => x.day === '2026-03-09' && x.plan === 'c:news-weekdays/campaign');
      const at = (iso: string) => monday?.series?.find((row) => row[0] === Date.parse(iso))?.[1];
      expect(at('2026-03-09T08:00:00-07:00')).toBe(0);
      expect(at('2026-03-09T07:00:00-07:00')).toBe(0);
      expect((at('2026-03-09T20:00:00-07:00') ?? 0) / (monday?.budgetMicros ?? 1)).toBeGreaterThanOrEqual(
        0.98,
      );
    },
    undefined,
    true,
  ));
