/**
 * Settings of the pacing controller (design and tuning: docs/pacing.md, "Controller"). Every
 * setting has a default that the simulator runs were tuned with; a pacer passes overrides only
 * for experiments.
 */
import { isTimeZone } from '../../budget/time-zone.js';
import { errorKind } from '../../errors.js';
import { DEFAULT_RELEASE_CAP } from '../../spend/release.js';
import { BUILT_IN_SHAPE } from './prior.js';

/** Settings of {@link createPacingController}. All optional. */
export interface PacingControllerConfig {
  /**
   * Horizon H over which a deviation from the target is to be closed: the position error is
   * measured in "H of planned spend", so the loop behaves the same for $1 and $1 M budgets.
   * @default 600_000 (10 min)
   */
  readonly horizonMs: number;
  /** Proportional gain on the normalised position error (log-pressure per unit of error). @default 1 */
  readonly kp: number;
  /** Integral gain per horizon H of time (critically damped at unit elasticity with kp = 1). @default 0.25 */
  readonly ki: number;
  /**
   * The normalised error is clamped to ±this in the integral, and to +this in the proportional
   * term (behind: one far-off tick cannot slam the plan to full speed). @default 3
   */
  readonly errorClamp: number;
  /**
   * Ahead of the target, the proportional term takes the error down to −this (the integral still
   * only −`errorClamp`): a plan far ahead stops almost at once and resumes as E(t) catches up,
   * instead of losing pressure through the integral. @default 12
   */
  readonly aheadClamp: number;
  /**
   * While the plan sits at the guards' cap (spend plus the floats they hold within half the margin
   * of E(t) at two ticks running, outside the day's last `endRampMs`, once E has grown a margin past
   * its anchor), the integral steps down by this much per tick: demand above the cap is invisible
   * to the error, which stays at about the margin. Off by default: a plan whose own curve binds only
   * at times (an arm under a binding campaign plan) was held below full speed by it, and the
   * integral already winds down at the cap, more slowly (docs/pacing.md). @default 0
   */
  readonly capStep: number;
  /**
   * The controller aims this much planned spend (in time at the curve's current slope) below
   * E(t), so its noise stays under the guard's hard cap at E(t) instead of being clipped there.
   * @default 180_000 (3 min)
   */
  readonly marginMs: number;
  /** Over the last `endRampMs` of the day the margin shrinks to 0: the day ends on E = budget. @default 3_600_000 */
  readonly endRampMs: number;
  /**
   * Lowest bid multiplier (bid shading floor); below it the controller throttles. From observed
   * clearing prices (the nine iPinYou markets): their 5th percentile is 0.08–0.17 of their median,
   * so at 0.05 a bid of up to ~3× the median clearing price can still shade down to the cheapest
   * twentieth of the market; lower, a bid wins almost nothing and throttling is the only lever left
   * (docs/pacing.md, "Actuators"). @default 0.05
   */
  readonly minMultiplier: number;
  /** Lowest throttle (pass-through rate) published. @default 0.0001 */
  readonly minThrottle: number;
  /**
   * Assumed elasticity κ of spend to the bid multiplier (spend ∝ m^κ). It sets how the single
   * control variable (log-pressure u = ln throttle + κ·ln multiplier) splits into the two
   * actuators, the loop gain, and how the forecast converts spend back to demand. The pacer sets
   * it from the region's auction ({@link elasticityOf}; docs/pacing.md, "Actuators"). @default 1
   */
  readonly elasticity: number;
  /**
   * Pressure of a plan with nothing known of its demand: no level of its own, no prior level from
   * other plans, no previous state. @default -1 (about a third of full speed)
   */
  readonly initialPressure: number;
  /**
   * Relative traffic per local hour (24 values) a plan's curve follows when neither it nor any
   * other plan has learned a shape (docs/pacing.md, "Prior for new plans"); null: a flat curve.
   * @default BUILT_IN_SHAPE (prior.ts)
   */
  readonly builtInShape: readonly number[] | null;
  /**
   * The time zone the region's audience lives in, whose local hours {@link builtInShape} describes
   * (docs/pacing.md, "Prior for new plans"): a plan in another zone gets the shape moved through
   * UTC to its own hours — a Los Angeles advertiser's plan bidding on New York's traffic sees New
   * York's evening at its 17:00–21:00, not at its own evening. null: each plan's own zone.
   * @default null
   */
  readonly audienceTimeZone: string | null;
  /**
   * In-flight that no notice is expected to resolve is counted less, up to this fraction of the
   * budget — as the guards count it (`BudgetGuard`'s `releaseCap`; docs/spend.md). @default 0.0025
   */
  readonly releaseCap: number;
  /**
   * The release may also take the budget's headroom over E(t), as a guard of one region counts it
   * (`releaseCapMicros`, docs/spend.md). false under strict allocations, whose guards cap each
   * region by its allocation. @default true
   */
  readonly releaseHeadroom: boolean;
  /** Smallest hourly weight of the target curve, as a fraction of the day's mean weight. @default 0.05 */
  readonly shapeFloor: number;
  /** Weight of a new day in the hour-of-day demand profile (exponential smoothing). @default 0.3 */
  readonly alphaDay: number;
  /** Weight of a new week in the hour-of-week demand profile. @default 0.5 */
  readonly alphaWeek: number;
  /** Share of the hour-of-week value in the blend with the hour-of-day value. @default 0.5 */
  readonly weekBlend: number;
  /** An hour is learned from only if at least this share of it was observed uncensored. @default 0.25 */
  readonly minCoverage: number;
  /**
   * Credibility of an hour's observation: an hour in which n ticks saw new spend is weighted
   * n / (n + evidenceTicks) of its uncensored share (0: every hour at its full share). A small
   * plan's hour is a few wins, and its level is mostly the luck of which hour they fell in; one
   * win more or less moves it by half. docs/pacing.md, "Traffic forecast". @default 6
   */
  readonly evidenceTicks: number;
  /** Gaps between two ticks longer than this are not learned from (pacer down, leader change). @default 300_000 */
  readonly maxGapMs: number;
  /** Time constant of the smoothed leased float (floats are granted in jumps). @default 300_000 */
  readonly leaseSmoothingMs: number;
  /** Tick length (the pacer's cadence). @default TICK_MS (10 s) */
  readonly tickMs: number;
}

