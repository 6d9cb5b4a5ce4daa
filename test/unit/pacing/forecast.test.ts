/**
 * The traffic forecast (pure): quantised levels, observations buffered per day and folded into the
 * hour-of-day / hour-of-week profiles only when a later day starts, smoothing and outlier limits,
 * the day profile the curve is built from, and the exact text encoding.
 */
import { describe, expect, it } from 'vitest';
import { dayWindowOf } from '../../../shared/budget/time-zone.js';
import { defaultControllerConfig as cfg } from '../../../shared/pacing/controller/config.js';
import { daySlots } from '../../../shared/pacing/controller/day-slots.js';
import {
  COVER_UNITS,
  dayProfile,
  EMPTY_FORECAST,
  FIRST_DAY_PEAK,
  foldObservations,
  isPriorOnly,
  levelOf,
  NEIGHBOUR_HOURS,
  OUTLIER_FACTOR,
  PARTIAL_DAY_HOURS,
  PRIOR_HOURS,
  quantiseLevel,
  type TrafficForecast,
  withObservation,
} from '../../../shared/pacing/controller/forecast.js';
import { decodeForecast, encodeForecast } from '../../../shared/pacing/controller/forecast-codec.js';
import { priorForecast } from '../../../shared/pacing/controller/prior.js';
import { prng } from '../../../shared/random/prng.js';

const TZ = 'UTC';
const slotsOf = (day: string) => daySlots(TZ, dayWindowOf(day, TZ));

/** A forecast that observed `levels[h]` in every hour of `day` (full coverage). */
function observedDay(f: TrafficForecast, day: string, levels: (h: number) => number): TrafficForecast {
  let g = f;
  for (let h = 0; h < 24; h++) {
    g = withObservation(g, { day, slot: h, level: quantiseLevel(levels(h)), cover: COVER_UNITS }, TZ, cfg);
  }
  return g;
}

describe('quantised levels', () => {
  it('keep a level within 1/32 octave, 0 = unknown', () => {
    for (const x of [0, 1, 17, 999, 123_456, 9.9e9]) {
      const back = levelOf(quantiseLevel(x)) as number;
      expect(Math.abs(Math.log2((1 + back) / (1 + x)))).toBeLessThanOrEqual(1 / 64 + 1e-12);
    }
    expect(levelOf(0)).toBeUndefined();
    expect(quantiseLevel(Number.NaN)).toBe(1);
  });
});

