/**
 * The traffic forecast of one plan: how much the plan could spend per local hour at full speed
 * (throttle 1, multiplier 1), learned from its own recent days.
 *
 * What it learns from: the pacer cannot see bid requests, only the plan's live spend and its own
 * published parameters. Spend in an interval divided by the gain the controller applied during it
 * (ĝ = e^u, u = ln throttle + κ·ln multiplier) estimates the full-speed demand of that interval
 * (a ratio estimator over the hour's uncensored ticks). The estimate's shape is exact whenever u is
 * constant over the day — which is exactly what a traffic-shaped curve produces — and only
 * approximate (through κ) while u varies, so day-over-day learning converges to the traffic shape.
 * Intervals in which the budget guard may have blocked bids (spend at the curve, budget spent)
 * are censored: they say nothing about demand.
 *
 * Structure (all levels quantised, so encode/decode is exact):
 * - `hourOfWeek[168]` and `hourOfDay[24]`: exponentially smoothed demand levels (0 = unknown);
 * - `obsDay` + `obs[25]`/`cover[25]`: the observations of one day by hour slot, folded into the
 *   profiles only when a later day starts. So a day's profile — and the target curve built from
 *   it — never changes during that day, and any leader rebuilds the identical curve from the
 *   stored forecast (plus the one pending observation the controller state carries).
 */
import type { PacingControllerConfig } from './config.js';
import { type DaySlots, slotsOfDay } from './day-slots.js';

/** Slots per day kept for observations (a 25 h day has 25). */
export const OBS_SLOTS = 25;
/** Coverage is stored in 1/32 of a slot. */
export const COVER_UNITS = 32;
const Q_STEPS_PER_OCTAVE = 32;
const Q_MAX = 4095;
/** Largest change of an hour's level one day's observation can cause (before smoothing). */
export const OUTLIER_FACTOR = 4;

/** The forecast (see the module comment). Immutable: updates return a new object. */
export interface TrafficForecast {
  /** Quantised demand level per hour of week (weekday × 24 + local hour; Monday = 0). */
  readonly hourOfWeek: readonly number[];
  /** Quantised demand level per local hour. */
  readonly hourOfDay: readonly number[];
  /** The local day `obs` belongs to, '' when none. */
  readonly obsDay: string;
  /** Quantised observed demand per hour slot of `obsDay` (0 = none). */
  readonly obs: readonly number[];
  /** Observed share of each slot, in 1/32. */
  readonly cover: readonly number[];
}

/** Demand level (micros per hour at full speed) → quantised level (1/32 octave; 0 = unknown). */
export function quantiseLevel(rate: number): number {
  if (!(rate >= 0)) return 1;
  return Math.min(Q_MAX, 1 + Math.round(Q_STEPS_PER_OCTAVE * Math.log2(1 + rate)));
}

/** Every level a quantised value can stand for (a table: this runs ~200 times per day roll). */
const LEVELS = Float64Array.from({ length: Q_MAX + 1 }, (_, q) => 2 ** ((q - 1) / Q_STEPS_PER_OCTAVE) - 1);

/** Quantised level → micros per hour (undefined for 0 = unknown). */
export function levelOf(q: number): number | undefined {
  return q > 0 ? LEVELS[q] : undefined;
}

const zeros = (n: number): number[] => new Array<number>(n).fill(0);

/** A forecast with no history: the target curve is flat (linear in time). */
export const EMPTY_FORECAST: TrafficForecast = Object.freeze({
  hourOfWeek: Object.freeze(zeros(168)),
  hourOfDay: Object.freeze(zeros(24)),
  obsDay: '',
  obs: Object.freeze(zeros(OBS_SLOTS)),
  cover: Object.freeze(zeros(OBS_SLOTS)),
});

function smooth(prev: number, rate: number, alpha: number): number {
  const p = levelOf(prev);
  return quantiseLevel(p === undefined ? rate : p + alpha * (rate - p));
}

/** Where a fold writes the hour-of-week levels (a full copy, or only the buckets a profile reads). */
interface WeekView {
  wants(bucket: number): boolean;
  get(bucket: number): number;
  set(bucket: number, q: number): void;
}

/** All 168 buckets, in an array. */
class FullWeek implements WeekView {
  constructor(readonly levels: number[]) {}
  wants(): boolean {
    return true;
  }
  get(b: number): number {
    return this.levels[b] as number;
  }
  set(b: number, q: number): void {
    this.levels[b] = q;
  }
}

