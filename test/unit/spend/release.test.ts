/**
 * The in-flight release's cap (docs/spend.md, "In flight without loss notices"): cap × budget,
 * plus the budget's headroom over E(t) where one region's curve is the only cap; and the
 * controller counts a plan's in-flight exactly as a guard of its region does.
 */
import { describe, expect, it } from 'vitest';
import { resolvePlan } from '../../../shared/budget/model.js';
import { dayWindowOf } from '../../../shared/budget/time-zone.js';
import { createPacingController } from '../../../shared/pacing/controller/index.js';
import { prng } from '../../../shared/random/prng.js';
import { countedInFlight, releaseCapMicros } from '../../../shared/spend/release.js';

const H = 3_600_000;

describe('releaseCapMicros', () => {
  it('is cap × budget plus the headroom over E, which shrinks to nothing at the day’s end', () => {
    expect(releaseCapMicros(10_000_000, 4_000_000, 0.0025, true)).toBe(25_000 + 6_000_000);
    expect(releaseCapMicros(10_000_000, 10_000_000, 0.0025, true)).toBe(25_000);
    // E above the budget (a budget cut mid-day): no negative headroom.
    expect(releaseCapMicros(10_000_000, 12_000_000, 0.0025, true)).toBe(25_000);
    // Strict allocations: the cap alone.
    expect(releaseCapMicros(10_000_000, 4_000_000, 0.0025, false)).toBe(25_000);
    // A cap of 0 releases nothing, headroom or not; so does a budget of 0 or an unreadable E.
    expect(releaseCapMicros(10_000_000, 4_000_000, 0, true)).toBe(0);
    expect(releaseCapMicros(0, 0, 0.0025, true)).toBe(0);
    expect(releaseCapMicros(10_000_000, Number.NaN, 0.0025, true)).toBe(25_000);
  });

  it('bounds what is committed for real: E + the release never passes budget + cap × budget', () => {
    // Whatever is in flight and however much of it ρ says to release, a guard counting
    // committed = c + L + countedInFlight(…) ≤ E commits at most E + cap(E) for real.
    const random = prng(28);
    let checked = 0;
    for (let i = 0; i < 2_000; i++) {
      const budget = 1 + Math.floor(random() * 1e10);
      const E = Math.floor(random() * budget * 1.1);
      const inFlight = Math.floor(random() * budget * 2);
      const releasable = Math.floor(random() * inFlight * 1.2);
      const cap = releaseCapMicros(budget, E, 0.0025, true);
      const counted = countedInFlight(inFlight, releasable, cap);
      // The most a guard admits: counted in-flight up to E, the rest released.
      const committedForReal = inFlight - counted + Math.min(E, budget);
      if (counted > Math.min(E, budget)) continue;
      checked++;
      expect(committedForReal).toBeLessThanOrEqual(budget + Math.floor(0.0025 * budget) + 1);
    }
    expect(checked).toBeGreaterThan(500);
  });
});

describe('the controller counts in-flight as the guards do', () => {
  const tz = 'America/New_York';
  const day = dayWindowOf('2026-11-18', tz);
  const plan = resolvePlan(
    { level: 'campaign', accountId: 'a', campaignId: 'c', dailyBudgetMicros: 10_000_000, pacingMode: 'even' },
    tz,
  );
  const committedAfter = (releaseHeadroom: boolean) => {
    const c = createPacingController({ releaseHeadroom });
    const spend = (inFlight: number) => ({
      initialised: true,
      confirmedMicros: 2_000_000,
      inFlightMicros: inFlight,
      leasedMicros: 0,
      releasableMicros: inFlight,
    });
    const first = c.step({ plan, day, nowMs: day.startMs + 12 * H, spend: spend(0) }, undefined, undefined);
    // E at noon is far below the budget: 1,000,000 µ$ in flight no notice will resolve.
    const second = c.step(
      { plan, day, nowMs: day.startMs + 12 * H + 10_000, spend: spend(1_000_000) },
      first.state,
      first.forecast,
    );
    return { committed: second.state.lastCommitted, expected: second.state.lastExpected };
  };

  it('releases the headroom over E in one region, the cap alone under strict allocations', () => {
    const one = committedAfter(true);
    expect(one.expected).toBeLessThan(8_000_000);
    expect(one.committed).toBe(2_000_000);
    // Strict: 1,000,000 in flight less the 0.25 % cap (25,000).
    expect(committedAfter(false).committed).toBe(2_000_000 + 1_000_000 - 25_000);
  });

  it('counts the first step of a plan-day’s in-flight whole but for the cap (no E of its own yet)', () => {
    const c = createPacingController();
    const s = c.step(
      {
        plan,
        day,
        nowMs: day.startMs + 12 * H,
        spend: {
          initialised: true,
          confirmedMicros: 0,
          inFlightMicros: 1_000_000,
          leasedMicros: 0,
          releasableMicros: 1_000_000,
        },
      },
      undefined,
      undefined,
    );
    expect(s.state.lastCommitted).toBe(1_000_000 - 25_000);
  });
});
