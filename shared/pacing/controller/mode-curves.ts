/**
 * The curves of the pacing modes beyond `even` and `asap` (pure). `asap-hourly` is ASAP under a
 * cap per hour slot: its curve rises at the cap's rate from an anchor the controller moves to every
 * slot's start (`hourly` in the mode registry). `ahead` runs a fixed share ahead of `even`. It
 * keeps the traffic shape: a monotone remapping of the `even` curve's values, so where `even`
 * plans little (the night) it plans little too. Its pace relative to the demand is
 * constant until the budget is reached, which is what keeps the forecast's learning unbiased (a
 * mode whose pace against `even` changes during the day would teach the forecast a distorted shape
 * through the controller's assumed elasticity κ; docs/pacing.md, "Pacing modes").
 */
import type { DayWindow } from '../../budget/time-zone.js';
import { type CurvePoints, evaluateCurve } from '../types.js';
import { evenCurve, flatCurve, linearDayCurve, type ModeCurveInput } from './curve.js';

/** `ahead` spends at this multiple of `even`'s pace until the budget is reached (DV360's "ahead": 120 %). */
export const AHEAD_FACTOR = 1.2;

/** `front-loaded`'s first half of a flight is due this multiple of even's half (Ad Manager: 125 %). */
export const FRONT_LOADED_FIRST_HALF = 1.25;

/**
 * `front-loaded`'s flight schedule: φ(x) = x + a·x·(1 − x) with a = 2·(1.25 − 1) = 0.5, so
 * φ(½) = 1.25 × ½. Its day pace falls linearly from 1 + a = 1.5 × even on the first day to
 * 1 − a = 0.5 × even on the last. Within each day the plan is paced like `even`: the pace against
 * the traffic is constant all day, which keeps the forecast's learning unbiased (module doc).
 */
export function frontLoadedSchedule(x: number): number {
  const a = 2 * (FRONT_LOADED_FIRST_HALF - 1);
  const c = Math.min(1, Math.max(0, x));
  return c + a * c * (1 - c);
}

/** `asap-hourly` may spend this multiple of the even hourly share in any hour slot (DV360: 10 ×). */
export const ASAP_HOURLY_FACTOR = 10;

/** `asap-hourly`'s cap per hour, micros: {@link ASAP_HOURLY_FACTOR} × budget × 1 h ÷ the day's length. */
export function hourlyCapMicros(budgetMicros: number, day: { startMs: number; endMs: number }): number {
  return Math.floor((ASAP_HOURLY_FACTOR * budgetMicros * 3_600_000) / (day.endMs - day.startMs));
}

/**
 * E(t) rising from the anchor at the hourly cap's rate, flat at the budget once reached. The
 * controller re-anchors it at every hour slot's start at the spend before it, so each hour's spend
 * is bounded by the cap (the part of the anchor's slot left gets that part of the cap).
 */
function capRateCurve(
  fromMs: number,
  endMs: number,
  anchor: number,
  budget: number,
  cap: number,
): CurvePoints {
  if (anchor >= budget || fromMs >= endMs || !(cap > 0)) return flatCurve(fromMs, endMs, budget);
  const fullAt = fromMs + Math.ceil(((budget - anchor) * 3_600_000) / cap);
  if (fullAt >= endMs) {
    const atEnd = anchor + Math.floor((cap * (endMs - fromMs)) / 3_600_000);
    return { atMs: [fromMs, endMs], micros: [anchor, Math.min(budget, atEnd)] };
  }
  return { atMs: [fromMs, fullAt, endMs], micros: [anchor, budget, budget] };
}

/** `asap-hourly`: see {@link capRateCurve}. */
export function asapHourlyCurve(c: ModeCurveInput): CurvePoints {
  const cap = hourlyCapMicros(c.budgetMicros, c.slots);
  return capRateCurve(c.fromMs, c.slots.endMs, c.anchorMicros, c.budgetMicros, cap);
}

/**
 * {@link asapHourlyCurve} without a controller (the fail-safe and the guard's default): the cap's
 * rate from the day's start, the running total of full hours — at or above what the hourly curve
 * allows by any instant, never above the budget.
 */
export function asapHourlyDayCurve(day: DayWindow, budgetMicros: number): CurvePoints {
  return capRateCurve(day.startMs, day.endMs, 0, budgetMicros, hourlyCapMicros(budgetMicros, day));
}

/**
 * The first instant at which a monotone curve reaches `micros` (the last knot when it never does):
 * where a remapped curve gets a knot so that its cap at the budget is exact, not interpolated.
 */
