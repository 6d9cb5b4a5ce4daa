/**
 * Target-curve building (pure): hour slots of advertiser days (23 / 24 / 25 h, a zone that skips
 * midnight), curves anchored at a point and ending at the budget, shaped by slot weights.
 */
import { describe, expect, it } from 'vitest';
import { dayWindowOf } from '../../../shared/budget/time-zone.js';
import {
  buildCurve,
  curveSlope,
  flatCurve,
  linearDayCurve,
} from '../../../shared/pacing/controller/curve.js';
import { daySlots, previousDay, slotAt } from '../../../shared/pacing/controller/day-slots.js';
import { evaluateCurve } from '../../../shared/pacing/types.js';

const H = 3_600_000;

describe('day slots', () => {
  it('labels a normal day 0…23 with its weekday', () => {
    const s = daySlots('UTC', dayWindowOf('2026-11-21', 'UTC')); // a Saturday
    expect(s.hours).toEqual(Array.from({ length: 24 }, (_, h) => h));
    expect(new Set(s.weekdays)).toEqual(new Set([5]));
    expect(s.knots).toHaveLength(25);
    expect(s.knots[24]).toBe(s.endMs);
  });

  it('a spring-forward day has 23 slots and skips 02:00; a fall-back day has 25 and repeats 01:00', () => {
    const spring = daySlots('America/Los_Angeles', dayWindowOf('2026-03-08', 'America/Los_Angeles'));
    expect(spring.hours).toEqual([0, 1, ...Array.from({ length: 21 }, (_, i) => i + 3)]);
    const fall = daySlots('America/Los_Angeles', dayWindowOf('2026-11-01', 'America/Los_Angeles'));
    expect(fall.hours).toEqual([0, 1, 1, ...Array.from({ length: 22 }, (_, i) => i + 2)]);
    expect(fall.knots[25]).toBe(fall.endMs);
    expect(new Set(fall.weekdays)).toEqual(new Set([6])); // Sunday
  });

  it('a zone that skips midnight starts its slots at 01:00 (America/Santiago, 2026-09-06)', () => {
    const s = daySlots('America/Santiago', dayWindowOf('2026-09-06', 'America/Santiago'));
    expect(s.hours[0]).toBe(1);
    expect(s.hours).toHaveLength(23);
  });

  it('a half-hour zone keeps hour labels on its own hours (Asia/Kolkata)', () => {
    const s = daySlots('Asia/Kolkata', dayWindowOf('2026-11-21', 'Asia/Kolkata'));
    expect(s.hours).toEqual(Array.from({ length: 24 }, (_, h) => h));
  });

  it('finds the slot of an instant and the previous calendar day', () => {
    const s = daySlots('UTC', dayWindowOf('2026-11-21', 'UTC'));
    expect(slotAt(s, s.startMs)).toBe(0);
    expect(slotAt(s, s.startMs + 5.5 * H)).toBe(5);
    expect(slotAt(s, s.endMs + H)).toBe(23);
    expect(previousDay('2026-03-01')).toBe('2026-02-28');
    expect(previousDay('2026-01-01')).toBe('2025-12-31');
  });
});

describe('buildCurve', () => {
  const day = dayWindowOf('2026-11-21', 'UTC');
  const slots = daySlots('UTC', day);
  const flat = Array.from({ length: 24 }, () => 1);

  it('flat weights from the day start give the linear curve', () => {
    const c = buildCurve(slots, flat, day.startMs, 0, 24_000_000);
    expect(c.atMs).toEqual(slots.knots);
    for (let h = 0; h <= 24; h++) expect(evaluateCurve(c, day.startMs + h * H)).toBe(h * 1_000_000);
    expect(curveSlope(c, day.startMs + 3.2 * H)).toBeCloseTo(1_000_000 / H, 9);
  });

  it('spreads the budget in proportion to the weights (traffic-shaped)', () => {
    const w = flat.map((_, h) => (h >= 8 && h < 20 ? 3 : 1)); // 36 + 12 = 48 units
    const c = buildCurve(slots, w, day.startMs, 0, 48_000_000);
    expect(evaluateCurve(c, day.startMs + 8 * H)).toBe(8_000_000);
    expect(evaluateCurve(c, day.startMs + 20 * H)).toBe(44_000_000);
    expect(curveSlope(c, day.startMs + 12 * H) / curveSlope(c, day.startMs + 2 * H)).toBeCloseTo(3, 9);
  });

  it('passes through its anchor, ends at the budget, and never decreases', () => {
    const anchor = day.startMs + 12 * H + 1234;
    const c = buildCurve(slots, flat, anchor, 7_000_000, 19_000_000);
    expect(c.atMs[0]).toBe(anchor);
    expect(c.micros[0]).toBe(7_000_000);
    expect(c.atMs.at(-1)).toBe(day.endMs);
    expect(c.micros.at(-1)).toBe(19_000_000);
    for (let i = 1; i < c.micros.length; i++) {
      expect(c.atMs[i] as number).toBeGreaterThan(c.atMs[i - 1] as number);
      expect(c.micros[i] as number).toBeGreaterThanOrEqual(c.micros[i - 1] as number);
    }
    // 12 M left over ~12 h: 1 M per whole hour after the anchor's partial slot.
    expect(evaluateCurve(c, day.startMs + 18 * H) - evaluateCurve(c, day.startMs + 17 * H)).toBeCloseTo(
      1_000_000,
      -2,
    );
  });

  it('a budget at or below the anchor gives a flat curve at the budget (nothing more to spend)', () => {
    const c = buildCurve(slots, flat, day.startMs + 12 * H, 9_000_000, 5_000_000);
    expect(c).toEqual(flatCurve(day.startMs + 12 * H, day.endMs, 5_000_000));
    expect(evaluateCurve(c, day.startMs + 20 * H)).toBe(5_000_000);
  });

  it('covers 23- and 25-hour days to their last instant', () => {
    for (const d of ['2026-03-08', '2026-11-01']) {
      const w = dayWindowOf(d, 'America/Los_Angeles');
      const s = daySlots('America/Los_Angeles', w);
      const c = buildCurve(
        s,
        s.hours.map(() => 1),
        w.startMs,
        0,
        1_000_000,
      );
      expect(c.atMs.at(-1)).toBe(w.endMs);
      expect(evaluateCurve(c, w.endMs - 1)).toBeLessThan(1_000_000);
      expect(evaluateCurve(c, w.endMs)).toBe(1_000_000);
      // Linear in real time: half the budget at half the (23 or 25 h) day (knots are floored micros).
      expect(Math.abs(evaluateCurve(c, (w.startMs + w.endMs) / 2) - 500_000)).toBeLessThanOrEqual(1);
    }
  });

  it('the linear day curve equals the guard default', () => {
    const c = linearDayCurve(day, 1_000_000);
    expect(evaluateCurve(c, day.startMs + 6 * H)).toBe(250_000);
    expect(curveSlope(c, day.endMs)).toBe(0);
  });
});
