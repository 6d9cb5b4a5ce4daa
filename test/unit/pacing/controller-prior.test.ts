/**
 * Priors for plans without a forecast of their own (controller/prior.ts, docs/pacing.md "Prior for
 * new plans") and the first tick of a plan-day: the book's account → zone → region fallback (the
 * region's shape moved through UTC to the plan's own hours), the levels it scales to the plan's
 * budget, what it leaves out; the controller seeding every plan-day that has no level of its own,
 * its first pressure from the prior's level and its first minutes; and the seeded forecast staying
 * readable by an older leader.
 */
import { describe, expect, it } from 'vitest';
import { type ResolvedPlan, resolvePlan } from '../../../shared/budget/model.js';
import { dayWindow, dayWindowOf } from '../../../shared/budget/time-zone.js';
import { defaultControllerConfig } from '../../../shared/pacing/controller/config.js';
import { curveSlope } from '../../../shared/pacing/controller/curve.js';
import {
  COVER_UNITS,
  foldObservations,
  levelOf,
  quantiseLevel,
  withObservation,
} from '../../../shared/pacing/controller/forecast.js';
import {
  type ControllerState,
  createPacingController,
  type TrafficForecast,
} from '../../../shared/pacing/controller/index.js';
import {
  BUILT_IN_SHAPE,
  builtInShapeIn,
  ForecastPriors,
  isForecast,
  priorForecast,
} from '../../../shared/pacing/controller/prior.js';
import { evaluateCurve } from '../../../shared/pacing/types.js';
import { SHAPES } from '../../../sim/market/index.js';
import { olderDecodeForecast } from '../../fixtures/pacing/older-leader.js';
import { H } from './fixture.js';
import { Plant, requestsForDemand } from './plant.js';

const NOW = dayWindowOf('2026-11-18', 'America/New_York').startMs + 10 * H;
const ctl = createPacingController();

function plan(accountId: string, campaignId: string, budget: number, timeZone: string): ResolvedPlan {
  return resolvePlan(
    { level: 'campaign', accountId, campaignId, dailyBudgetMicros: budget, pacingMode: 'even' },
    timeZone,
  );
}

/** A forecast that learned `level(h)` per local hour over two days (its own: hour-of-week too). */
function learned(timeZone: string, level: (h: number) => number): TrafficForecast {
  let f: TrafficForecast = {
    hourOfWeek: new Array(168).fill(0),
    hourOfDay: new Array(24).fill(0),
    obsDay: '',
    obs: new Array(25).fill(0),
    cover: new Array(25).fill(0),
  };
  for (const day of ['2026-11-15', '2026-11-16']) {
    const w = dayWindowOf(day, timeZone);
    for (let k = 0; k < 24; k++) {
      const h = new Date(w.startMs + k * H).toLocaleString('en-US', {
        timeZone,
        hour: 'numeric',
        hourCycle: 'h23',
      });
      f = withObservation(
        f,
        { day, slot: k, level: quantiseLevel(level(Number(h) % 24)), cover: COVER_UNITS },
        timeZone,
        defaultControllerConfig,
      );
    }
  }
  return foldObservations(f, timeZone, defaultControllerConfig);
}

const levels = (f: TrafficForecast) => f.hourOfDay.map((q) => levelOf(q) ?? 0);
const peakHour = (f: TrafficForecast) => {
  const l = levels(f);
  return l.indexOf(Math.max(...l));
};

