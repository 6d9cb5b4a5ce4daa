/**
 * What ad servers apply: the split of the controller's pressure into bid shading and throttling,
 * the combination of every plan of a bid (account, campaign, arm), the fail-safe for stale or
 * missing parameters, and the guard's E(t) over published parameters.
 */
import { describe, expect, it } from 'vitest';
import { resolvePlan } from '../../../shared/budget/model.js';
import { linearExpected } from '../../../shared/budget/pacing.js';
import { dayWindowOf } from '../../../shared/budget/time-zone.js';
import {
  actuatorsOf,
  defaultControllerConfig as cfg,
  combineForBid,
  FAIL_SAFE_MULTIPLIER,
  FAIL_SAFE_THROTTLE,
  failSafeParams,
  lowestPressure,
  publishedCurve,
} from '../../../shared/pacing/controller/index.js';
import { evaluateCurve, type PlanPacingParams } from '../../../shared/pacing/types.js';

const DAY = dayWindowOf('2026-11-21', 'UTC');
const plan = resolvePlan(
  { level: 'campaign', accountId: 'a', campaignId: 'c', dailyBudgetMicros: 24_000_000, pacingMode: 'even' },
  'UTC',
);

describe('actuators', () => {
  it('shade first, throttle only below the multiplier floor', () => {
    expect(actuatorsOf(0, cfg)).toEqual({ throttle: 1, bidMultiplier: 1 });
    const mid = actuatorsOf(Math.log(0.5) * cfg.elasticity, cfg);
    expect(mid.throttle).toBe(1);
    expect(mid.bidMultiplier).toBeCloseTo(0.5, 12);
    const deep = actuatorsOf(cfg.elasticity * Math.log(cfg.minMultiplier) + Math.log(0.1), cfg);
    expect(deep.bidMultiplier).toBe(cfg.minMultiplier);
    expect(deep.throttle).toBeCloseTo(0.1, 12);
    expect(actuatorsOf(lowestPressure(cfg) - 5, cfg)).toEqual({
      throttle: cfg.minThrottle,
      bidMultiplier: cfg.minMultiplier,
    });
  });

  it('the share of full-speed spend, throttle × multiplier^κ, is e^u and never increases as u falls', () => {
    let last = Number.POSITIVE_INFINITY;
    for (let u = 0; u >= lowestPressure(cfg); u -= 0.05) {
      const a = actuatorsOf(u, cfg);
      const g = a.throttle * a.bidMultiplier ** cfg.elasticity;
      expect(g).toBeCloseTo(Math.exp(u), 9);
      expect(g).toBeLessThanOrEqual(last);
      last = g;
    }
  });
});

describe('combineForBid', () => {
  it('multiplies the throttles and multipliers of every plan of the bid', () => {
    const account = { throttle: 0.5, bidMultiplier: 1 };
    const campaign = { throttle: 1, bidMultiplier: 0.8 };
    const arm = { throttle: 0.9, bidMultiplier: 0.5 };
    const c = combineForBid([account, campaign, arm]);
    expect(c.throttle).toBeCloseTo(0.45, 12);
    expect(c.bidMultiplier).toBeCloseTo(0.4, 12);
  });

  it('a plan at full speed changes nothing; missing plans are skipped; nonsense is clamped', () => {
    const p = { throttle: 0.3, bidMultiplier: 0.7 };
    expect(combineForBid([p, { throttle: 1, bidMultiplier: 1 }])).toEqual(p);
    expect(combineForBid([undefined, p, undefined])).toEqual(p);
    expect(combineForBid([])).toEqual({ throttle: 1, bidMultiplier: 1 });
    expect(
      combineForBid([
        { throttle: 7, bidMultiplier: Number.NaN },
        { throttle: -1, bidMultiplier: 1 },
      ]),
    ).toEqual({
      throttle: 0,
      bidMultiplier: 1,
    });
  });
});

describe('failSafeParams', () => {
  it('with nothing known: the linear curve (what the guard defaults to) at full throttle', () => {
    const p = failSafeParams(plan, DAY);
    expect(p).toMatchObject({
      planId: 'campaign',
      day: DAY.day,
      budgetMicros: 24_000_000,
      throttle: FAIL_SAFE_THROTTLE,
      bidMultiplier: FAIL_SAFE_MULTIPLIER,
    });
    for (let h = 0; h <= 24; h += 3) {
      const t = DAY.startMs + h * 3_600_000;
      expect(evaluateCurve(p.curve, t)).toBe(linearExpected(24_000_000, DAY, t));
    }
  });

  it("keeps today's last throttle and multiplier, ignores another day's, honours a region's budget", () => {
    const last: PlanPacingParams = { ...failSafeParams(plan, DAY), throttle: 0.2, bidMultiplier: 0.6 };
    expect(failSafeParams(plan, DAY, { last })).toMatchObject({ throttle: 0.2, bidMultiplier: 0.6 });
    const yesterday = { ...last, day: '2026-11-20' };
    expect(failSafeParams(plan, DAY, { last: yesterday })).toMatchObject({ throttle: 1, bidMultiplier: 1 });
    const share = failSafeParams(plan, DAY, { budgetMicros: 6_000_000 });
    expect(evaluateCurve(share.curve, DAY.endMs)).toBe(6_000_000);
  });

  it('ASAP plans: the whole budget from the start of the day', () => {
    const asap = resolvePlan({ ...plan, pacingMode: 'asap' }, 'UTC');
    expect(evaluateCurve(failSafeParams(asap, DAY).curve, DAY.startMs + 1)).toBe(24_000_000);
  });
});

describe('publishedCurve (the guard E(t) over published parameters)', () => {
  const params: PlanPacingParams = {
    ...failSafeParams(plan, DAY),
    curve: {
      atMs: [DAY.startMs, DAY.startMs + 12 * 3_600_000, DAY.endMs],
      micros: [0, 20_000_000, 24_000_000],
    },
  };

  it('follows the published curve of the same day', () => {
    const curve = publishedCurve(() => params);
    expect(curve.expectedMicros(plan, DAY, DAY.startMs + 6 * 3_600_000)).toBe(10_000_000);
  });

  it('falls back (linear) when parameters are missing or of another day', () => {
    const t = DAY.startMs + 6 * 3_600_000;
    expect(publishedCurve(() => undefined).expectedMicros(plan, DAY, t)).toBe(6_000_000);
    expect(publishedCurve(() => ({ ...params, day: '2026-11-20' })).expectedMicros(plan, DAY, t)).toBe(
      6_000_000,
    );
  });

  it('a budget cut not yet republished caps at once', () => {
    const cut = resolvePlan({ ...plan, dailyBudgetMicros: 5_000_000 }, 'UTC');
    expect(publishedCurve(() => params).expectedMicros(cut, DAY, DAY.startMs + 6 * 3_600_000)).toBe(
      5_000_000,
    );
  });
});
