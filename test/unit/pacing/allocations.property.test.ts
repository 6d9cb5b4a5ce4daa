/**
 * The allocation rule's guarantee under random lagged views (test/unit/pacing/allocation-world.ts):
 * with replication lags up to 8 s, regions killed and revived, Redis resets, budget cuts and
 * rehomes, what all regions can ever spend never exceeds the budget (after a cut: what was
 * committed or allocated at the cut). Fails when the rule forgets a reclaim's release counter,
 * lets a stale writer raise a cap, grants during a rehome's settle time, or reclaims early.
 */
import { describe, expect, it } from 'vitest';
import { prng } from '../../../shared/random/prng.js';
import { runWorld } from './allocation-world.js';

describe('allocations under random lagged views', () => {
  it('Σ what regions can spend ≤ B in 400 random worlds of 240 ticks', () => {
    const totals = { grants: 0, reclaims: 0, releases: 0, rehomes: 0, cuts: 0, worlds: 0 };
    const from = Number(process.env.WORLDS_FROM ?? 1);
    for (let seed = from; seed < from + Number(process.env.WORLDS ?? 400); seed++) {
      const outcome = runWorld(prng(seed), 240);
      expect(outcome.violations, `seed ${seed}`).toEqual([]);
      expect(outcome.spent).toBeLessThanOrEqual(outcome.bound);
      totals.grants += outcome.grants;
      totals.reclaims += outcome.reclaims;
      totals.releases += outcome.releases;
      totals.rehomes += outcome.rehomes;
      totals.cuts += outcome.cuts;
      totals.worlds++;
    }
    console.log(JSON.stringify(totals));
    // The worlds exercised every path many times.
    expect(totals.grants).toBeGreaterThan(10_000);
    expect(totals.reclaims).toBeGreaterThan(50);
    expect(totals.releases).toBeGreaterThan(1_000);
    expect(totals.rehomes).toBeGreaterThan(100);
    expect(totals.cuts).toBeGreaterThan(100);
  }, 600_000);
});
