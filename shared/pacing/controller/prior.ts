/**
 * Priors for plans with no forecast of their own (docs/pacing.md, "Prior for new plans"): a new
 * campaign, or one that has not yet learned anything, starts its day on the traffic shape and the
 * demand level that the plans nearest to it have learned — its account's, else its time zone's,
 * else the region's (the pacer shard's plans, a random sample of the region's accounts, their
 * shapes moved to UTC hours and back to the plan's local hours) — and, when nothing has been
 * learned anywhere (a region's first day), on a built-in diurnal shape.
 *
 * A prior is stored as an ordinary forecast (`f1`: hour-of-day levels, no hour-of-week level):
 * any leader, an older one included, reads it. Such a "prior-only" forecast is recognised by its
 * empty hour-of-week levels (a plan's own day of at least `PARTIAL_DAY_HOURS` observed hours sets
 * some), and its first such fold replaces it with the plan's own observations; a shorter day (a plan
 * created late in it) rescales it to the observed level and keeps it a prior (forecast.ts `foldDay`).
 *
 * The book is built by the pacer from the forecasts it holds (at most once an hour: forecasts
 * change at most hourly); the controller asks it only on a plan-day's first tick, when the plan's
 * forecast has no usable level.
 */
import type { ResolvedPlan } from '../../budget/model.js';
import { dayWindow } from '../../budget/time-zone.js';
import type { PriorBook, PriorLookup } from './api.js';
import type { PacingControllerConfig } from './config.js';
import { daySlots, slotAt } from './day-slots.js';
import {
  EMPTY_FORECAST,
  isPriorOnly,
  levelOf,
  quantiseLevel,
  type SlotObservation,
  type TrafficForecast,
} from './forecast.js';

const HOUR_MS = 3_600_000;
/** A book that found nothing is rebuilt at most this often. */
const EMPTY_REBUILD_MS = 60_000;

/**
 * The built-in diurnal shape (relative level per local hour) used when nothing has been learned
 * anywhere (a region's first day): a generic day of internet traffic — a deep night trough around
 * 03:00–05:00 at a tenth of the day's level, a morning ramp from 06:00 to 10:00, a broad plateau
 * from 11:00 to 20:00 (the midday peak of desktop and news traffic and the evening peak of mobile
 * and entertainment traffic, neither favoured), then the evening decline. A curve that gives the
 * night less than the traffic has keeps a plan behind it there, which the day catches up; one that
 * gives the night more puts plans ahead of the traffic where it costs most (docs/pacing.md).
 */
export const BUILT_IN_SHAPE: readonly number[] = Object.freeze([
  0.25, 0.17, 0.12, 0.1, 0.1, 0.13, 0.25, 0.45, 0.65, 0.8, 0.9, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95,
  0.95, 0.95, 0.9, 0.75, 0.55, 0.38,
]);

/** True for a forecast object of this controller. */
export function isForecast(x: unknown): x is TrafficForecast {
  const f = x as TrafficForecast | undefined;
  return (
    typeof f === 'object' &&
    f !== null &&
    Array.isArray(f.hourOfDay) &&
    f.hourOfDay.length === 24 &&
    Array.isArray(f.hourOfWeek)
  );
}

/**
 * `base` (the plan's own forecast: its buffered observations are kept) with hour-of-day levels
 * `shape[h] / Σ shape × dailyMicros` per hour and no hour-of-week level: a prior-only forecast.
 */
export function priorForecast(
  shape: readonly number[],
  dailyMicros: number,
  base: TrafficForecast = EMPTY_FORECAST,
): TrafficForecast {
  let sum = 0;
  for (const v of shape) sum += v;
  const hourOfDay = shape.map((v) => (sum > 0 ? quantiseLevel((v / sum) * Math.max(0, dailyMicros)) : 0));
  return {
    hourOfWeek: EMPTY_FORECAST.hourOfWeek,
    hourOfDay,
    obsDay: base.obsDay,
    obs: base.obs,
    cover: base.cover,
  };
}

/**
 * `f` with the hour-of-day levels of a prior: the looked-up one (`looked`, from the caller's book),
 * else the built-in shape at a daily demand of budget × e^(−initialPressure); undefined when there
 * is none. The plan's buffered observations are kept.
 */
