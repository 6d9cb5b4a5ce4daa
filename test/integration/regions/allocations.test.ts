/**
 * Strict multi-region budgets on real local regions (test/integration/regions/full-speed.ts): a $5
 * campaign spent at full speed (spend-all-now) from two regions, from three, and from two when the
 * home region is lost mid-run, ends ≤ B + max(0.5 % of B, one bid) combined — and the same run with
 * allocations off (the share rule alone) ends above it, so each bound is one the test can fail.
 * Manual clock: independent of machine speed.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { type FullSpeedResult, fullSpeedRun, stopRun } from './full-speed.js';
import { REGION_A, REGION_B, REGION_C } from './support.js';

const BUDGET = 5_000_000;
const PRICE = 10_000;
/** The promise: overspend ≤ max(0.5 % of the budget, one maximum bid). */
const BOUND = BUDGET + Math.max(0.005 * BUDGET, PRICE);

let run: FullSpeedResult | undefined;
afterEach(async () => {
  await stopRun(run);
  run = undefined;
});

function report(name: string, mode: string, r: FullSpeedResult): void {
  console.log(
    JSON.stringify({
      scenario: name,
      allocations: mode,
      budget: BUDGET,
      bound: BOUND,
      combined: r.combined,
      perRegion: r.confirmed,
    }),
  );
}

describe('one $5 budget at full speed across regions', () => {
  it('two regions: combined ≤ $5.025 with allocations; above it with the share rule alone', async () => {
    const bidsPerSecond = { [REGION_A]: 3, [REGION_B]: 5 };
    run = await fullSpeedRun({
      names: [REGION_A, REGION_B],
      mode: 'strict',
      budgetMicros: BUDGET,
      priceMicros: PRICE,
      bidsPerSecond,
      ticks: 12,
    });
    report('two regions', 'strict', run);
    expect(run.combined).toBeLessThanOrEqual(BOUND);
    // The budget is spent, not stranded in allocations.
    expect(run.combined).toBeGreaterThanOrEqual(0.98 * BUDGET);
    await stopRun(run);
    run = await fullSpeedRun({
      names: [REGION_A, REGION_B],
      mode: 'off',
      budgetMicros: BUDGET,
      priceMicros: PRICE,
      bidsPerSecond,
      ticks: 12,
    });
    report('two regions', 'off', run);
    expect(run.combined).toBeGreaterThan(BOUND);
  }, 900_000);

  it('three regions: combined ≤ $5.025 with allocations; above it with the share rule alone', async () => {
    const names = [REGION_A, REGION_B, REGION_C];
    const bidsPerSecond = { [REGION_A]: 3, [REGION_B]: 5, [REGION_C]: 4 };
    run = await fullSpeedRun({
      names,
      mode: 'strict',
      budgetMicros: BUDGET,
      priceMicros: PRICE,
      bidsPerSecond,
      ticks: 12,
    });
    report('three regions', 'strict', run);
    expect(run.combined).toBeLessThanOrEqual(BOUND);
    expect(run.combined).toBeGreaterThanOrEqual(0.98 * BUDGET);
    await stopRun(run);
    run = await fullSpeedRun({
      names,
      mode: 'off',
      budgetMicros: BUDGET,
      priceMicros: PRICE,
      bidsPerSecond,
      ticks: 12,
    });
    report('three regions', 'off', run);
    expect(run.combined).toBeGreaterThan(BOUND);
  }, 900_000);

  it('the home region lost mid-run: the other region stops at its lease, combined ≤ $5.025', async () => {
    const bidsPerSecond = { [REGION_A]: 3, [REGION_B]: 5 };
    // A (every plan's home: the first region) is lost 30 s in: its pacer and ad servers stop and
    // its replica is cut off. B keeps bidding until the lease A last gave it runs out.
    const loseHome = async (
      i: number,
      ctx: Parameters<NonNullable<Parameters<typeof fullSpeedRun>[0]['onTick']>>[1],
    ) => {
      if (i !== 3) return;
      const a = ctx.regions.get(REGION_A);
      if (!a) return;
      a.bidding = false;
      a.pacing = false;
      ctx.two.link.isolate(REGION_A);
    };
    run = await fullSpeedRun({
      names: [REGION_A, REGION_B],
      mode: 'strict',
      budgetMicros: BUDGET,
      priceMicros: PRICE,
      bidsPerSecond,
      ticks: 24,
      onTick: loseHome,
    });
    report('home lost', 'strict', run);
    expect(run.combined).toBeLessThanOrEqual(BOUND);
    await stopRun(run);
    run = await fullSpeedRun({
      names: [REGION_A, REGION_B],
      mode: 'off',
      budgetMicros: BUDGET,
      priceMicros: PRICE,
      bidsPerSecond,
      ticks: 24,
      onTick: loseHome,
    });
    report('home lost', 'off', run);
    expect(run.combined).toBeGreaterThan(BOUND);
  }, 900_000);
});
