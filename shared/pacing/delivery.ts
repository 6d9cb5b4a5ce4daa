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
 * - `out-of-window`: a dayparted plan whose windows are closed now (it may not bid until one opens);
 * - `stale-parameters`: some region's guards run on the fail-safe curve (nothing fresh published);
 * - `account-cap`: the account's own plan is at its expected spend, so it holds the campaign;
 * - `no-traffic`: bidding at full speed (throttle 1, multiplier 1) with nothing in flight — no
 *   requests it could bid on;
 * - `lost-auctions`: bidding at full speed with bids in flight — it bids and does not win enough;
 * - `catching-up`: not yet at full speed: the pacer is raising the pressure.
 */
export type BehindReason =
  | 'out-of-window'
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
  /** A dayparted plan's windows are closed now (absent: not dayparted, or open). */
  readonly windowClosed?: boolean;
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
  if (d.windowClosed) return 'out-of-window';
  if (!d.fresh) return 'stale-parameters';
  if (d.accountAtCap) return 'account-cap';
  if (d.fullSpeed) return d.inFlightMicros > 0 ? 'lost-auctions' : 'no-traffic';
  return 'catching-up';
}

/** A flight's standing on one of its days (the inputs of {@link flightDeliveryOf}, micros). */
export interface FlightDeliveryInput {
  readonly budgetMicros: number;
  /** 1 = the flight's first day; 0 before it; `days` + 1 after it. */
  readonly dayNumber: number;
  readonly days: number;
  /** Σ of the closed earlier days. */
  readonly closedMicros: number;
  /** Today's budget, today's Σ E(now) and today's actual (confirmed + in flight). */
  readonly todayBudgetMicros: number;
  readonly todayExpectedMicros: number;
  readonly todayActualMicros: number;
  /**
   * The share of the flight due by the end of fraction x of its days (the plan mode's flight
   * schedule, `flightDueShare`); absent: x, the even line.
   */
  readonly dueShare?: (x: number) => number;
}

/** A flight's delivery against its even line. */
export interface FlightDelivery {
  /** The flight's even share of a day, ⌊F ÷ days⌋. */
  readonly evenShareMicros: number;
  /**
   * The line by now: F × (φ(days before today ÷ days) + today's weight × today's curve share), φ
   * the mode's flight schedule (even: x), today's weight φ's rise over today and today's curve
   * share today's E(now) ÷ today's budget (the traffic-shaped part of the day elapsed).
   */
  readonly expectedMicros: number;
  /** Closed days + today's actual. */
  readonly actualMicros: number;
  readonly ratio: number | null;
  readonly band: DeliveryBand;
}

/**
 * Where a flight stands against its line (even over its days, or the mode's schedule): a flight that
 * lost days to low traffic is `behind` until its catch-up (budgets above the even share, up to
 * the cap) brings it back into the band.
 */
export function flightDeliveryOf(f: FlightDeliveryInput): FlightDelivery {
  const share =
    f.dayNumber < 1 || f.dayNumber > f.days
      ? 0
      : f.todayBudgetMicros > 0
        ? Math.min(1, f.todayExpectedMicros / f.todayBudgetMicros)
        : 1;
  const before = Math.min(f.days, Math.max(0, f.dayNumber - 1));
  const due = f.dueShare;
  const expectedMicros = due
    ? Math.round(
        f.budgetMicros *
          (due(before / f.days) +
            (before < f.days ? (due((before + 1) / f.days) - due(before / f.days)) * share : 0)),
      )
    : Math.round((f.budgetMicros * Math.min(f.days, before + share)) / f.days);
  const inFlight = f.dayNumber >= 1 && f.dayNumber <= f.days;
  const actualMicros = f.closedMicros + (inFlight ? f.todayActualMicros : 0);
  const ratio = expectedMicros > 0 ? actualMicros / expectedMicros : null;
  const band: DeliveryBand =
    ratio === null
      ? 'on-pace'
      : ratio > DELIVERY_BAND.ahead
        ? 'ahead'
        : ratio < DELIVERY_BAND.behind
          ? 'behind'
          : 'on-pace';
  return { evenShareMicros: Math.floor(f.budgetMicros / f.days), expectedMicros, actualMicros, ratio, band };
}