describe('the book of priors', () => {
  const NY = 'America/New_York';
  const LA = 'America/Los_Angeles';
  // New York plans learned a peak at 12:00 local; their demand is 4× and 16× their budget.
  const peakAt = (p: number) => (h: number) => {
    const d = ((h - p + 36) % 24) - 12;
    return 1000 * (1 + 9 * Math.exp(-(d * d) / 8));
  };
  const entries = [
    { plan: plan('acme', 'a1', 10_000_000, NY), forecast: scaled(learned(NY, peakAt(12)), 4 * 10_000_000) },
    { plan: plan('acme', 'a2', 40_000_000, NY), forecast: scaled(learned(NY, peakAt(12)), 16 * 40_000_000) },
    { plan: plan('bolt', 'b1', 5_000_000, NY), forecast: scaled(learned(NY, peakAt(12)), 8 * 5_000_000) },
    // A prior-only forecast and a plan with nothing learned: left out.
    { plan: plan('bolt', 'b2', 5_000_000, NY), forecast: priorForecast(BUILT_IN_SHAPE, 1e9) },
    { plan: plan('bolt', 'b3', 5_000_000, NY), forecast: undefined },
  ];

  it('gives a plan of the same account that account’s shape and geometric-mean level', () => {
    const book = new ForecastPriors();
    book.refresh(NOW, entries);
    expect(book.plans).toBe(3);
    const f = book.forecastFor(plan('acme', 'a3', 2_000_000, NY), NOW) as TrafficForecast;
    expect(peakHour(f)).toBe(12);
    // √(4 × 16) = 8 × its budget a day.
    const daily = levels(f).reduce((a, b) => a + b, 0);
    expect(daily / 2_000_000).toBeGreaterThan(7.6);
    expect(daily / 2_000_000).toBeLessThan(8.4);
    expect(f.hourOfWeek.every((q) => q === 0)).toBe(true);
  });

  it('falls back to the zone, then to the region moved to the plan’s own hours', () => {
    const book = new ForecastPriors();
    book.refresh(NOW, entries);
    // Another New York account: the zone's 3 plans.
    expect(peakHour(book.forecastFor(plan('new', 'n1', 1_000_000, NY), NOW) as TrafficForecast)).toBe(12);
    // Los Angeles has no plan: the region's shape in UTC, back in LA's hours — the same instant
    // of the day, 09:00 local.
    expect(peakHour(book.forecastFor(plan('west', 'w1', 1_000_000, LA), NOW) as TrafficForecast)).toBe(9);
    // A book with fewer plans than a group needs: nothing.
    const small = new ForecastPriors({ minPlans: 4 });
    small.refresh(NOW, entries);
    expect(small.forecastFor(plan('west', 'w1', 1_000_000, LA), NOW)).toBeUndefined();
    expect(small.forecastFor(plan('acme', 'a4', 1_000_000, NY), NOW)).toBeDefined();
  });

  it('rebuilds at most hourly, and every minute while it has found nothing', () => {
    const book = new ForecastPriors();
    book.refresh(NOW, [entries[4] as (typeof entries)[number]]);
    expect(book.plans).toBe(0);
    book.refresh(NOW + 10_000, entries);
    expect(book.plans).toBe(0);
    book.refresh(NOW + 60_000, entries);
    expect(book.plans).toBe(3);
    book.refresh(NOW + 120_000, entries.slice(0, 1));
    expect(book.plans).toBe(3);
    book.refresh(NOW + H + 60_000, entries.slice(0, 1));
    expect(book.plans).toBe(1);
  });

  it('a seeded forecast is an f1 forecast an older leader reads as it is', () => {
    const book = new ForecastPriors();
    book.refresh(NOW, entries);
    const f = book.forecastFor(plan('acme', 'a3', 2_000_000, NY), NOW) as TrafficForecast;
    const old = olderDecodeForecast(ctl.encodeForecast(f));
    expect(old).toEqual(f);
  });
});

