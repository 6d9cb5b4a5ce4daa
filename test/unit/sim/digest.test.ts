/**
 * The run digest (sim/digest.ts): one figure of one plan-day changes it; the order the plan-days
 * come in and the diagnostics kept beside them (series, the lost bids' split) do not.
 */
import { describe, expect, it } from 'vitest';
import { runDigest } from '../../../sim/digest.js';
import type { PlanDayResult } from '../../../sim/engine/types.js';
import { campaignDay } from './plan-day.js';

const day = (id: string, spentMicros: number): PlanDayResult =>
  campaignDay(id, spentMicros, { maxDeviation: 0.01, rmsDeviation: 0.005, maxOverCapMicros: -1 });

describe('run digest', () => {
  it('changes with one figure, not with the plan-days’ order, their series or lost-bid split', () => {
    const a = [day('a', 990_000), day('b', 500_000)];
    const d = runDigest({ plans: a, errors: [] });
    expect(d).toMatch(/^[0-9a-f]{64}$/);
    expect(runDigest({ plans: [...a].reverse(), errors: [] })).toBe(d);
    expect(
      runDigest({
        plans: [{ ...a[0], series: [[0, 1, 2, 3, 4]] } as PlanDayResult, a[1] as PlanDayResult],
        errors: [],
      }),
    ).toBe(d);
    expect(
      runDigest({
        plans: [{ ...a[0], lostToOwn: 7, lostToMarket: 3 } as PlanDayResult, a[1] as PlanDayResult],
        errors: [],
      }),
    ).toBe(d);
    expect(runDigest({ plans: [day('a', 990_001), a[1] as PlanDayResult], errors: [] })).not.toBe(d);
    expect(runDigest({ plans: a, errors: ['x'] })).not.toBe(d);
  });
});