describe('observations and profiles', () => {
  it('with no history the day profile is flat and has no demand level', () => {
    const p = dayProfile(EMPTY_FORECAST, undefined, TZ, slotsOf('2026-11-21'), cfg);
    expect(new Set(p.weights)).toEqual(new Set([1]));
    expect(p.demand).toBeUndefined();
  });

  it("a day's observations shape the next day only, never the day itself", () => {
    const shape = (h: number) => (h >= 9 && h < 18 ? 4000 : 1000);
    const f = observedDay(EMPTY_FORECAST, '2026-11-20', shape);
    expect(f.obsDay).toBe('2026-11-20');
    expect(f.hourOfDay.every((q) => q === 0)).toBe(true); // buffered, not folded yet
    const same = dayProfile(f, undefined, TZ, slotsOf('2026-11-20'), cfg);
    expect(new Set(same.weights)).toEqual(new Set([1]));
    const next = dayProfile(f, undefined, TZ, slotsOf('2026-11-21'), cfg);
    expect((next.weights[12] as number) / (next.weights[3] as number)).toBeCloseTo(4, 1);
    expect(next.demand?.reduce((a, b) => a + b, 0)).toBeCloseTo(9 * 4000 + 15 * 1000, -3);
  });

  it('the pending observation held in the controller state gives the same profile as the folded forecast', () => {
    const f = observedDay(EMPTY_FORECAST, '2026-11-20', (h) => 1000 + 100 * h);
    const last = { day: '2026-11-20', slot: 23, level: quantiseLevel(50_000), cover: COVER_UNITS };
    const viaState = dayProfile(f, last, TZ, slotsOf('2026-11-21'), cfg);
    const viaForecast = dayProfile(
      withObservation(f, last, TZ, cfg),
      undefined,
      TZ,
      slotsOf('2026-11-21'),
      cfg,
    );
    expect(viaState).toEqual(viaForecast);
  });

  it('smooths day over day and limits what one odd day can do', () => {
    let f = observedDay(EMPTY_FORECAST, '2026-11-16', () => 1000);
    f = foldObservations(
      observedDay(f, '2026-11-17', () => 2000),
      TZ,
      cfg,
    );
    // EWMA with alphaDay 0.3: 1000 + 0.3 × 1000.
    expect(levelOf(f.hourOfDay[5] as number)).toBeCloseTo(1300, -1);
    // A 100× burst moves the hour by at most OUTLIER_FACTOR before smoothing.
    const burst = foldObservations(
      observedDay(f, '2026-11-18', (h) => (h === 5 ? 130_000 : 1300)),
      TZ,
      cfg,
    );
    const l = levelOf(burst.hourOfDay[5] as number) as number;
    expect(l).toBeLessThanOrEqual(1300 * (1 + cfg.alphaDay * (OUTLIER_FACTOR - 1)) * 1.03);
    expect(l).toBeGreaterThan(2000);
  });

  it('an hour seen only in part moves the level less', () => {
    const base = foldObservations(
      observedDay(EMPTY_FORECAST, '2026-11-16', () => 1000),
      TZ,
      cfg,
    );
    const full = withObservation(
      base,
      { day: '2026-11-17', slot: 5, level: quantiseLevel(2000), cover: 32 },
      TZ,
      cfg,
    );
    const part = withObservation(
      base,
      { day: '2026-11-17', slot: 5, level: quantiseLevel(2000), cover: 8 },
      TZ,
      cfg,
    );
    const lf = levelOf(foldObservations(full, TZ, cfg).hourOfDay[5] as number) as number;
    const lp = levelOf(foldObservations(part, TZ, cfg).hourOfDay[5] as number) as number;
    expect(lf).toBeCloseTo(1300, -1);
    expect(Math.abs(lp - (1000 + 0.25 * 300))).toBeLessThan(15); // within quantisation
  });

  it('hour-of-week separates weekdays from weekends', () => {
    // Two weeks: Saturdays at 500, other days at 2000 (2026-11-21 is a Saturday).
    let f = EMPTY_FORECAST;
    for (let d = 9; d <= 22; d++) {
      const day = `2026-11-${String(d).padStart(2, '0')}`;
      const sat = new Date(`${day}T00:00:00Z`).getUTCDay() === 6;
      f = observedDay(f, day, () => (sat ? 500 : 2000));
    }
    const sat = dayProfile(f, undefined, TZ, slotsOf('2026-11-28'), cfg);
    const mon = dayProfile(f, undefined, TZ, slotsOf('2026-11-30'), cfg);
    expect((sat.demand as number[])[10]).toBeLessThan(0.75 * ((mon.demand as number[])[10] as number));
    // The curve shape depends on relative weights only: both days are flat within themselves.
    expect(Math.max(...sat.weights) / Math.min(...sat.weights)).toBeCloseTo(1, 5);
  });

  it('floors hours with little traffic, so a wrong zero cannot shut the plan out', () => {
    const f = observedDay(EMPTY_FORECAST, '2026-11-20', (h) => (h === 3 ? 0 : 10_000));
    const p = dayProfile(f, undefined, TZ, slotsOf('2026-11-21'), cfg);
    const mean = p.weights.reduce((a, b) => a + b, 0) / 24;
    expect(p.weights[3] as number).toBeGreaterThanOrEqual(cfg.shapeFloor * mean * 0.99);
  });

  it('the fingerprint changes with the inputs and only with them', () => {
    const a = observedDay(EMPTY_FORECAST, '2026-11-20', () => 1000);
    const b = observedDay(EMPTY_FORECAST, '2026-11-20', (h) => (h === 7 ? 5000 : 1000));
    const s = slotsOf('2026-11-21');
    expect(dayProfile(a, undefined, TZ, s, cfg).hash).toBe(dayProfile(a, undefined, TZ, s, cfg).hash);
    expect(dayProfile(a, undefined, TZ, s, cfg).hash).not.toBe(dayProfile(b, undefined, TZ, s, cfg).hash);
  });

  it('an observation of an older day is folded alone, keeping the buffered day', () => {
    const f = observedDay(EMPTY_FORECAST, '2026-11-20', () => 1000);
    const g = withObservation(
      f,
      { day: '2026-11-19', slot: 4, level: quantiseLevel(777), cover: 32 },
      TZ,
      cfg,
    );
    expect(g.obsDay).toBe('2026-11-20');
    expect(g.obs).toEqual(f.obs);
    expect(levelOf(g.hourOfDay[4] as number)).toBeCloseTo(777, -2);
  });
});

