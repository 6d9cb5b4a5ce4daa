/**
 * The scorer's reference for "ahead": the curve a pacer that knows the market's traffic shape
 * would publish — the plan's budget spread over its day (from its creation) in proportion to the
 * market's expected requests (the scenario's hourly shape). Not its events (spikes, outages) nor
 * minute or day noise, which nobody can foresee: against a curve that knew a 3 pm spike, every
 * pacer would count the spike's share of the day as "ahead" all morning. Independent of what the
 * pacer published, so spending ahead of the traffic (a burst after midnight, a flat first-day
 * curve at night) shows even where the published curve let it through.
 */
import type { DayWindows } from '../shared/budget/daypart.js';
import type { DayWindow } from '../shared/budget/time-zone.js';
import { AHEAD_FACTOR } from '../shared/pacing/controller/mode-curves.js';
import type { PacingMode } from '../shared/pacing/modes.js';
import { localHourOf, shapeAt, shapeMean } from './market/index.js';
import type { Scenario } from './scenario.js';

const MINUTE = 60_000;

/** Cumulative expected requests of a day, minute by minute: `at(t)` ∈ [0, total]. */
export interface TrafficDay {
  readonly startMs: number;
  readonly endMs: number;
  /** Expected requests in [startMs, t). */
  at(t: number): number;
}

/** A memo of {@link TrafficDay}s per day window of the scenario's traffic. */
export function idealTraffic(scenario: Scenario): (day: DayWindow) => TrafficDay {
  const t = scenario.traffic;
  const mean = shapeMean(t.shape);
  const days = new Map<number, TrafficDay>();
  const expected = (minuteMs: number) =>
    shapeAt(t.shape, localHourOf(minuteMs + 30_000, scenario.timeZone)) / mean;
  return (day) => {
    const hit = days.get(day.startMs);
    if (hit && hit.endMs === day.endMs) return hit;
    const n = Math.ceil((day.endMs - day.startMs) / MINUTE);
    const cum = new Float64Array(n + 1);
    for (let i = 0; i < n; i++) cum[i + 1] = (cum[i] as number) + expected(day.startMs + i * MINUTE);
    const traffic: TrafficDay = {
      startMs: day.startMs,
      endMs: day.endMs,
      at(x) {
        const m = (x - day.startMs) / MINUTE;
        if (m <= 0) return 0;
        if (m >= n) return cum[n] as number;
        const i = Math.floor(m);
        return (cum[i] as number) + ((cum[i + 1] as number) - (cum[i] as number)) * (m - i);
      },
    };
    days.set(day.startMs, traffic);
    return traffic;
  };
}

/**
 * The traffic of `traffic`'s day counted only while the windows `w` are open: a dayparted plan's
 * ideal follows the traffic it may bid on (docs/spend.md, "Dayparting").
 */
export function openTraffic(traffic: TrafficDay, w: DayWindows): TrafficDay {
  const s = w.spans;
  return {
    startMs: traffic.startMs,
    endMs: traffic.endMs,
    at(x) {
      let total = 0;
      for (let i = 0; i < s.length; i += 2) {
        const a = s[i] as number;
        if (x <= a) break;
        total += traffic.at(Math.min(x, s[i + 1] as number)) - traffic.at(a);
      }
      return total;
    },
  };
}

/**
 * The pace of each mode's ideal against the traffic: its share of the budget runs this many times
 * the traffic's share, capped at 1 (`ahead`: 1.2, as its curve runs `even`'s). ASAP's reference is
 * the traffic-following curve (so is `asap-hourly`'s), so the report's "ahead" for them is their lead
 * over the traffic.
 */
export const IDEAL_PACE: Readonly<Record<PacingMode, number>> = {
  even: 1,
  asap: 1,
  ahead: AHEAD_FACTOR,
  'asap-hourly': 1,
  // Within a day `front-loaded` is paced like `even`; its lead is across the flight's days.
  'front-loaded': 1,
  // A `curve` plan's ideal is its own curve (`curveTraffic`), at its pace.
  curve: 1,
};

/**
 * A `curve` plan's ideal: its own curve's quarter-hour weights on the day as the "traffic" it
 * follows, so its lead is measured against the curve the buyer gave.
 */
export function curveTraffic(quarters: Float64Array, day: DayWindow): TrafficDay {
  const Q = 900_000;
  const cum = new Float64Array(quarters.length + 1);
  for (let q = 0; q < quarters.length; q++) cum[q + 1] = (cum[q] as number) + (quarters[q] as number);
  return {
    startMs: day.startMs,
    endMs: day.endMs,
    at(x) {
      if (x <= day.startMs) return 0;
      if (x >= day.endMs) return cum[quarters.length] as number;
      const i = Math.floor((x - day.startMs) / Q);
      const frac = Math.min(1, (x - day.startMs - i * Q) / Math.min(Q, day.endMs - day.startMs - i * Q));
      return (cum[i] as number) + ((cum[i + 1] as number) - (cum[i] as number)) * frac;
    },
  };
}

/**
 * The ideal curve of one plan-day, re-anchored like the controller's on a budget change: it
 * passes through (anchor, value) and reaches the budget at the day's end in proportion to the
 * expected traffic in between.
 */
export class IdealCurve {
  private anchorMs: number;
  private anchorMicros = 0;
  private budget: number;

  constructor(
    private readonly traffic: TrafficDay,
    fromMs: number,
    budgetMicros: number,
    private readonly pace = 1,
  ) {
    this.anchorMs = Math.max(fromMs, traffic.startMs);
    this.budget = budgetMicros;
  }

  /** E*(t) under the budget in force; a changed budget re-anchors at (t, E*(t)), capped at it. */
  at(t: number, budgetMicros: number): number {
    if (budgetMicros !== this.budget) {
      const now = this.value(t);
      this.anchorMs = Math.max(this.anchorMs, t);
      this.anchorMicros = Math.min(now, budgetMicros);
      this.budget = budgetMicros;
    }
    return this.value(t);
  }

  private value(t: number): number {
    if (t <= this.anchorMs) return this.anchorMicros;
    const a = this.traffic.at(this.anchorMs);
    const total = this.traffic.at(this.traffic.endMs) - a;
    if (!(total > 0)) return this.budget;
    const share = Math.min(1, (this.pace * (this.traffic.at(t) - a)) / total);
    return this.anchorMicros + (this.budget - this.anchorMicros) * share;
  }
}
