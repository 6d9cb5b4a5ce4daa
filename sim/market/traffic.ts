/**
 * Bid-request traffic: requests per minute from an hourly shape (local time of the market's time
 * zone), a day level and per-minute noise, sampled as a Poisson count. Deterministic for a seed.
 */
import { errorKind } from '../../shared/errors.js';
import type { Random } from '../../shared/random/prng.js';

/** Relative traffic per local hour (24 values; only ratios matter). */
export type HourlyShape = readonly number[];

/** Traffic shapes used by the tests and scenarios. */
export const SHAPES = {
  /** Flat: every hour alike. */
  flat: Array.from({ length: 24 }, () => 1),
  /** A typical day: night trough (~0.15 of the peak) and a broad midday peak. */
  noonPeak: [
    0.22, 0.15, 0.12, 0.1, 0.1, 0.14, 0.3, 0.55, 0.8, 0.95, 1, 1, 1, 0.98, 0.95, 0.9, 0.85, 0.8, 0.75, 0.7,
    0.62, 0.5, 0.38, 0.28,
  ],
  /** An evening-peak day (entertainment, mobile). */
  eveningPeak: [
    0.35, 0.22, 0.14, 0.1, 0.08, 0.1, 0.18, 0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.58, 0.55, 0.55, 0.6, 0.7, 0.85,
    0.95, 1, 0.98, 0.8, 0.55,
  ],
} as const satisfies Record<string, HourlyShape>;

/** Thrown for an unusable shape. */
export class TrafficShapeError extends errorKind('TrafficShapeError', 'sim.traffic-shape') {}

/** Validates a shape (24 finite values ≥ 0, not all 0). */
export function assertShape(shape: HourlyShape): void {
  if (
    shape.length !== 24 ||
    shape.some((v) => !(Number.isFinite(v) && v >= 0)) ||
    !shape.some((v) => v > 0)
  ) {
    throw new TrafficShapeError('An hourly traffic shape needs 24 finite values ≥ 0, at least one > 0.');
  }
}

/** Mean of a shape (so a shape can be scaled to a daily request count). */
export function shapeMean(shape: HourlyShape): number {
  return shape.reduce((a, b) => a + b, 0) / shape.length;
}

/**
 * Relative traffic at a local time of day (hours, fractional): linear between hour midpoints, so
 * traffic has no steps at the hour boundaries.
 */
export function shapeAt(shape: HourlyShape, localHour: number): number {
  const x = localHour - 0.5;
  const h0 = Math.floor(x);
  const w = x - h0;
  const a = shape[((h0 % 24) + 24) % 24] as number;
  const b = shape[(((h0 + 1) % 24) + 24) % 24] as number;
  return a + (b - a) * w;
}

/** A standard normal deviate (Box–Muller). */
export function gaussian(random: Random): number {
  const u = Math.max(1e-12, random());
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
}

/** A Poisson count (exact below 30, normal approximation above). */
export function poisson(mean: number, random: Random): number {
  if (!(mean > 0)) return 0;
  if (mean < 30) {
    const l = Math.exp(-mean);
    let k = 0;
    let p = random();
    while (p > l) {
      k++;
      p *= random();
    }
    return k;
  }
  return Math.max(0, Math.round(mean + Math.sqrt(mean) * gaussian(random)));
}

const offsetFormatters = new Map<string, Intl.DateTimeFormat>();

/** Local hour of day (fractional) of an instant in `timeZone`. */
export function localHourOf(epochMs: number, timeZone: string): number {
  let f = offsetFormatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', { timeZone, hourCycle: 'h23', hour: '2-digit', minute: '2-digit' });
    offsetFormatters.set(timeZone, f);
  }
  let h = 0;
  let m = 0;
  for (const p of f.formatToParts(epochMs)) {
    if (p.type === 'hour') h = Number(p.value) % 24;
    else if (p.type === 'minute') m = Number(p.value);
  }
  return h + m / 60 + (epochMs % 60_000) / 3_600_000;
}

/** Settings of a {@link TrafficModel}. */
export interface TrafficOptions {
  /** Requests per day at the shape's mean level. */
  readonly requestsPerDay: number;
  readonly shape: HourlyShape;
  /** IANA zone the shape's hours are in. @default 'UTC' */
  readonly timeZone?: string;
  /** Standard deviation of ln(per-minute level). @default 0.1 */
  readonly minuteNoise?: number;
  /** Standard deviation of ln(day level), drawn once per UTC day. @default 0.05 */
  readonly dayNoise?: number;
  /** Multiplies the level over [fromMs, toMs) (spikes > 1, outages 0). */
  readonly events?: readonly { fromMs: number; toMs: number; factor: number }[];
}

/** Requests per minute of one market. */
export class TrafficModel {
  private readonly mean: number;
  private readonly dayLevels = new Map<number, number>();

  constructor(
    private readonly options: TrafficOptions,
    private readonly random: Random,
  ) {
    assertShape(options.shape);
    if (!(options.requestsPerDay >= 0)) throw new TrafficShapeError('requestsPerDay must be ≥ 0.');
    this.mean = shapeMean(options.shape);
  }

  /** Expected requests in the minute starting at `minuteMs` (before Poisson sampling). */
  expected(minuteMs: number): number {
    const o = this.options;
    const day = Math.floor(minuteMs / 86_400_000);
    let level = this.dayLevels.get(day);
    if (level === undefined) {
      level = Math.exp((o.dayNoise ?? 0.05) * gaussian(this.random));
      this.dayLevels.set(day, level);
    }
    const hour = localHourOf(minuteMs + 30_000, o.timeZone ?? 'UTC');
    let factor = 1;
    for (const e of o.events ?? []) if (minuteMs >= e.fromMs && minuteMs < e.toMs) factor *= e.factor;
    const noise = Math.exp((o.minuteNoise ?? 0.1) * gaussian(this.random));
    return (o.requestsPerDay / 1440) * (shapeAt(o.shape, hour) / this.mean) * level * noise * factor;
  }

  /** Request count of the minute starting at `minuteMs`. */
  requests(minuteMs: number): number {
    return poisson(this.expected(minuteMs), this.random);
  }
}
