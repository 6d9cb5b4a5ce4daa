/**
 * The pacing controller package: the controller the pacer runs for every plan every tick, the
 * rule ad servers use to combine the parameters of the plans of one bid, the fail-safe policy for
 * stale or missing parameters, and the guard's view of the published curve. Design:
 * docs/pacing.md ("Controller").
 */
export { type Actuators, actuatorsOf, lowestPressure } from './actuators.js';
export type { PacingController, PlanStep, PlanTickInput } from './api.js';
export {
  type BidPacing,
  combineForBid,
  FAIL_SAFE_MULTIPLIER,
  FAIL_SAFE_THROTTLE,
  type FailSafeOptions,
  failSafeParams,
} from './combine.js';
export { defaultControllerConfig, elasticityOf, type PacingControllerConfig } from './config.js';
export { createPacingController, type PaceController, PacingInputError } from './controller.js';
export type { TrafficForecast } from './forecast.js';
// The linear baseline (spend ∝ time of day, no feedback): the simulator's "linear" strategy and
// a reference the controller's tests compare against.
export { createLinearController, linearCurve } from './linear.js';
export type { ControllerState } from './state.js';
export { publishedCurve } from './target-curve.js';