describe('levels that say nothing, and priors', () => {
  it('known levels that are all zero plan the day by time, not the whole budget at once', () => {
    // A plan that could observe only hours without demand (night, narrow targeting): every known
    // level is 0. Their mean is 0, so every weight was 0 — and a curve of zero weights published
    // the whole budget at the day's first instant (the midnight bug).
    const f = observedDay(EMPTY_FORECAST, '2026-11-20', () => 0);
    const p = dayProfile(f, undefined, TZ, slotsOf('2026-11-21'), cfg);
    expect(p.demand).toBeUndefined();
    expect(new Set(p.weights)).toEqual(new Set([1]));
    // Only the last hour observed, at zero (a plan that started at 23:00).
    const last = withObservation(
      EMPTY_FORECAST,
      { day: '2026-11-20', slot: 23, level: 1, cover: 32 },
      TZ,
      cfg,
    );
    const q = dayProfile(last, undefined, TZ, slotsOf('2026-11-21'), cfg);
    expect(q.weights.every((w) => w > 0)).toBe(true);
    expect(q.demand).toBeUndefined();
  });

  it('a prior is recognised by its empty hour-of-week levels', () => {
    expect(isPriorOnly(EMPTY_FORECAST)).toBe(false);
    const prior = priorForecast(
      Array.from({ length: 24 }, (_, h) => 1 + h),
      24_000,
    );
    expect(isPriorOnly(prior)).toBe(true);
    expect(isPriorOnly(observedDay(EMPTY_FORECAST, '2026-11-19', () => 100))).toBe(false);
    // Its first fold of the plan's own day sets hour-of-week levels: no longer a prior.
    const own = foldObservations(
      observedDay(prior, '2026-11-19', () => 100),
      TZ,
      cfg,
    );
    expect(isPriorOnly(own)).toBe(false);
  });

  it("a prior's first fold: the plan's own day replaces it whole, unobserved hours unknown", () => {
    // Prior: twice as much at 12:00 as at 03:00, at a level of ~1,000/h; the plan really runs at
    // ~50,000/h (50×: more than the ×4 outlier limit could follow in a day).
    const shape = Array.from({ length: 24 }, (_, h) => (h === 12 ? 2 : h === 3 ? 1 : 1.5));
    const prior = priorForecast(shape, 1000 * 36);
    let f = prior;
    // Sixteen hours observed: at least PARTIAL_DAY_HOURS, a day of its own.
    for (let h = 4; h < 20; h++)
      f = withObservation(
        f,
        { day: '2026-11-20', slot: h, level: quantiseLevel(h === 12 ? 100_000 : 75_000), cover: 32 },
        TZ,
        cfg,
      );
    const folded = foldObservations(f, TZ, cfg);
    const at = (h: number) => levelOf(folded.hourOfDay[h] as number);
    // Observed hours at the plan's own level and shape; an unobserved hour unknown (a profile gives
    // it the mean of the known ones), not the prior's.
    expect(at(12)).toBeGreaterThan(95_000);
    expect(at(12)).toBeLessThan(105_000);
    expect((at(10) as number) / (at(12) as number)).toBeCloseTo(0.75, 1);
    expect(at(3)).toBeUndefined();
    const p = dayProfile(folded, undefined, TZ, slotsOf('2026-11-21'), cfg);
    expect((p.weights[3] as number) / (p.weights[12] as number)).toBeCloseTo(
      (15 * 75_000 + 100_000) / 16 / 100_000,
      1,
    );
    // The same without the prior mark (a learned forecast at the prior's level): the outlier limit
    // holds the observed hours to ×4 before smoothing.
    const learned = { ...prior, hourOfWeek: prior.hourOfWeek.map(() => 1) };
    let g: TrafficForecast = learned;
    for (let h = 8; h < 16; h++)
      g = withObservation(
        g,
        { day: '2026-11-20', slot: h, level: quantiseLevel(75_000), cover: 32 },
        TZ,
        cfg,
      );
    expect(levelOf(foldObservations(g, TZ, cfg).hourOfDay[10] as number)).toBeLessThan(5_000);
  });
});

