/**
 * A buyer's own delivery curve (pacing mode `curve`; docs/spend.md, "Custom curves"): the share
 * of the day's budget due in each local hour (24 points) or quarter hour (96 points), summing
 * to 1. Pure functions: validation, the CLI's file form, and each quarter hour's weight on a
 * plan-day (by its local time in the account's zone, so a 23- or 25-hour day keeps the buyer's
 * clock: a skipped hour's share goes to the others in proportion, a repeated hour counts twice).
 */
import { errorKind } from '../errors.js';
import { quarterLabels } from './daypart.js';
import type { DayWindow } from './time-zone.js';

/** Points a curve may have: one per hour or one per quarter hour of the local day. */
export const CURVE_POINTS = [24, 96] as const;

/** How far the points' sum may be from 1 (they are decimals a buyer typed or exported). */
export const CURVE_SUM_TOLERANCE = 1e-6;

/** Thrown for a curve file that cannot be read; the message says what to give. */
export class PlanCurveError extends errorKind('PlanCurveError', 'budget.curve') {}

/** Why `points` is not a curve (undefined when it is one). */
export function planCurveProblem(points: unknown): string | undefined {
  if (!Array.isArray(points) || !(CURVE_POINTS as readonly number[]).includes(points.length)) {
    const n = Array.isArray(points) ? points.length : typeof points;
    return `a curve has 24 points (one per local hour) or 96 (one per quarter hour), got ${n}.`;
  }
  const bad = points.findIndex((x) => typeof x !== 'number' || !Number.isFinite(x) || x < 0);
  if (bad >= 0) return `point ${bad} (${JSON.stringify(points[bad])}) is not a share ≥ 0.`;
  const sum = (points as number[]).reduce((a, b) => a + b, 0);
  if (Math.abs(sum - 1) > CURVE_SUM_TOLERANCE) {
    return `the points sum to ${Number(sum.toFixed(6))}, not 1: give each hour's (or quarter's) share of the day, e.g. 0.05 for 5 %.`;
  }
  return undefined;
}

/**
 * A curve from a file's text: a JSON array of numbers, or one number per line (blank lines and
 * `#` comments skipped). Throws {@link PlanCurveError} naming what is wrong.
 */
export function parsePlanCurveText(text: string): number[] {
  const trimmed = text.trim();
  let points: unknown;
  if (trimmed.startsWith('[')) {
    try {
      points = JSON.parse(trimmed);
    } catch (error) {
      throw new PlanCurveError(`the curve is not a JSON array of numbers (${(error as Error).message}).`);
    }
  } else {
    points = trimmed
      .split('\n')
      .map((l) => l.replace(/#.*/, '').trim())
      .filter((l) => l.length > 0)
      .map((l) => (/^\d+(\.\d+)?$/.test(l) ? Number(l) : l));
  }
  const problem = planCurveProblem(points);
  if (problem) throw new PlanCurveError(problem);
  return points as number[];
}

const weights = new WeakMap<readonly number[], { key: string; w: Float64Array }>();

/**
 * The curve's weight of each quarter hour of the plan-day (the quarter's point, or its hour's
 * point ÷ 4, by its local time in `zone`); memoised per curve and day.
 */
export function planCurveQuarterWeights(
  points: readonly number[],
  zone: string,
  day: DayWindow,
): Float64Array {
  const key = `${zone}|${day.startMs}|${day.endMs}`;
  const hit = weights.get(points);
  if (hit?.key === key) return hit.w;
  const labels = quarterLabels(zone, day.startMs, day.endMs);
  const w = new Float64Array(labels.length);
  for (let q = 0; q < labels.length; q++) {
    const quarter = (labels[q] as number) % 96;
    w[q] = points.length === 96 ? (points[quarter] as number) : (points[quarter >> 2] as number) / 4;
  }
  weights.set(points, { key, w });
  return w;
}

/** A fingerprint of the points (a changed curve re-plans the rest of the day). */
export function planCurveHash(points: readonly number[]): number {
  let h = 0x811c9dc5;
  for (const x of points) h = Math.imul(h ^ Math.round(x * 1e9), 0x01000193);
  return h >>> 0;
}
