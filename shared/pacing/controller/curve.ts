/**
 * Building the target curve E(t) of a plan-day (pure). E is piecewise linear with knots at the
 * anchor and at every hour boundary after it; between knots it grows with the slot's weight (the
 * forecast demand of that local hour), so spend is planned where the traffic is.
 *
 * Anchoring: E passes through (anchorMs, anchorMicros) and ends at (day end, budget). It is
 * anchored once per plan-day and re-anchored only on the events listed in docs/pacing.md
 * ("Controller" → "When E(t) is re-anchored"); between them the curve object is the same.
 */
import type { DayWindow } from '../../budget/time-zone.js';
import { type CurvePoints, curveSegment } from '../types.js';
import { type DaySlots, slotAt } from './day-slots.js';

/** E(t) = `micros` from `fromMs` to the day's end (ASAP plans, spent or cut budgets). */
export function flatCurve(fromMs: number, endMs: number, micros: number): CurvePoints {
  return fromMs < endMs
    ? { atMs: [fromMs, endMs], micros: [micros, micros] }
    : { atMs: [endMs], micros: [micros] };
}

/** The linear day curve E(t) = budget × elapsed / day length (the fail-safe and the guard's default). */
export function linearDayCurve(day: DayWindow, budgetMicros: number): CurvePoints {
  return { atMs: [day.startMs, day.endMs], micros: [0, budgetMicros] };
}

/** {@link linearDayCurve} at `nowMs` without building it (the guard's default, on every lease). */
export function linearExpected(budgetMicros: number, day: DayWindow, nowMs: number): number {
  if (nowMs <= day.startMs) return 0;
  if (nowMs >= day.endMs) return budgetMicros;
  return Math.floor((budgetMicros * (nowMs - day.startMs)) / (day.endMs - day.startMs));
}

/**
 * What a pacing mode's curve function gets when the controller (re-)anchors a plan-day's E(t)
 * (shared/pacing/modes.ts, `curve`): the curve must pass through (fromMs, anchorMicros), end at
 * (slots.endMs, budgetMicros), never decrease, and have strictly increasing instants.
 */
export interface ModeCurveInput {
  /** The plan-day's hour slots (knots at every hour boundary). */
  readonly slots: DaySlots;
  /**
   * The forecast's weight of every slot (its full-speed demand × its length), for modes that are
   * `shaped`; undefined for the others, or when no profile could be computed.
   */
  readonly weights: readonly number[] | undefined;
  /**
   * The plan's own curve (mode `curve`): the weight of each quarter hour of the day from
   * `slots.startMs`, 0 outside a dayparted plan's windows; undefined for other plans.
   */
  readonly quarters?: Float64Array | undefined;
  /** The anchor's instant (never before the day's start), epoch ms. */
  readonly fromMs: number;
  readonly anchorMicros: number;
  readonly budgetMicros: number;
}

/** `even`: the remainder spread over the slots ahead by the forecast's weights. */
export function evenCurve(c: ModeCurveInput): CurvePoints {
  return c.weights
    ? buildCurve(c.slots, c.weights, c.fromMs, c.anchorMicros, c.budgetMicros)
    : flatCurve(c.fromMs, c.slots.endMs, c.budgetMicros);
}

/** `asap`: the whole budget from the anchor on. */
export function asapCurve(c: ModeCurveInput): CurvePoints {
  return flatCurve(c.fromMs, c.slots.endMs, c.budgetMicros);
}

/**
 * E(t) from the anchor to the day's end over the weighted hour slots: E(anchor) = anchorMicros,
 * E(end) = budget, in between the remainder spread in proportion to the slot weights. A budget at
 * or below the anchor value gives a flat curve at the budget (nothing more to spend).
 */
export function buildCurve(
  slots: DaySlots,
  weights: readonly number[],
  anchorMs: number,
  anchorMicros: number,
  budgetMicros: number,
): CurvePoints {
  const { knots } = slots;
  const n = slots.hours.length;
  const from = Math.max(anchorMs, slots.startMs);
  if (anchorMicros >= budgetMicros || from >= slots.endMs) return flatCurve(from, slots.endMs, budgetMicros);
  const a = slotAt(slots, from);
  const slotLen = (knots[a + 1] as number) - (knots[a] as number);
  // Weight still ahead in the anchor's slot, then the whole slots after it.
  const first = ((weights[a] as number) * ((knots[a + 1] as number) - from)) / slotLen;
  let total = first;
  for (let k = a + 1; k < n; k++) total += weights[k] as number;
  // Weights that sum to nothing (never from dayProfile, which falls back to slot lengths) must not
  // publish the whole budget at once: spread it in proportion to time instead.
  if (!(total > 0)) return buildCurve(slots, slotLengths(slots), anchorMs, anchorMicros, budgetMicros);
  const rest = budgetMicros - anchorMicros;
  const atMs: number[] = [from];
  const micros: number[] = [anchorMicros];
  let cum = first;
  for (let k = a + 1; k <= n; k++) {
    atMs.push(knots[k] as number);
    micros.push(k === n ? budgetMicros : anchorMicros + Math.floor((rest * cum) / total));
    if (k < n) cum += weights[k] as number;
  }
  return { atMs, micros };
}

/** Every slot's length in hours (the weights of a curve linear in time). */
function slotLengths(slots: DaySlots): number[] {
  const out: number[] = [];
  for (let k = 0; k < slots.hours.length; k++)
    out.push(((slots.knots[k + 1] as number) - (slots.knots[k] as number)) / 3_600_000);
  return out;
}

/** Slope of the curve at `nowMs` (micros per ms; 0 before the first and after the last knot). */
export function curveSlope(curve: CurvePoints, nowMs: number): number {
  const { atMs, micros } = curve;
  const n = atMs.length;
  if (n < 2 || nowMs < (atMs[0] as number) || nowMs >= (atMs[n - 1] as number)) return 0;
  const lo = curveSegment(curve, nowMs);
  const hi = lo + 1;
  return ((micros[hi] as number) - (micros[lo] as number)) / ((atMs[hi] as number) - (atMs[lo] as number));
}