export function seedPrior(
  f: TrafficForecast,
  looked: unknown,
  budget: number,
  cfg: Pick<PacingControllerConfig, 'builtInShape' | 'initialPressure' | 'audienceTimeZone'>,
  timeZone: string,
  nowMs: number,
): TrafficForecast | undefined {
  let levels: readonly number[] | undefined;
  if (isForecast(looked)) levels = looked.hourOfDay;
  else {
    const shape = builtInShapeIn(cfg, timeZone, nowMs);
    if (shape) levels = priorForecast(shape, budget * Math.exp(-cfg.initialPressure)).hourOfDay;
  }
  if (!levels?.some((q) => q > 1)) return undefined;
  return {
    hourOfWeek: EMPTY_FORECAST.hourOfWeek,
    hourOfDay: levels,
    obsDay: f.obsDay,
    obs: f.obs,
    cover: f.cover,
  };
}

/**
 * The built-in shape in the local hours of `timeZone`'s day at `nowMs`: as the audience
 * (`cfg.audienceTimeZone`) lives it, moved through UTC; the shape itself when no audience zone is
 * set or it is the plan's own.
 */
export function builtInShapeIn(
  cfg: Pick<PacingControllerConfig, 'builtInShape' | 'audienceTimeZone'>,
  timeZone: string,
  nowMs: number,
): readonly number[] | null {
  const shape = cfg.builtInShape;
  const audience = cfg.audienceTimeZone;
  if (!shape || audience === null || audience === timeZone) return shape;
  // Every plan of a zone starts its day at the same tick (100,000 at a region's first midnight, ~3 µs
  // each): one result per zone and minute (offsets change only on minute boundaries).
  let byZone = movedShapes.get(shape);
  if (!byZone || byZone.size >= MOVED_SHAPES_LIMIT) {
    byZone = new Map();
    movedShapes.set(shape, byZone);
  }
  const key = `${audience}|${timeZone}|${Math.floor(nowMs / 60_000)}`;
  let moved = byZone.get(key);
  if (!moved) {
    const audienceOfUtc = new Array<number>(24);
    utcHours(audience, nowMs).forEach((u, h) => {
      audienceOfUtc[u] = h;
    });
    moved = Object.freeze(utcHours(timeZone, nowMs).map((u) => shape[audienceOfUtc[u] as number] as number));
    byZone.set(key, moved);
  }
  return moved;
}

/** {@link builtInShapeIn}'s results per built-in shape, keyed by audience, zone and minute. */
const movedShapes = new WeakMap<readonly number[], Map<string, readonly number[]>>();
const MOVED_SHAPES_LIMIT = 1024;

/**
 * True when `f` or the state's pending observation holds an observation with demand of a day
 * before `day`: folded into a prior-only forecast, it makes it the plan's own (forecast.ts).
 */
export function ownObservations(
  f: TrafficForecast,
  pending: SlotObservation | undefined,
  day: string,
): boolean {
  if (pending && pending.day < day && pending.level > 1) return true;
  return f.obsDay !== '' && f.obsDay < day && f.obs.some((q) => q > 1);
}

/** A plan's own learned day: its shape (24 local hours, Σ = 1) and its daily full-speed demand. */
function ownDay(f: TrafficForecast): { shape: number[]; daily: number } | undefined {
  if (isPriorOnly(f)) return undefined;
  let known = 0;
  let sum = 0;
  for (let h = 0; h < f.hourOfDay.length; h++) {
    const v = levelOf(f.hourOfDay[h] as number);
    if (v !== undefined) {
      known++;
      sum += v;
    }
  }
  // At least half the hours learned, and some demand in them.
  if (known < 12 || !(sum > 0)) return undefined;
  const mean = sum / known;
  const levels = f.hourOfDay.map((q) => levelOf(q) ?? mean);
  const daily = levels.reduce((a, b) => a + b, 0);
  return { shape: levels.map((v) => v / daily), daily };
}

/** Local hour → UTC hour of a zone's day at `nowMs` (DST-aware for that day). */
function utcHours(timeZone: string, nowMs: number): number[] {
  const slots = daySlots(timeZone, dayWindow(nowMs, timeZone));
  const k = slotAt(slots, nowMs);
  const offset = (((slots.hours[k] as number) - Math.floor((slots.knots[k] as number) / HOUR_MS)) % 24) + 24;
  return Array.from({ length: 24 }, (_, h) => (h - offset + 48) % 24);
}