/** Only the buckets of one day's weekdays (a day spans at most two), over a base forecast. */
class DayWeek implements WeekView {
  private readonly days: readonly number[];
  private readonly changed = new Int32Array(48).fill(-1);
  constructor(
    private readonly base: readonly number[],
    weekdays: readonly number[],
  ) {
    const first = weekdays[0] ?? 0;
    this.days = [first, weekdays.find((w) => w !== first) ?? first];
  }
  private index(b: number): number {
    const d = Math.floor(b / 24);
    return d === this.days[0] ? b % 24 : d === this.days[1] ? 24 + (b % 24) : -1;
  }
  wants(b: number): boolean {
    return this.index(b) >= 0;
  }
  get(b: number): number {
    const i = this.index(b);
    const v = i >= 0 ? (this.changed[i] as number) : -1;
    return v >= 0 ? v : (this.base[b] as number);
  }
  set(b: number, q: number): void {
    const i = this.index(b);
    if (i >= 0) this.changed[i] = q;
  }
}

/**
 * Folds one day's observations into `week` and `hod` (in place); true when any slot was observed.
 * The single implementation of the smoothing arithmetic: materialising a forecast and computing a
 * day profile must agree to the bit, or two leaders would build different curves.
 *
 * `prior`: the hour-of-day levels are a prior (prior.ts), not the plan's own, and the plan's own
 * first day replaces them: they are cleared, so each observed hour takes its observation weighed
 * by its cover against its observed neighbours and the rescaled prior ({@link firstDayLevels}),
 * and the hours it did not observe are unknown (a day profile gives them the mean of the known
 * ones), as for a plan that started without a prior — unless it observed less than half the day
 * ({@link clearPrior}: then the rescaled prior stays where it saw nothing). For a whole day:
 * smoothing the observations into the prior kept its shape for days; keeping the prior (rescaled)
 * for the hours not observed kept it exactly where it was most wrong — the hours a plan could not
 * observe are mostly those where it sat at the cap, i.e. where the prior gave too little. With
 * nothing to smooth into, a first day's hour is capped at FIRST_DAY_PEAK × the median observed hour:
 * a small plan's hour is a few wins, and one won at low pressure reads as a huge level (a curve that
 * put most of the budget into four night hours).
 */
function foldDay(
  day: string,
  obs: readonly number[],
  cover: readonly number[],
  timeZone: string,
  cfg: PacingControllerConfig,
  week: WeekView,
  hod: number[],
  prior = false,
): boolean {
  const slots = slotsOfDay(timeZone, day);
  let observedAny = false;
  // A plan's first day of its own replaces its prior whole, each hour at most FIRST_DAY_PEAK × the
  // day's median observed level (see above).
  const ceiling = prior ? FIRST_DAY_PEAK * medianObserved(slots.hours.length, obs) : Number.POSITIVE_INFINITY;
  // A first own day that spent nothing leaves the prior as it was; otherwise its hours are weighed
  // against their neighbours and the rescaled prior (read before clearPrior clears it), and a
  // partial one keeps the forecast a prior: its next day replaces it like a first day.
  const fit = prior ? fitPrior(slots.hours, obs, ceiling, hod) : undefined;
  if (fit && fit.seen > 0 && fit.observed === 0) return false;
  const levels = fit ? firstDayLevels(slots.hours, obs, cover, ceiling, hod, fit.ratio) : undefined;
  const partial = fit ? clearPrior(hod, fit) : false;
  for (let k = 0; k < slots.hours.length && k < OBS_SLOTS; k++) {
    const seen = levelOf(obs[k] as number);
    if (seen === undefined) continue;
    const h = slots.hours[k] as number;
    const b = (slots.weekdays[k] as number) * 24 + h;
    observedAny = true;
    if (levels) {
      const v = quantiseLevel(levels[k] as number);
      if (!partial && week.wants(b)) week.set(b, v);
      hod[h] = v;
      continue;
    }
    const observed = Math.min(seen, ceiling);
    const weight = Math.min(1, (cover[k] as number) / COVER_UNITS);
    // One odd day moves an hour's level by at most ×/÷ OUTLIER_FACTOR (a burst of wins, a guard
    // holding float, a market outage): real shifts still get through in a few days.
    const known = levelOf(hod[h] as number);
    const rate =
      known === undefined
        ? observed
        : Math.min(known * OUTLIER_FACTOR, Math.max(known / OUTLIER_FACTOR, observed));
    if (!partial && week.wants(b)) week.set(b, smooth(week.get(b), rate, cfg.alphaWeek * weight));
    hod[h] = smooth(hod[h] as number, rate, cfg.alphaDay * weight);
  }
  return observedAny && !partial;
}

