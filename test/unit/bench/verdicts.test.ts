import { describe, expect, it } from 'vitest';
import { benchTargets, unsustainedRates, verdicts } from '../../../bench/verdicts.js';

describe('benchmark verdicts', () => {
  it('gives a verdict for every target, comparing in the target direction', () => {
    const v = verdicts('spend', { decisionsPerSec: 600_000, redisOpsPer1000Bids: 12 });
    expect(v).toHaveLength(benchTargets.spend?.length ?? -1);
    expect(v.map((x) => [x.metric, x.measured, x.pass])).toEqual([
      ['decisionsPerSec', 600_000, true],
      ['redisOpsPer1000Bids', 12, false],
    ]);
  });

  it('fails a target the result does not carry (never a silent pass)', () => {
    const v = verdicts('counting', { ingestEventsPerSec: 90_000 });
    expect(v.find((x) => x.metric === 'capCheckP99Ms')).toMatchObject({ measured: null, pass: false });
    expect(v.find((x) => x.metric === 'capCheckAtTargetRate.p99Ms')?.pass).toBe(false);
  });

  it('reads nested metrics', () => {
    const v = verdicts('counting', { capCheckAtTargetRate: { p99Ms: 1.5 } });
    expect(v.find((x) => x.metric === 'capCheckAtTargetRate.p99Ms')).toMatchObject({
      measured: 1.5,
      pass: true,
    });
  });

  it('warns when an offered rate was not sustained, anywhere in the result', () => {
    expect(unsustainedRates({ a: { offeredPerSec: 5000, achievedPerSec: 4994 } })).toEqual([]);
    const w = unsustainedRates({
      x: 1,
      deep: { capCheckAtTargetRate: { offeredPerSec: 5000, achievedPerSec: 3100 } },
    });
    expect(w).toHaveLength(1);
    expect(w[0]).toMatch(/deep\.capCheckAtTargetRate: offered 5000\/s but sustained only 3100\/s/);
  });
});