/** The defaults (docs/pacing.md explains each choice). */
export const defaultControllerConfig: PacingControllerConfig = {
  horizonMs: 600_000,
  kp: 1,
  ki: 0.25,
  errorClamp: 3,
  aheadClamp: 12,
  capStep: 0,
  marginMs: 180_000,
  endRampMs: 3_600_000,
  minMultiplier: 0.05,
  minThrottle: 0.0001,
  elasticity: 1,
  initialPressure: -1,
  builtInShape: BUILT_IN_SHAPE,
  audienceTimeZone: null,
  releaseCap: DEFAULT_RELEASE_CAP,
  releaseHeadroom: true,
  shapeFloor: 0.05,
  alphaDay: 0.3,
  alphaWeek: 0.5,
  weekBlend: 0.5,
  minCoverage: 0.25,
  evidenceTicks: 6,
  maxGapMs: 300_000,
  leaseSmoothingMs: 300_000,
  tickMs: 10_000,
};

/** Thrown for a configuration value outside its range; the message names the field. */
export class ControllerConfigError extends errorKind('ControllerConfigError', 'pacing.controller-config') {}

/** Merges overrides into the defaults and validates the result. */
export function resolveControllerConfig(
  overrides: Partial<PacingControllerConfig> = {},
): PacingControllerConfig {
  const c = { ...defaultControllerConfig, ...overrides };
  const positive = [
    'horizonMs',
    'kp',
    'errorClamp',
    'aheadClamp',
    'endRampMs',
    'elasticity',
    'tickMs',
    'maxGapMs',
    'leaseSmoothingMs',
  ] as const;
  for (const k of positive) {
    if (!(Number.isFinite(c[k]) && c[k] > 0)) {
      throw new ControllerConfigError(`${k} = ${c[k]}: must be a finite number > 0.`);
    }
  }
  const unit = ['shapeFloor', 'alphaDay', 'alphaWeek', 'weekBlend', 'minCoverage'] as const;
  for (const k of unit) {
    if (!(c[k] >= 0 && c[k] <= 1)) throw new ControllerConfigError(`${k} = ${c[k]}: must be in [0, 1].`);
  }
  if (!(c.ki >= 0 && Number.isFinite(c.ki))) throw new ControllerConfigError(`ki = ${c.ki}: must be ≥ 0.`);
  if (!(c.evidenceTicks >= 0 && Number.isFinite(c.evidenceTicks)))
    throw new ControllerConfigError(`evidenceTicks = ${c.evidenceTicks}: must be a finite number ≥ 0.`);
  if (!(c.marginMs >= 0)) throw new ControllerConfigError(`marginMs = ${c.marginMs}: must be ≥ 0.`);
  if (!(c.minMultiplier > 0 && c.minMultiplier <= 1))
    throw new ControllerConfigError(`minMultiplier = ${c.minMultiplier}: must be in (0, 1].`);
  if (!(c.minThrottle > 0 && c.minThrottle <= 1))
    throw new ControllerConfigError(`minThrottle = ${c.minThrottle}: must be in (0, 1].`);
  if (!(c.releaseCap >= 0 && c.releaseCap <= 0.05))
    throw new ControllerConfigError(`releaseCap = ${c.releaseCap}: must be in [0, 0.05].`);
  if (!(c.capStep >= 0 && c.capStep < 1))
    throw new ControllerConfigError(`capStep = ${c.capStep}: must be in [0, 1).`);
  const shape = c.builtInShape;
  if (
    shape !== null &&
    !(Array.isArray(shape) && shape.length === 24 && shape.every((v) => v >= 0) && shape.some((v) => v > 0))
  )
    throw new ControllerConfigError('builtInShape: give 24 numbers ≥ 0 (local hours 0–23), one > 0.');
  if (c.audienceTimeZone !== null && !isTimeZone(c.audienceTimeZone))
    throw new ControllerConfigError(
      `audienceTimeZone = ${JSON.stringify(c.audienceTimeZone)}: give an IANA time zone (e.g. America/New_York) or null.`,
    );
  if (!(c.initialPressure <= 0))
    throw new ControllerConfigError(`initialPressure = ${c.initialPressure}: must be ≤ 0.`);
  return c;
}

/**
 * The elasticity κ the controller assumes in a market of this auction kind. In a first-price
 * auction spend = bid × P(win | bid), so its true elasticity is 1 + the win rate's (≥ 1; about 2
 * at the win rates a paced plan bids at): κ = 2 learns a day's shape in one day there and stays
 * stable for any true elasticity above 1. In a second-price auction the true elasticity can be
 * well below 1 (a bid far above the clearing prices pays them whatever its multiplier), where
 * κ = 2 makes the day-over-day forecast oscillate; κ = 1 is stable down to 0.5.
 */
export function elasticityOf(auction: 'first-price' | 'second-price'): number {
  return auction === 'first-price' ? 2 : 1;
}
