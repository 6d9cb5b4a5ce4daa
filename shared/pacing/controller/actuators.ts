/**
 * One control variable, two actuators. The controller computes a log-pressure u ≤ 0: the share
 * of full-speed spend it wants is ĝ = e^u. Bid shading comes first — in first-price auctions a
 * throttle saves nothing per impression, and in second-price ones a lower bid wins the cheaper
 * impressions — so u first lowers the bid multiplier m = e^(u/κ) down to its floor, and only
 * then the throttle θ = e^(u − κ ln m_min):  u = ln θ + κ ln m.
 */
import type { PacingControllerConfig } from './config.js';

/** Throttle and bid multiplier of a pressure. */
export interface Actuators {
  readonly throttle: number;
  readonly bidMultiplier: number;
}

/** Lowest pressure: minimum throttle at the minimum multiplier. */
export function lowestPressure(cfg: PacingControllerConfig): number {
  return Math.log(cfg.minThrottle) + cfg.elasticity * Math.log(cfg.minMultiplier);
}

/** Splits a pressure u ≤ 0 into (throttle, multiplier): shading first, then throttling. */
export function actuatorsOf(u: number, cfg: PacingControllerConfig): Actuators {
  const shadeFloor = cfg.elasticity * Math.log(cfg.minMultiplier);
  if (u >= 0) return { throttle: 1, bidMultiplier: 1 };
  if (u >= shadeFloor) return { throttle: 1, bidMultiplier: Math.exp(u / cfg.elasticity) };
  return { throttle: Math.max(cfg.minThrottle, Math.exp(u - shadeFloor)), bidMultiplier: cfg.minMultiplier };
}