export function timeAtValue(curve: CurvePoints, micros: number): number {
  const { atMs, micros: v } = curve;
  const n = atMs.length;
  if (n === 0) return 0;
  if ((v[0] as number) >= micros) return atMs[0] as number;
  for (let i = 1; i < n; i++) {
    const v1 = v[i] as number;
    if (v1 >= micros) {
      const v0 = v[i - 1] as number;
      const t0 = atMs[i - 1] as number;
      const t1 = atMs[i] as number;
      return Math.min(t1, Math.ceil(t0 + ((t1 - t0) * (micros - v0)) / (v1 - v0)));
    }
  }
  return atMs[n - 1] as number;
}

/**
 * The curve `base` with one extra knot at `extra` (when inside its span) and every value put
 * through `map(atMs, micros)`, which must be non-decreasing along the curve and integer-valued for
 * the result to be a valid E(t).
 */
function remap(base: CurvePoints, extra: number, map: (atMs: number, micros: number) => number): CurvePoints {
  const first = base.atMs[0] as number;
  const last = base.atMs[base.atMs.length - 1] as number;
  const times = new Set<number>(base.atMs);
  if (extra > first && extra < last) times.add(extra);
  const atMs = [...times].sort((a, b) => a - b);
  return { atMs, micros: atMs.map((t) => map(t, evaluateCurve(base, t))) };
}

/**
 * `ahead`: from the anchor, `even`'s curve run {@link AHEAD_FACTOR} times as fast, flat at the
 * budget once reached (after about 1 / 1.2 of the day's traffic). A re-anchor (budget change) runs
 * the rest ahead of the rest's `even` curve.
 */
export function aheadCurve(c: ModeCurveInput): CurvePoints {
  return stretch(evenCurve(c), c.anchorMicros, c.budgetMicros, AHEAD_FACTOR);
}

/** `base` (anchored at `anchor`, ending at `budget`) run `factor` times as fast, capped at the budget. */
function stretch(base: CurvePoints, anchor: number, budget: number, factor: number): CurvePoints {
  if (budget <= anchor) return base;
  const capAt = timeAtValue(base, anchor + (budget - anchor) / factor);
  // From the knot at which it reaches the budget on, the budget (not the floor of an interpolation
  // a micro below it).
  return remap(base, capAt, (t, v) =>
    t >= capAt ? budget : Math.min(budget, Math.floor(anchor + factor * (v - anchor))),
  );
}

/** {@link aheadCurve} without a forecast: the linear day curve run 1.2 times as fast (the fail-safe). */
export function aheadDayCurve(day: DayWindow, budgetMicros: number): CurvePoints {
  return stretch(linearDayCurve(day, budgetMicros), 0, budgetMicros, AHEAD_FACTOR);
}

const QUARTER_MS = 900_000;

/**
 * `curve`: from the anchor, the remainder spread over the quarter hours ahead by the plan's own
 * curve (`quarters`: each quarter hour's share, the anchor's quarter by the part of it left), a
 * knot at every quarter hour. Without weights ahead (no curve, or every share ahead 0) E stays at
 * the anchor: the buyer's curve gives that time nothing.
 */
export function customCurve(c: ModeCurveInput): CurvePoints {
  const { slots, fromMs, anchorMicros, budgetMicros } = c;
  const q = c.quarters;
  if (anchorMicros >= budgetMicros || fromMs >= slots.endMs)
    return flatCurve(fromMs, slots.endMs, budgetMicros);
  if (!q) return flatCurve(fromMs, slots.endMs, anchorMicros);
  const first = Math.floor((fromMs - slots.startMs) / QUARTER_MS);
  const edges: number[] = [fromMs];
  const w: number[] = [];
  for (let k = first; k < q.length; k++) {
    const a = Math.max(fromMs, slots.startMs + k * QUARTER_MS);
    const b = Math.min(slots.endMs, slots.startMs + (k + 1) * QUARTER_MS);
    if (b <= a) continue;
    w.push(((q[k] as number) * (b - a)) / QUARTER_MS);
    edges.push(b);
  }
  const total = w.reduce((x, y) => x + y, 0);
  if (!(total > 0)) return flatCurve(fromMs, slots.endMs, anchorMicros);
  const rest = budgetMicros - anchorMicros;
  const atMs = [fromMs];
  const micros = [anchorMicros];
  let cum = 0;
  for (let i = 0; i < w.length; i++) {
    cum += w[i] as number;
    const t = edges[i + 1] as number;
    const v = cum >= total ? budgetMicros : anchorMicros + Math.floor((rest * cum) / total);
    // Zero-share quarters make runs of equal values; one knot per change keeps the curve small.
    if (atMs.length > 1 && micros[micros.length - 1] === v && micros[micros.length - 2] === v) {
      atMs[atMs.length - 1] = t;
    } else {
      atMs.push(t);
      micros.push(v);
    }
  }
  if ((atMs[atMs.length - 1] as number) < slots.endMs) {
    atMs.push(slots.endMs);
    micros.push(budgetMicros);
  }
  return { atMs, micros };
}