/** How a first own day's observations compare with the prior they replace ({@link fitPrior}). */
interface PriorFit {
  /** Slots the day observed. */
  readonly seen: number;
  /** Σ observed levels (each at most the ceiling) over the observed hours the prior has a level for. */
  readonly observed: number;
  /** `observed` ÷ Σ prior over the same hours; 0 when either sum is 0 (nothing to rescale by). */
  readonly ratio: number;
}

/** The day's observations against the prior in `hod` (read only). */
function fitPrior(
  hours: readonly number[],
  obs: readonly number[],
  ceiling: number,
  hod: readonly number[],
): PriorFit {
  let seen = 0;
  let observed = 0;
  let priorSum = 0;
  for (let k = 0; k < hours.length && k < OBS_SLOTS; k++) {
    const v = levelOf(obs[k] as number);
    if (v === undefined) continue;
    seen++;
    const p = levelOf(hod[hours[k] as number] as number);
    if (p === undefined) continue;
    observed += Math.min(v, ceiling);
    priorSum += p;
  }
  const ratio = observed / priorSum;
  return { seen, observed, ratio: ratio > 0 && Number.isFinite(ratio) ? ratio : 0 };
}

/**
 * Clears a prior before a plan's first own day is folded into it (see {@link foldDay}); true when
 * the day is partial. A day that observed fewer than {@link PARTIAL_DAY_HOURS} hours keeps the
 * prior in the hours it did not observe, rescaled to the level it did observe (`fit.ratio`), and
 * stays a prior (no hour-of-week level is set), so the plan's next day replaces it as a first day
 * would: such a day is mostly a plan that started late in it (created at 17:00, or a zone west of
 * the pacer's first tick), and the mean of a few evening hours spread over the night and the
 * morning is a flat curve that runs far ahead of the traffic at night and behind it all morning.
 * A whole day clears the prior everywhere: the hours it did not observe are unknown.
 *
 * A day that spent nothing in any hour it observed never gets here ({@link foldDay} leaves the
 * prior as it was): zero wins in a few hours of a small plan say nothing about its shape, and
 * cleared to zeros the next day's curve was planned by time (linear).
 */
function clearPrior(hod: number[], fit: PriorFit): boolean {
  if (fit.seen >= PARTIAL_DAY_HOURS || fit.ratio === 0) {
    hod.fill(0);
    return false;
  }
  for (let h = 0; h < hod.length; h++) {
    const p = levelOf(hod[h] as number);
    hod[h] = p === undefined ? 0 : quantiseLevel(p * fit.ratio);
  }
  return true;
}

/**
 * The levels a first own day gives its observed slots (undefined where it saw nothing): each
 * slot's observation (at most `ceiling`) weighed by its cover (uncensored share × credibility,
 * memo.ts `observation`) against the cover-weighted mean of the observed slots within
 * {@link NEIGHBOUR_HOURS} of it and {@link PRIOR_HOURS} of the prior (`priorHod`, the levels
 * before the fold) rescaled to the day (`ratio`, {@link fitPrior}; 0: the prior is left out). A small plan's hour is a few wins: at full weight one such
 * day became its curve whole, and the budget went to the hours that happened to have wins. Its
 * neighbours are the nearest evidence of the same traffic that is the plan's own; the prior is a
 * guess where nothing has been learned yet (the built-in day), so it counts as one hour beside
 * them, not as the whole pull — weighed against the prior alone, the small plans of an
 * evening-peak market kept the built-in day's evening decline and ran ahead of the traffic all day.
 */
function firstDayLevels(
  hours: readonly number[],
  obs: readonly number[],
  cover: readonly number[],
  ceiling: number,
  priorHod: readonly number[],
  ratio: number,
): (number | undefined)[] {
  const m = Math.min(hours.length, OBS_SLOTS);
  const level: (number | undefined)[] = new Array(m);
  const weight = new Array<number>(m).fill(0);
  for (let k = 0; k < m; k++) {
    const v = levelOf(obs[k] as number);
    if (v === undefined) continue;
    level[k] = Math.min(v, ceiling);
    weight[k] = Math.min(1, (cover[k] as number) / COVER_UNITS);
  }
  return level.map((v, k) => {
    if (v === undefined) return undefined;
    const p = ratio > 0 ? levelOf(priorHod[hours[k] as number] as number) : undefined;
    let sum = p === undefined ? 0 : PRIOR_HOURS * p * ratio;
    let total = p === undefined ? 0 : PRIOR_HOURS;
    for (let j = Math.max(0, k - NEIGHBOUR_HOURS); j <= Math.min(m - 1, k + NEIGHBOUR_HOURS); j++) {
      const u = level[j];
      if (u === undefined) continue;
      sum += (weight[j] as number) * u;
      total += weight[j] as number;
    }
    const w = weight[k] as number;
    return total > 0 ? w * v + (1 - w) * (sum / total) : v;
  });
}