describe('a prior’s first fold', () => {
  it('takes the observed shape where the plan was seen, a thin hour weighed against its neighbours', () => {
    // Prior: noon twice as busy as the rest (960 an hour, 1,920 at noon). The plan's own (partial)
    // day: 2,000 an hour at 09:00 and 10:00 (whole hours), 1,000 at 11:00 on a quarter of the
    // hour, 500 at 15:00 (whole).
    const shape = Array.from({ length: 24 }, (_, h) => (h === 12 ? 2 : 1));
    let f = priorForecast(shape, 24_000);
    for (const [h, level, cover] of [
      [9, 2000, 32],
      [10, 2000, 32],
      [11, 1000, 8],
      [15, 500, 32],
    ] as const)
      f = withObservation(f, { day: '2026-11-20', slot: h, level: quantiseLevel(level), cover }, TZ, cfg);
    const folded = foldObservations(f, TZ, cfg);
    const at = (h: number) => levelOf(folded.hourOfDay[h] as number) as number;
    // Whole hours take their observation, whatever the prior said.
    expect(at(9) / 2000).toBeCloseTo(1, 1);
    expect(at(15) / 500).toBeCloseTo(1, 1);
    // 11:00: a quarter its own 1,000, three quarters the cover-weighted mean of the observed hours
    // within NEIGHBOUR_HOURS (09:00, 10:00 and itself; 15:00 is too far) and PRIOR_HOURS of the
    // prior rescaled to the day (× 5,500 / 3,840: 1,375 at 11:00).
    const prior11 = (960 * 5500) / 3840;
    const near = (PRIOR_HOURS * prior11 + 2000 + 2000 + 0.25 * 1000) / (PRIOR_HOURS + 2.25);
    expect(NEIGHBOUR_HOURS).toBe(2);
    expect(at(11) / (0.25 * 1000 + 0.75 * near)).toBeCloseTo(1, 1);
  });

  it('keeps the prior, rescaled, where a partial first day saw nothing', () => {
    // A plan created at 21:00: three evening hours observed at 4× the prior's level. The other
    // 21 hours keep the prior's shape at the observed level (a flat mean of three evening hours
    // would put the evening's level on the night).
    const shape = Array.from({ length: 24 }, (_, h) => (h >= 21 ? 2 : h < 6 ? 0.5 : 1));
    const base = priorForecast(shape, 24_000);
    const prior = (h: number) => levelOf(base.hourOfDay[h] as number) as number;
    let f = base;
    for (const h of [21, 22, 23])
      f = withObservation(
        f,
        { day: '2026-11-20', slot: h, level: quantiseLevel(4 * prior(h)), cover: 32 },
        TZ,
        cfg,
      );
    const folded = foldObservations(f, TZ, cfg);
    const at = (h: number) => levelOf(folded.hourOfDay[h] as number) as number;
    expect(folded.hourOfDay.every((q) => q > 0)).toBe(true);
    for (const h of [3, 9, 15]) expect(at(h) / (4 * prior(h))).toBeCloseTo(1, 1);
    expect(at(3) / at(15)).toBeCloseTo(0.5, 1);
    expect(at(22) / (4 * prior(22))).toBeCloseTo(1, 1);
    // Still a prior: the next day, a whole one, replaces it (each hour its own observation).
    expect(isPriorOnly(folded)).toBe(true);
    const next = foldObservations(
      observedDay(folded, '2026-11-21', (h) => 500 + h),
      TZ,
      cfg,
    );
    expect(isPriorOnly(next)).toBe(false);
    expect(levelOf(next.hourOfDay[3] as number)).toBeCloseTo(503, -1);
    // Observed hours: PARTIAL_DAY_HOURS − 1 keeps the prior, PARTIAL_DAY_HOURS replaces it.
    const observe = (n: number) => {
      let g = base;
      for (let h = 0; h < n; h++)
        g = withObservation(
          g,
          { day: '2026-11-20', slot: h, level: quantiseLevel(4 * prior(h)), cover: 32 },
          TZ,
          cfg,
        );
      return foldObservations(g, TZ, cfg).hourOfDay.filter((q) => q > 0).length;
    };
    expect(observe(PARTIAL_DAY_HOURS - 1)).toBe(24);
    expect(observe(PARTIAL_DAY_HOURS)).toBe(PARTIAL_DAY_HOURS);
  });
});

describe('a first own day’s spikes', () => {
  it('are capped at FIRST_DAY_PEAK × the median observed hour (one lucky win of a small plan)', () => {
    let f = priorForecast(
      Array.from({ length: 24 }, () => 1),
      24_000,
    );
    for (let h = 0; h < 24; h++) {
      const level = h === 4 ? 40_000 : 2_000; // 04:00: one win at a low pressure reads 20×
      f = withObservation(f, { day: '2026-11-20', slot: h, level: quantiseLevel(level), cover: 32 }, TZ, cfg);
    }
    const folded = foldObservations(f, TZ, cfg);
    const at = (h: number) => levelOf(folded.hourOfDay[h] as number) as number;
    expect(at(4) / at(10)).toBeGreaterThan(FIRST_DAY_PEAK * 0.97);
    expect(at(4) / at(10)).toBeLessThan(FIRST_DAY_PEAK * 1.03);
    // A later day is smoothed as usual (the outlier limit, not the first day's ceiling).
    const g = foldObservations(
      withObservation(
        folded,
        { day: '2026-11-21', slot: 4, level: quantiseLevel(40_000), cover: 32 },
        TZ,
        cfg,
      ),
      TZ,
      cfg,
    );
    expect(levelOf(g.hourOfDay[4] as number) as number).toBeGreaterThan(at(4) * 1.5);
  });
});

