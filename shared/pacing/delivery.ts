/**
 * Delivery against expectation, as buyers watch it (pure): a plan-day's actual spend over the
 * spend its curve expected by now, in a band — behind under 90 %, ahead over 110 %, on pace in
 * between — and, when behind, the most likely reason read off one snapshot of what the pacer
 * published and what the counters hold (docs/spend.md, "Pacing report").
 */

/** The band's edges: behind below `behind` × expected, ahead above `ahead` × expected. */
export const DELIVERY_BAND = { behind: 0.9, ahead: 1.1 } as const;

/** Where delivery stands against the band. */
export type DeliveryBand = 'behind' | 'on-pace' | 'ahead';

/**
 * Why a plan is behind, from one snapshot:
 * - `stale-parameters`: some region's guards run on the fail-safe curve (nothing fresh published);
 * - `account-cap`: the account's own plan is at its expected spend, so it holds the campaign;
 * - `no-traffic`: bidding at full speed (throttle 1, multiplier 1) with nothing in flight — no
 *   requests it could bid on;
 * - `lost-auctions`: bidding at full speed with bids in flight — it bids and does not win enough;
 * - `catching-up`: not yet at full speed: the pacer is raising the pressure.
 */
export type BehindReason =
  | 'stale-parameters'
  | 'account-cap'
  | 'no-traffic'
  | 'lost-auctions'
  | 'catching-up';

/** What {@link deliveryOf} reads of a plan-day (every region's figures summed). */
export interface DeliveryInput {
  /** Σ over regions of E(now), micros. */
  readonly expectedMicros: number;
  /** Σ over regions of confirmed + in flight, micros. */
  readonly actualMicros: number;
  /** Σ over regions of in-flight bids, micros. */
  readonly inFlightMicros: number;
  /** Every region's published parameters are fresh. */
  readonly fresh: boolean;
  /** Every region publishes throttle 1 and multiplier 1. */
  readonly fullSpeed: boolean;
  /** The account's plan (when the account has one) is within 1 % of its expected spend. */
  readonly accountAtCap: boolean;
}

/** A plan-day's delivery: ratio (null while nothing is expected yet), band, and why it is behind. */
export interface Delivery {
  readonly ratio: number | null;
  readonly band: DeliveryBand;
  readonly reason: BehindReason | null;
}

/** See the module comment. */
export function deliveryOf(d: DeliveryInput): Delivery {
  if (!(d.expectedMicros > 0)) return { ratio: null, band: 'on-pace', reason: null };
  const ratio = d.actualMicros / d.expectedMicros;
  if (ratio > DELIVERY_BAND.ahead) return { ratio, band: 'ahead', reason: null };
  if (ratio >= DELIVERY_BAND.behind) return { ratio, band: 'on-pace', reason: null };
  return { ratio, band: 'behind', reason: behindReason(d) };
}

function behindReason(d: DeliveryInput): BehindReason {
  if (!d.fresh) return 'stale-parameters';
  if (d.accountAtCap) return 'account-cap';
  if (d.fullSpeed) return d.inFlightMicros > 0 ? 'lost-auctions' : 'no-traffic';
  return 'catching-up';
}