/** How far a first own day's neighbouring slots reach ({@link firstDayLevels}). */
export const NEIGHBOUR_HOURS = 2;
/** What the rescaled prior is worth beside them, in fully covered hours ({@link firstDayLevels}). */
export const PRIOR_HOURS = 1;

/** A first own day that observed fewer hours than this keeps its prior where it saw nothing. */
export const PARTIAL_DAY_HOURS = 12;

/**
 * A plan's first own day: no hour above this multiple of the day's median observed level. Diurnal
 * traffic peaks at 1.2–1.6× its median hour (the simulator's shapes, and web traffic generally);
 * 3 leaves it whole and cuts a lucky win's spike.
 */
export const FIRST_DAY_PEAK = 3;

/** The median of a day's observed levels (levels, not quantised codes); Infinity when none. */
function medianObserved(n: number, obs: readonly number[]): number {
  const seen: number[] = [];
  for (let k = 0; k < n && k < OBS_SLOTS; k++) {
    const v = levelOf(obs[k] as number);
    if (v !== undefined) seen.push(v);
  }
  if (seen.length === 0) return Number.POSITIVE_INFINITY;
  seen.sort((a, b) => a - b);
  return seen[seen.length >> 1] as number;
}

/** A forecast whose levels are a prior only: hour-of-day levels, none of hour-of-week (prior.ts). */
export function isPriorOnly(f: TrafficForecast): boolean {
  // Indexed: a for-of over these arrays (frozen or not) allocated an iterator result per element.
  let day = false;
  for (let h = 0; !day && h < f.hourOfDay.length; h++) day = (f.hourOfDay[h] as number) > 0;
  for (let b = 0; day && b < f.hourOfWeek.length; b++) if ((f.hourOfWeek[b] as number) > 0) return false;
  return day;
}

/** Folds the observations of `f.obsDay` into the profiles (pure; `f` when there is nothing to fold). */
export function foldObservations(
  f: TrafficForecast,
  timeZone: string,
  cfg: PacingControllerConfig,
): TrafficForecast {
  if (f.obsDay === '') return f;
  const week = [...f.hourOfWeek];
  const day = [...f.hourOfDay];
  foldDay(f.obsDay, f.obs, f.cover, timeZone, cfg, new FullWeek(week), day, isPriorOnly(f));
  return {
    hourOfWeek: week,
    hourOfDay: day,
    obsDay: '',
    obs: EMPTY_FORECAST.obs,
    cover: EMPTY_FORECAST.cover,
  };
}

/** One slot's observation. */
export interface SlotObservation {
  readonly day: string;
  readonly slot: number;
  /** Quantised full-speed demand of the slot. */
  readonly level: number;
  /** Observed share of the slot, 1/32 units. */
  readonly cover: number;
}

/**
 * Records one slot's observation. Observations of an earlier day than `obs.day` are folded into
 * the profiles first; an observation older than the buffered day is folded on its own.
 */
export function withObservation(
  f: TrafficForecast,
  o: SlotObservation,
  timeZone: string,
  cfg: PacingControllerConfig,
): TrafficForecast {
  if (o.slot < 0 || o.slot >= OBS_SLOTS) return f;
  if (f.obsDay !== '' && o.day < f.obsDay) {
    // A late observation of an older day: fold it alone, keep the buffered day.
    const alone = foldObservations(single(f, o), timeZone, cfg);
    return { ...alone, obsDay: f.obsDay, obs: f.obs, cover: f.cover };
  }
  const base = f.obsDay !== '' && f.obsDay !== o.day ? foldObservations(f, timeZone, cfg) : f;
  const obs = base.obsDay === o.day ? [...base.obs] : zeros(OBS_SLOTS);
  const cover = base.obsDay === o.day ? [...base.cover] : zeros(OBS_SLOTS);
  obs[o.slot] = o.level;
  cover[o.slot] = Math.max(0, Math.min(COVER_UNITS, Math.round(o.cover)));
  return { hourOfWeek: base.hourOfWeek, hourOfDay: base.hourOfDay, obsDay: o.day, obs, cover };
}

function single(f: TrafficForecast, o: SlotObservation): TrafficForecast {
  const obs = zeros(OBS_SLOTS);
  const cover = zeros(OBS_SLOTS);
  obs[o.slot] = o.level;
  cover[o.slot] = o.cover;
  return { hourOfWeek: f.hourOfWeek, hourOfDay: f.hourOfDay, obsDay: o.day, obs, cover };
}