describe('day profile without materialising the fold', () => {
  it('equals the profile of the materialised forecast, bit for bit (random histories and pending observations)', () => {
    const random = prng(77);
    const days = ['2026-11-07', '2026-11-13', '2026-11-14', '2026-11-19', '2026-11-20', '2026-11-21'];
    for (let trial = 0; trial < 400; trial++) {
      // A third start from a prior (prior.ts): its first fold rescales it to the observed level.
      let f =
        trial % 3 === 0
          ? priorForecast(
              Array.from({ length: 24 }, () => random()),
              10 ** (2 + 4 * random()),
            )
          : EMPTY_FORECAST;
      const seen = Math.floor(random() * days.length);
      for (let d = 0; d < seen; d++) {
        const day = days[d] as string;
        for (let k = 0; k < 24; k++) {
          if (random() < 0.3) continue;
          const o = {
            day,
            slot: k,
            // Some hours saw no demand at all (level 0).
            level: quantiseLevel(random() < 0.1 ? 0 : 10 ** (1 + 5 * random())),
            cover: Math.floor(33 * random()),
          };
          f = withObservation(f, o, TZ, cfg);
        }
      }
      const pending =
        random() < 0.7
          ? {
              day: days[Math.floor(random() * days.length)] as string,
              slot: Math.floor(24 * random()),
              level: quantiseLevel(10 ** (1 + 5 * random())),
              cover: Math.floor(33 * random()),
            }
          : undefined;
      const target = slotsOf(random() < 0.5 ? '2026-11-21' : '2026-11-22');
      let g = f;
      if (pending && pending.day < target.day) g = withObservation(g, pending, TZ, cfg);
      if (g.obsDay !== '' && g.obsDay < target.day) g = foldObservations(g, TZ, cfg);
      expect(dayProfile(f, pending, TZ, target, cfg)).toEqual(dayProfile(g, undefined, TZ, target, cfg));
    }
  });
});

describe('forecast encoding', () => {
  it('round-trips exactly', () => {
    const f = observedDay(
      observedDay(EMPTY_FORECAST, '2026-11-19', (h) => 100 * h),
      '2026-11-20',
      (h) => 7 * h,
    );
    const text = encodeForecast(f);
    expect(decodeForecast(text)).toEqual(f);
    expect(text.length).toBeLessThan(500);
    expect(decodeForecast(encodeForecast(EMPTY_FORECAST))).toEqual(EMPTY_FORECAST);
  });

  it('decodes to the text it came from, with the levels of a day apart and zeros shared', () => {
    const f = observedDay(EMPTY_FORECAST, '2026-11-19', (h) => 100 * h);
    const pendingDay = {
      ...f,
      obsDay: '2026-11-20',
      obs: f.hourOfDay.concat([0]),
      cover: f.hourOfDay.map(() => 7).concat([32]),
    };
    for (const g of [f, pendingDay, EMPTY_FORECAST]) {
      const text = encodeForecast(g);
      const back = decodeForecast(text);
      expect(back).toEqual(g);
      expect(encodeForecast(back as TrafficForecast)).toBe(text);
    }
    // A forecast with no week levels and no observations (a prior) holds one array of its own.
    const prior = decodeForecast(
      encodeForecast({ ...EMPTY_FORECAST, hourOfDay: f.hourOfDay }),
    ) as TrafficForecast;
    expect(prior.hourOfWeek).toBe(EMPTY_FORECAST.hourOfWeek);
    expect(prior.obs).toBe(EMPTY_FORECAST.obs);
    expect(prior.cover).toBe(EMPTY_FORECAST.cover);
  });

  it('rejects text that is not a forecast', () => {
    const good = encodeForecast(EMPTY_FORECAST);
    for (const bad of [
      '',
      'f1',
      `f2|${good.slice(3)}`,
      good.slice(0, -1),
      `${good.slice(0, -1)}*`,
      'f1|2026-1-1|AAAA',
      `f1|2026-11-2${good.slice(3)}`,
      `${good.slice(0, -1)}h`,
      `${good.slice(0, 10)}é${good.slice(11)}`,
      `${good.slice(0, 10)}|${good.slice(11)}`,
    ]) {
      expect(decodeForecast(bad)).toBeUndefined();
    }
  });
});