describe('a plan-day without levels of its own starts from a prior', () => {
  const NY = 'America/New_York';

  it('seeds the forecast from the lookup, shapes the curve by it and starts at its level', () => {
    const p = plan('acme', 'c', 24_000_000, NY);
    const day = dayWindowOf('2026-11-18', NY);
    // The prior: demand 5× the budget, all of it between 09:00 and 21:00.
    const prior = priorForecast(
      Array.from({ length: 24 }, (_, h) => (h >= 9 && h < 21 ? 1 : 0.01)),
      5 * 24_000_000,
    );
    let asked = 0;
    const r = ctl.step(
      {
        plan: p,
        day,
        nowMs: day.startMs,
        spend: { initialised: true, confirmedMicros: 0, inFlightMicros: 0, leasedMicros: 0 },
        prior: () => {
          asked++;
          return prior;
        },
      },
      undefined,
      undefined,
    );
    expect(asked).toBe(1);
    expect(isForecast(r.forecast)).toBe(true);
    expect((r.forecast as TrafficForecast).hourOfDay).toEqual(prior.hourOfDay);
    // The night gets the floor's share only; the day most of the budget.
    expect(evaluateCurve(r.params.curve, day.startMs + 9 * H)).toBeLessThan(0.05 * 24_000_000);
    expect(evaluateCurve(r.params.curve, day.startMs + 21 * H)).toBeGreaterThan(0.95 * 24_000_000);
    // First pressure: the budget over the prior's demand for the rest of the day, ≈ ln(1/5)
    // (the night's floored weights make it a little higher).
    const u = Math.log(r.params.throttle * r.params.bidMultiplier);
    expect(u).toBeGreaterThan(Math.log(1 / 5) - 0.05);
    expect(u).toBeLessThan(Math.log(1 / 5) + 0.2);
    // The next ticks of the day do not ask again.
    const r2 = ctl.step(
      {
        plan: p,
        day,
        nowMs: day.startMs + 10_000,
        spend: { initialised: true, confirmedMicros: 0, inFlightMicros: 0, leasedMicros: 0 },
        prior: () => {
          asked++;
          return prior;
        },
      },
      r.state,
      r.forecast,
    );
    expect(asked).toBe(1);
    expect(r2.forecast).toBe(r.forecast);
  });

  it('every plan-day, not only the first: a plan that learned nothing is seeded again at midnight', () => {
    const p = plan('acme', 'c', 10_000_000, NY);
    const d1 = dayWindowOf('2026-11-18', NY);
    let r = ctl.step(
      {
        plan: p,
        day: d1,
        nowMs: d1.endMs - 10_000,
        spend: { initialised: true, confirmedMicros: 9_990_000, inFlightMicros: 0, leasedMicros: 0 },
      },
      undefined,
      undefined,
    );
    const prior = priorForecast(SHAPES.eveningPeak, 3 * 10_000_000);
    const d2 = dayWindow(d1.endMs, NY);
    r = ctl.step(
      {
        plan: p,
        day: d2,
        nowMs: d2.startMs,
        spend: { initialised: true, confirmedMicros: 0, inFlightMicros: 0, leasedMicros: 0 },
        prior: () => prior,
      },
      r.state,
      r.forecast,
    );
    expect((r.forecast as TrafficForecast).hourOfDay).toEqual(prior.hourOfDay);
    expect(Math.log(r.params.throttle * r.params.bidMultiplier)).toBeLessThan(-0.8);
    // The first minute's allowance is the curve's: about a minute of the evening-peak day's night.
    const e1 = evaluateCurve(r.params.curve, d2.startMs + 60_000);
    expect(e1).toBeLessThan(10_000_000 / 1440);
  });

  it('nothing learned anywhere: the built-in diurnal shape at the initial pressure', () => {
    const p = plan('acme', 'c', 24_000_000, NY);
    const day = dayWindowOf('2026-11-18', NY);
    const r = ctl.step(
      {
        plan: p,
        day,
        nowMs: day.startMs,
        spend: { initialised: true, confirmedMicros: 0, inFlightMicros: 0, leasedMicros: 0 },
        prior: () => undefined,
      },
      undefined,
      undefined,
    );
    const c = r.params.curve;
    expect(curveSlope(c, day.startMs + 16 * H) / curveSlope(c, day.startMs + 4 * H)).toBeGreaterThan(5);
    expect(Math.log(r.params.throttle * r.params.bidMultiplier)).toBeCloseTo(-1, 1);
    // A flat controller (no built-in shape) keeps the flat curve.
    const flat = createPacingController({ builtInShape: null });
    const f = flat.step(
      {
        plan: p,
        day,
        nowMs: day.startMs,
        spend: { initialised: true, confirmedMicros: 0, inFlightMicros: 0, leasedMicros: 0 },
      },
      undefined,
      undefined,
    );
    expect(curveSlope(f.params.curve, day.startMs + 16 * H)).toBeCloseTo(
      curveSlope(f.params.curve, day.startMs + 4 * H),
      6,
    );
  });

  it('a plan with levels of its own is never seeded', () => {
    const p = plan('acme', 'c', 10_000_000, NY);
    const own = learned(NY, () => 50_000);
    const day = dayWindowOf('2026-11-18', NY);
    let asked = 0;
    const r = ctl.step(
      {
        plan: p,
        day,
        nowMs: day.startMs,
        spend: { initialised: true, confirmedMicros: 0, inFlightMicros: 0, leasedMicros: 0 },
        prior: () => {
          asked++;
          return undefined;
        },
      },
      undefined,
      own,
    );
    expect(asked).toBe(0);
    expect(r.forecast).toBe(own);
  });

  it('first day on diurnal traffic: the built-in prior keeps a fresh plan within 5 % of its curve', () => {
    for (const shape of [SHAPES.noonPeak, SHAPES.eveningPeak]) {
      for (const demand of [1.5, 3]) {
        const plant = new Plant(ctl, {
          budgetMicros: 20_000_000,
          requestsPerDay: requestsForDemand(demand, 20_000_000),
          shape,
        });
        const day = dayWindowOf('2026-11-16', 'UTC');
        plant.run(day.startMs, day.endMs);
        expect(plant.maxDeviation).toBeLessThanOrEqual(0.05);
        expect(plant.confirmed / 20_000_000).toBeGreaterThanOrEqual(0.95);
        expect((plant.state as ControllerState).day).toBe('2026-11-16');
      }
    }
  }, 60_000);
});

