/**
 * Curves of dayparted plans (docs/spend.md, "Dayparting"; shared/budget/daypart.ts): E(t) rises
 * only while a window is open and is flat in between, so the guard — which also refuses every bid
 * outside the windows — never leases against time the plan may not spend in. Pure functions.
 */
import { type DayWindows, openTimeBetween, planDayWindows } from '../budget/daypart.js';
import type { ResolvedPlan } from '../budget/model.js';
import type { DayWindow } from '../budget/time-zone.js';
import { daySlots } from './controller/day-slots.js';
import { customCurve } from './controller/mode-curves.js';
import { planShapeOf } from './controller/step-parts.js';
import { safeCurvesOf } from './modes.js';
import { type CurvePoints, evaluateCurve } from './types.js';

/**
 * `curve` with each rise between two knots spread over the open time between them (in proportion
 * to it), flat where the windows are closed. A rise between knots with no open time at all moves
 * to the next knots that have some; a rise with no open time after it is dropped (E ends below the
 * budget: nothing can be spent after the last window). Never above the curve's last value.
 */
export function restrictCurve(curve: CurvePoints, w: DayWindows): CurvePoints {
  const { atMs, micros } = curve;
  const n = atMs.length;
  if (n < 2) return curve;
  const outT: number[] = [atMs[0] as number];
  const outV: number[] = [micros[0] as number];
  const push = (t: number, v: number) => {
    if (t > (outT[outT.length - 1] as number)) {
      outT.push(t);
      outV.push(v);
    }
  };
  let value = micros[0] as number;
  let carry = 0;
  for (let i = 0; i + 1 < n; i++) {
    const t0 = atMs[i] as number;
    const t1 = atMs[i + 1] as number;
    const rise = (micros[i + 1] as number) - (micros[i] as number) + carry;
    const open = openTimeBetween(w, t0, t1);
    if (open <= 0 || rise <= 0) {
      carry = rise > 0 ? rise : 0;
      push(t1, value);
      continue;
    }
    carry = 0;
    const base = value;
    let seen = 0;
    const s = w.spans;
    for (let k = 0; k < s.length; k += 2) {
      const a = Math.max(t0, s[k] as number);
      const b = Math.min(t1, s[k + 1] as number);
      if (b <= a) continue;
      push(a, value);
      seen += b - a;
      value = seen >= open ? base + rise : base + Math.floor((rise * seen) / open);
      push(b, value);
    }
    push(t1, value);
  }
  return { atMs: outT, micros: outV };
}

const safe = new WeakMap<object, { startMs: number; budget: number; curve: CurvePoints }>();

/**
 * The plan's fail-safe E(t) over `day` (its mode's, shared/pacing/modes.ts), restricted to its
 * windows when it is dayparted: linear over the open time for `even`.
 */
export function planFailSafeCurve(
  plan: Pick<ResolvedPlan, 'pacingMode' | 'daypart' | 'timeZone' | 'curve'>,
  day: DayWindow,
  budgetMicros: number,
): CurvePoints {
  const w = plan.daypart && plan.timeZone ? planDayWindows(plan, day) : undefined;
  if (!w && !plan.curve) return safeCurvesOf(plan.pacingMode).failSafeCurve(day, budgetMicros);
  const hit = safe.get(plan);
  if (hit && hit.startMs === day.startMs && hit.budget === budgetMicros) return hit.curve;
  // A plan with its own curve: that curve from the day's start (restricted to the windows by
  // its weights); otherwise the mode's fail-safe restricted to the windows.
  const curve = plan.curve
    ? customCurve({
        slots: daySlots(plan.timeZone, day),
        weights: undefined,
        quarters: planShapeOf(plan as ResolvedPlan, day, w).quarters,
        fromMs: day.startMs,
        anchorMicros: 0,
        budgetMicros,
      })
    : restrictCurve(safeCurvesOf(plan.pacingMode).failSafeCurve(day, budgetMicros), w as DayWindows);
  safe.set(plan, { startMs: day.startMs, budget: budgetMicros, curve });
  return curve;
}

/** {@link planFailSafeCurve} at `nowMs`: the guard's default E(t) (built only for a dayparted plan). */
export function planDefaultExpected(plan: ResolvedPlan, day: DayWindow, nowMs: number): number {
  if (!plan.daypart && !plan.curve)
    return safeCurvesOf(plan.pacingMode).defaultExpectedMicros(plan.dailyBudgetMicros, day, nowMs);
  return evaluateCurve(planFailSafeCurve(plan, day, plan.dailyBudgetMicros), nowMs);
}
