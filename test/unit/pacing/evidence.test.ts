/**
 * How much an hour's observation counts: the ticks with new spend behind it (the state's
 * `accEvents`, carried in the stored seconds field so a leader of the version before still reads
 * the state), the credibility they give its cover, and a first own day's hours weighed by that
 * cover against their neighbours and the prior rescaled to the day.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { type ResolvedPlan, resolvePlan } from '../../../shared/budget/model.js';
import { dayWindowOf } from '../../../shared/budget/time-zone.js';
import { ControllerConfigError, defaultControllerConfig } from '../../../shared/pacing/controller/config.js';
import {
  foldObservations,
  isPriorOnly,
  levelOf,
  NEIGHBOUR_HOURS,
  PRIOR_HOURS,
  quantiseLevel,
  withObservation,
} from '../../../shared/pacing/controller/forecast.js';
import { type ControllerState, createPacingController } from '../../../shared/pacing/controller/index.js';
import { priorForecast } from '../../../shared/pacing/controller/prior.js';
import { olderDecodeState } from '../../fixtures/pacing/older-leader.js';

const H = 3_600_000;
const TZ = 'UTC';
const DAY = dayWindowOf('2026-11-16', TZ);
const ctl = createPacingController({ builtInShape: null });

function planOf(budget: number): ResolvedPlan {
  return resolvePlan(
    { level: 'campaign', accountId: 'a', campaignId: 'c', dailyBudgetMicros: budget, pacingMode: 'even' },
    TZ,
  );
}

/**
 * Steps a $100 plan tick by tick through hour 1 (from 00:59:50 to 02:00:10), spending 1,000 micros
 * on every `every`-th tick inside hour 1 (never: 0); the states after each tick, and the number of
 * intervals the controller learned from (its seconds grew) that saw new spend.
 */
function runHour(every: number, controller = ctl): { states: ControllerState[]; withSpend: number } {
  const plan = planOf(100_000_000);
  let s: ControllerState | undefined;
  let spent = 0;
  let withSpend = 0;
  const states: ControllerState[] = [];
  for (let t = DAY.startMs + H - 10_000, i = 0; t <= DAY.startMs + 2 * H + 10_000; t += 10_000, i++) {
    const before = s;
    const spends = every > 0 && t > DAY.startMs + H && t < DAY.startMs + 2 * H && i % every === 0;
    if (spends) spent += 1000;
    const r = controller.step(
      {
        plan,
        day: DAY,
        nowMs: t,
        spend: { initialised: true, confirmedMicros: spent, inFlightMicros: 0, leasedMicros: 0 },
      },
      s,
      undefined,
    );
    s = r.state;
    if (spends && before?.accSlot === 1 && s.accSlot === 1 && s.accSeconds > before.accSeconds) withSpend++;
    states.push(s);
  }
  return { states, withSpend };
}

describe('ticks with spend, stored in the seconds field', () => {
  const base = runHour(6).states.at(-2) as ControllerState;

  it('counts the learned intervals of the slot that saw new spend, from 0 at each slot', () => {
    const { states, withSpend } = runHour(6);
    const last = states.filter((s) => s.accSlot === 1).at(-1) as ControllerState;
    // 360 ten-second intervals in the hour, spend in every sixth; the first ones of the plan-day
    // (anchored at 00:59:50, E not yet above the margin) are not learned from.
    expect(withSpend).toBeGreaterThan(50);
    expect(last.accEvents).toBe(withSpend);
    expect(last.accSeconds).toBeGreaterThan(3000);
    const after = states.at(-1) as ControllerState;
    expect(after.accSlot).toBe(2);
    expect(after.accEvents).toBe(0);
  });

  it('round-trips, and writes seconds + 1,000,000 × (ticks + 1) in the field', () => {
    for (const [accSeconds, accEvents, field] of [
      [1234, 2, '3001234'],
      [0, 0, '1000000'],
      [3600, 360, '361003600'],
      [1234, -1, '1234'],
    ] as const) {
      const s = { ...base, accSlot: 3, accSeconds, accEvents } as ControllerState;
      const text = ctl.encodeState(s);
      expect(text.split(',')[15]).toBe(field);
      expect(ctl.decodeState(text)).toEqual(s);
    }
  });

  it('reads a state of the earlier format (seconds only) with its ticks unknown (−1)', () => {
    const fixture = JSON.parse(
      readFileSync(new URL('../../fixtures/pacing/encodings-f1.json', import.meta.url), 'utf8'),
    ) as { snapshots: { name: string; state: string }[] };
    for (const snap of fixture.snapshots) {
      const s = ctl.decodeState(snap.state) as ControllerState;
      expect(s.accEvents, snap.name).toBe(-1);
      expect(s.accSeconds, snap.name).toBe(Number(snap.state.split(',')[15]));
      expect(ctl.encodeState(s)).toBe(snap.state);
    }
  });

  it('stays readable by the older leader: the same 19 fields, only the seconds field differs', () => {
    const s = { ...base, accSlot: 3, accSeconds: 1234, accEvents: 7 } as ControllerState;
    const older = olderDecodeState(ctl.encodeState(s));
    expect(older).toBeDefined();
    const same = olderDecodeState(ctl.encodeState({ ...s, accEvents: -1 } as ControllerState));
    expect(older?.values.length).toBe(same?.values.length);
    older?.values.forEach((v, i) => {
      if (i === 14) expect(v).toBe(8_001_234);
      else expect(v, `field ${i}`).toBe(same?.values[i]);
    });
  });

  it('refuses a negative seconds field', () => {
    const text = ctl.encodeState({ ...base, accSlot: 3, accSeconds: 5, accEvents: -1 } as ControllerState);
    const parts = text.split(',');
    parts[15] = '-5';
    expect(ctl.decodeState(parts.join(','))).toBeUndefined();
  });
});