/** Today's profile: the weights of the target curve per hour slot, and what the forecast knows. */
export interface DayProfile {
  readonly slots: DaySlots;
  /** Relative weight of each slot (demand level × slot length in hours, floored). */
  readonly weights: readonly number[];
  /** Full-speed demand of each slot, micros (undefined when the forecast has no level for the plan). */
  readonly demand: readonly number[] | undefined;
  /** Fingerprint of the inputs the weights came from (stored in the controller state). */
  readonly hash: number;
}

/**
 * The profile of `slots`' day from the forecast, with everything observed before that day folded
 * in (and `pending`, the one observation the controller state may still hold).
 */
export function dayProfile(
  f: TrafficForecast,
  pending: SlotObservation | undefined,
  timeZone: string,
  slots: DaySlots,
  cfg: PacingControllerConfig,
): DayProfile {
  // The profile of `slots.day` = the forecast with every earlier observation folded in — computed
  // without materialising it: the hour-of-day levels in a 24-entry copy, and of the hour-of-week
  // levels only the buckets this day reads (same arithmetic as foldObservations: foldDay).
  const hod = f.hourOfDay.slice();
  const view = new DayWeek(f.hourOfWeek, slots.weekdays);
  let bufDay = f.obsDay;
  let bufObs = f.obs;
  let bufCover = f.cover;
  // Whether the levels are still a prior only, as each fold of the materialised forecast would
  // find it (a fold that observed a slot sets hour-of-week levels).
  let prior = isPriorOnly(f);
  if (pending && pending.day < slots.day && pending.slot >= 0 && pending.slot < OBS_SLOTS) {
    // As withObservation(f, pending) would do it.
    if (bufDay !== '' && pending.day < bufDay) {
      const one = single(f, pending);
      if (foldDay(pending.day, one.obs, one.cover, timeZone, cfg, view, hod, prior)) prior = false;
    } else {
      if (bufDay !== '' && bufDay !== pending.day) {
        if (foldDay(bufDay, bufObs, bufCover, timeZone, cfg, view, hod, prior)) prior = false;
        bufObs = EMPTY_FORECAST.obs;
        bufCover = EMPTY_FORECAST.cover;
      }
      const obs = bufDay === pending.day ? [...bufObs] : zeros(OBS_SLOTS);
      const cover = bufDay === pending.day ? [...bufCover] : zeros(OBS_SLOTS);
      obs[pending.slot] = pending.level;
      cover[pending.slot] = Math.max(0, Math.min(COVER_UNITS, Math.round(pending.cover)));
      bufDay = pending.day;
      bufObs = obs;
      bufCover = cover;
    }
  }
  if (bufDay !== '' && bufDay < slots.day) foldDay(bufDay, bufObs, bufCover, timeZone, cfg, view, hod, prior);
  const n = slots.hours.length;
  const levels: (number | undefined)[] = new Array(n);
  let hash = 0x811c9dc5;
  let sum = 0;
  let known = 0;
  for (let k = 0; k < n; k++) {
    const h = slots.hours[k] as number;
    const qw = view.get((slots.weekdays[k] as number) * 24 + h);
    const qd = hod[h] as number;
    hash = Math.imul(hash ^ qw, 0x01000193);
    hash = Math.imul(hash ^ qd, 0x01000193);
    const w = levelOf(qw);
    const d = levelOf(qd);
    const v = w !== undefined && d !== undefined ? cfg.weekBlend * w + (1 - cfg.weekBlend) * d : (d ?? w);
    levels[k] = v;
    if (v !== undefined) {
      sum += v;
      known++;
    }
  }
  // Known levels that are all zero (a plan that saw no demand in the hours it could observe) say
  // nothing about the shape: the day is planned as if nothing were known (weights by slot length).
  // With a zero mean every weight would be zero, and a curve of zero weights cannot grow.
  const usable = known > 0 && sum > 0;
  const mean = usable ? sum / known : 1;
  const weights: number[] = new Array(n);
  const demand: number[] = new Array(n);
  for (let k = 0; k < n; k++) {
    const hours = ((slots.knots[k + 1] as number) - (slots.knots[k] as number)) / 3_600_000;
    // Unknown hours get the mean; no hour is planned below shapeFloor × mean (a wrong zero would
    // shut the plan out of an hour that turns out to have traffic).
    const v = usable ? (levels[k] ?? mean) : mean;
    demand[k] = v * hours;
    weights[k] = Math.max(v, cfg.shapeFloor * mean) * hours;
  }
  return { slots, weights, demand: usable ? demand : undefined, hash: (hash >>> 8) & 0xffffff };
}
