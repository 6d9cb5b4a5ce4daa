/**
 * Settings of the pacing controller (design and tuning: docs/pacing.md, "Controller"). Every
 * setting has a default that the simulator runs were tuned with; a pacer passes overrides only
 * for experiments.
 */

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
  /** The normalised error is clamped to ±this, so one far-off tick cannot slam the output. @default 3 */
  readonly errorClamp: number;
  /**
   * The controller aims this much planned spend (in time at the curve's current slope) below
   * E(t), so its noise stays under the guard's hard cap at E(t) instead of being clipped there.
   * @default 180_000 (3 min)
   */
  readonly marginMs: number;
  /** Over the last `endRampMs` of the day the margin shrinks to 0: the day ends on E = budget. @default 3_600_000 */
  readonly endRampMs: number;
  /** Lowest bid multiplier (bid shading floor); below it the controller throttles. @default 0.25 */
  readonly minMultiplier: number;
  /** Lowest throttle (pass-through rate) published. @default 0.0001 */
  readonly minThrottle: number;
  /**
   * Assumed elasticity κ of spend to the bid multiplier (spend ∝ m^κ). It sets how the single
   * control variable (log-pressure u = ln throttle + κ·ln multiplier) splits into the two
   * actuators and how the forecast converts spend back to demand; a wrong κ only changes loop
   * gain (the integral absorbs it). @default 1
   */
  readonly elasticity: number;
  /** Pressure of a plan with no history and no previous state (0 = full speed). @default 0 */
  readonly initialPressure: number;
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
  marginMs: 180_000,
  endRampMs: 3_600_000,
  minMultiplier: 0.25,
  minThrottle: 0.0001,
  elasticity: 1,
  initialPressure: 0,
  shapeFloor: 0.05,
  alphaDay: 0.3,
  alphaWeek: 0.5,
  weekBlend: 0.5,
  minCoverage: 0.25,
  maxGapMs: 300_000,
  leaseSmoothingMs: 300_000,
  tickMs: 10_000,
};

/** Thrown for a configuration value outside its range; the message names the field. */
export class ControllerConfigError extends Error {
  override readonly name = 'ControllerConfigError';
}

/** Merges overrides into the defaults and validates the result. */
export function resolveControllerConfig(
  overrides: Partial<PacingControllerConfig> = {},
): PacingControllerConfig {
  const c = { ...defaultControllerConfig, ...overrides };
  const positive: (keyof PacingControllerConfig)[] = [
    'horizonMs',
    'kp',
    'errorClamp',
    'endRampMs',
    'elasticity',
    'tickMs',
    'maxGapMs',
    'leaseSmoothingMs',
  ];
  for (const k of positive) {
    if (!(Number.isFinite(c[k]) && c[k] > 0)) {
      throw new ControllerConfigError(`${k} = ${c[k]}: must be a finite number > 0.`);
    }
  }
  const unit: (keyof PacingControllerConfig)[] = [
    'shapeFloor',
    'alphaDay',
    'alphaWeek',
    'weekBlend',
    'minCoverage',
  ];
  for (const k of unit) {
    if (!(c[k] >= 0 && c[k] <= 1)) throw new ControllerConfigError(`${k} = ${c[k]}: must be in [0, 1].`);
  }
  if (!(c.ki >= 0 && Number.isFinite(c.ki))) throw new ControllerConfigError(`ki = ${c.ki}: must be ≥ 0.`);
  if (!(c.marginMs >= 0)) throw new ControllerConfigError(`marginMs = ${c.marginMs}: must be ≥ 0.`);
  if (!(c.minMultiplier > 0 && c.minMultiplier <= 1))
    throw new ControllerConfigError(`minMultiplier = ${c.minMultiplier}: must be in (0, 1].`);
  if (!(c.minThrottle > 0 && c.minThrottle <= 1))
    throw new ControllerConfigError(`minThrottle = ${c.minThrottle}: must be in (0, 1].`);
  if (!(c.initialPressure <= 0))
    throw new ControllerConfigError(`initialPressure = ${c.initialPressure}: must be ≤ 0.`);
  return c;
}