describe('credibility of an hour', () => {
  /** Hour 1's observation when spend came every `every`-th tick: its cover, and what it should be. */
  const coverOf = (every: number, controller = ctl, k = 6) => {
    const { states } = runHour(every, controller);
    const s = states.at(-1) as ControllerState;
    expect(s.pendSlot).toBe(1);
    // The slot closed at 02:00:00 with one more learned interval (no spend) than its last state.
    const last = states.filter((x) => x.accSlot === 1).at(-1) as ControllerState;
    const n = last.accEvents;
    const share = Math.min(1, (last.accSeconds + 10) / 3600);
    return {
      cover: s.pendCover,
      n,
      expected: Math.max(1, Math.round(32 * share * (k === 0 ? 1 : n / (n + k)))),
    };
  };

  it('is n / (n + evidenceTicks) of the uncensored share, at least 1/32', () => {
    // Spend every tick (n ≈ 350), every 6th (≈ 58), every 180th (2), never (0: the floor, 1/32).
    for (const every of [1, 6, 180, 0]) {
      const { cover, n, expected } = coverOf(every);
      expect(cover, `every ${every}: n = ${n}`).toBe(expected);
    }
    expect(coverOf(1).cover).toBeGreaterThanOrEqual(30);
    expect(coverOf(180).cover).toBeLessThanOrEqual(8);
    expect(coverOf(0).cover).toBe(1);
    // evidenceTicks 0: every observed hour at its full share.
    const full = coverOf(180, createPacingController({ builtInShape: null, evidenceTicks: 0 }), 0);
    expect(full.cover).toBe(full.expected);
    expect(full.cover).toBeGreaterThanOrEqual(30);
  });

  it('refuses an evidenceTicks that is negative or not finite', () => {
    for (const v of [-1, Number.NaN, Number.POSITIVE_INFINITY])
      expect(() => createPacingController({ evidenceTicks: v })).toThrow(ControllerConfigError);
  });
});

describe('a first own day', () => {
  it('weighs a thin hour against its observed neighbours and the prior rescaled to the day', () => {
    const base = priorForecast(
      Array.from({ length: 24 }, () => 1),
      24_000,
    );
    const p = levelOf(base.hourOfDay[0] as number) as number;
    // Sixteen hours at 2× the prior's level, fully covered; hour 12 at 10× on a thin cover (8/32).
    let f = base;
    for (let h = 4; h < 20; h++)
      f = withObservation(
        f,
        {
          day: '2026-11-20',
          slot: h,
          level: quantiseLevel(h === 12 ? 10 * p : 2 * p),
          cover: h === 12 ? 8 : 32,
        },
        TZ,
        defaultControllerConfig,
      );
    const folded = foldObservations(f, TZ, defaultControllerConfig);
    const at = (h: number) => (levelOf(folded.hourOfDay[h] as number) as number) / p;
    expect(NEIGHBOUR_HOURS).toBe(2);
    // Hour 12 is first cut to FIRST_DAY_PEAK × the median (3 × 2 = 6); the prior rescaled to the
    // day is (15 × 2 + 6) / 16 = 2.25. Its neighbours 10–14 and the prior: (PRIOR_HOURS × 2.25 +
    // 4 × 2 + ¼ × 6) / (PRIOR_HOURS + 4¼); a quarter of 6 and three quarters of that.
    const near = (PRIOR_HOURS * 2.25 + 4 * 2 + 0.25 * 6) / (PRIOR_HOURS + 4.25);
    expect(at(12)).toBeCloseTo(0.25 * 6 + 0.75 * near, 1);
    expect(at(8)).toBeCloseTo(2, 1);
    // Hours not observed stay unknown; the day is the plan's own now.
    expect(at(2)).toBeNaN();
    expect(isPriorOnly(folded)).toBe(false);
  });

  it('leaves the prior as it was when it spent nothing (partial or whole)', () => {
    const shape = Array.from({ length: 24 }, (_, h) => (h >= 8 && h < 20 ? 2 : 1));
    const base = priorForecast(shape, 24_000);
    // No spend in the observed hours: cover 1/32 (memo.ts: no ticks with spend).
    const fold = (hoursSeen: readonly number[]) => {
      let f = base;
      for (const h of hoursSeen)
        f = withObservation(
          f,
          { day: '2026-11-20', slot: h, level: quantiseLevel(0), cover: 1 },
          TZ,
          defaultControllerConfig,
        );
      return foldObservations(f, TZ, defaultControllerConfig);
    };
    for (const seen of [[21, 22, 23], Array.from({ length: 24 }, (_, h) => h)]) {
      const folded = fold(seen);
      expect(folded.hourOfDay).toEqual(base.hourOfDay);
      expect(isPriorOnly(folded)).toBe(true);
    }
  });
});