/** `f` with its levels scaled to a daily total of `daily`. */
function scaled(f: TrafficForecast, daily: number): TrafficForecast {
  const l = levels(f);
  const sum = l.reduce((a, b) => a + b, 0);
  return { ...f, hourOfDay: l.map((v) => quantiseLevel((v / sum) * daily)) };
}

describe('the built-in shape in the audience’s zone', () => {
  it('moves the shape through UTC to a plan in another zone, unchanged in the audience’s own', () => {
    const cfg = { builtInShape: BUILT_IN_SHAPE, audienceTimeZone: 'America/New_York' };
    // New York is three hours ahead of Los Angeles: the Los Angeles plan's hour h is New York's h + 3.
    const la = builtInShapeIn(cfg, 'America/Los_Angeles', NOW) as readonly number[];
    for (let h = 0; h < 24; h++) expect(la[h]).toBe(BUILT_IN_SHAPE[(h + 3) % 24]);
    expect(builtInShapeIn(cfg, 'America/New_York', NOW)).toBe(BUILT_IN_SHAPE);
    expect(builtInShapeIn({ ...cfg, audienceTimeZone: null }, 'America/Los_Angeles', NOW)).toBe(
      BUILT_IN_SHAPE,
    );
    // One result per zone and minute, shared by every plan that starts then …
    expect(builtInShapeIn(cfg, 'America/Los_Angeles', NOW)).toBe(la);
    // … and not across a DST switch: on 2026-03-08 New York is on EDT from 07:00 UTC, Los Angeles
    // on PDT only from 10:00 UTC, so between them the two are four hours apart.
    const between = builtInShapeIn(
      cfg,
      'America/Los_Angeles',
      Date.parse('2026-03-08T08:30:00Z'),
    ) as number[];
    const after = builtInShapeIn(cfg, 'America/Los_Angeles', Date.parse('2026-03-08T11:30:00Z')) as number[];
    expect(after[3]).toBe(BUILT_IN_SHAPE[6]);
    expect(between[3]).toBe(BUILT_IN_SHAPE[7]);
    // A half-hour zone takes the hour it overlaps at the hour's start (Kolkata is UTC+5:30).
    expect(builtInShapeIn(cfg, 'Asia/Kolkata', NOW)).toHaveLength(24);
  });

  it('shapes a new plan’s first curve: a Los Angeles plan plans its 17:00–20:00 as New York’s evening', () => {
    const la = 'America/Los_Angeles';
    const day = dayWindowOf('2026-11-18', la);
    const share = (c: ReturnType<typeof createPacingController>) => {
      const step = c.step(
        {
          plan: plan('la', 'c1', 10_000_000, la),
          day,
          nowMs: day.startMs,
          spend: {
            initialised: true,
            confirmedMicros: 0,
            inFlightMicros: 0,
            leasedMicros: 0,
            releasableMicros: 0,
          },
        },
        undefined,
        undefined,
      );
      const at = (h: number) => evaluateCurve(step.params.curve, day.startMs + h * H);
      return (at(21) - at(17)) / 10_000_000;
    };
    const own = share(createPacingController());
    const audience = share(createPacingController({ audienceTimeZone: 'America/New_York' }));
    const sum = BUILT_IN_SHAPE.reduce((a, b) => a + b, 0);
    const expectedShare = (hours: number[]) =>
      hours.reduce((a, h) => a + (BUILT_IN_SHAPE[h] as number), 0) / sum;
    // Levels are quantised to 1/32 octave (about 2 %).
    expect(own / expectedShare([17, 18, 19, 20])).toBeCloseTo(1, 1);
    expect(audience / expectedShare([20, 21, 22, 23])).toBeCloseTo(1, 1);
    expect(own - audience).toBeGreaterThan(0.05);
    expect(() => createPacingController({ audienceTimeZone: 'Mars/Olympus' })).toThrow(
      /audienceTimeZone = "Mars\/Olympus": give an IANA time zone/,
    );
  });
});