class Group {
  readonly shape = new Float64Array(24);
  logRatio = 0;
  n = 0;
  add(shape: ArrayLike<number>, ratio: number): void {
    for (let h = 0; h < 24; h++) this.shape[h] = (this.shape[h] as number) + (shape[h] as number);
    this.logRatio += Math.log(ratio);
    this.n++;
  }
}

/** A plan and the forecast the pacer holds for it (undefined: none, or not decoded yet). */
export interface PriorEntry {
  readonly plan: ResolvedPlan;
  readonly forecast: unknown;
}

/** Settings of {@link ForecastPriors}. */
export interface ForecastPriorsOptions {
  /** Rebuild the aggregates at most this often. @default 3_600_000 */
  readonly rebuildMs?: number;
  /** Plans a zone's or the region's aggregate needs before it is used. @default 3 */
  readonly minPlans?: number;
}

/**
 * The aggregates the priors come from, per account, per time zone and for the region (in UTC
 * hours). Built from plans whose forecast has at least 12 learned hours of their own.
 */
export class ForecastPriors implements PriorBook {
  readonly lookup: PriorLookup = (plan, nowMs) => this.forecastFor(plan, nowMs);
  private readonly rebuildMs: number;
  private readonly minPlans: number;
  private builtAt = Number.NEGATIVE_INFINITY;
  private accounts = new Map<string, Group>();
  private zones = new Map<string, Group>();
  private region = new Group();

  constructor(options: ForecastPriorsOptions = {}) {
    this.rebuildMs = options.rebuildMs ?? HOUR_MS;
    this.minPlans = options.minPlans ?? 3;
  }

  /** Plans the last build learned from. */
  get plans(): number {
    return this.region.n;
  }

  /**
   * Rebuilds from the plans' forecasts when the last build is older than `rebuildMs`, or older than
   * a minute and found nothing (forecasts decoded after a takeover then count soon; a shard where
   * nothing has been learned yet is not walked every tick).
   */
  refresh(nowMs: number, entries: Iterable<PriorEntry>): void {
    const age = nowMs - this.builtAt;
    if (age < this.rebuildMs && (this.region.n > 0 || age < EMPTY_REBUILD_MS)) return;
    this.builtAt = nowMs;
    this.accounts = new Map();
    this.zones = new Map();
    this.region = new Group();
    const toUtc = new Map<string, number[]>();
    const utc = new Float64Array(24);
    for (const { plan, forecast } of entries) {
      if (!isForecast(forecast) || !(plan.dailyBudgetMicros > 0)) continue;
      const own = ownDay(forecast);
      if (!own) continue;
      const ratio = own.daily / plan.dailyBudgetMicros;
      if (!(ratio > 0 && Number.isFinite(ratio))) continue;
      group(this.accounts, plan.accountId).add(own.shape, ratio);
      group(this.zones, plan.timeZone).add(own.shape, ratio);
      let map = toUtc.get(plan.timeZone);
      if (!map) {
        map = utcHours(plan.timeZone, nowMs);
        toUtc.set(plan.timeZone, map);
      }
      for (let h = 0; h < 24; h++) utc[map[h] as number] = own.shape[h] as number;
      this.region.add(utc, ratio);
    }
  }

  /**
   * The prior forecast of `plan` (its local hours, daily demand = the group's geometric-mean ratio
   * × the plan's budget), from the nearest group with enough plans; undefined when the book is
   * empty (nothing learned in the shard yet).
   */
  forecastFor(plan: ResolvedPlan, nowMs: number): TrafficForecast | undefined {
    const account = this.accounts.get(plan.accountId);
    const zone = this.zones.get(plan.timeZone);
    let g: Group | undefined;
    let shape: number[] | undefined;
    if (account && account.n >= 1) g = account;
    else if (zone && zone.n >= this.minPlans) g = zone;
    else if (this.region.n >= this.minPlans) {
      g = this.region;
      const map = utcHours(plan.timeZone, nowMs);
      shape = map.map((u) => (this.region.shape[u] as number) / this.region.n);
    }
    if (!g) return undefined;
    const n = g.n;
    shape ??= Array.from(g.shape, (v) => v / n);
    return priorForecast(shape, Math.exp(g.logRatio / n) * plan.dailyBudgetMicros);
  }
}

function group(map: Map<string, Group>, key: string): Group {
  let g = map.get(key);
  if (!g) {
    g = new Group();
    map.set(key, g);
  }
  return g;
}
