/**
 * The ad-server call sequence for one bid, in one place (docs/pacing.md shows it; the test
 * `test/integration/pacing/ad-server.test.ts` runs it):
 *
 *   1. read the campaign's pacing parameters (PacingReader, cached, synchronous);
 *   2. throttle: bid on a request with probability `throttle`;
 *   3. bid price × `bidMultiplier`;
 *   4. `BudgetGuard.decide` — the hard cap, whose E(t) is the same published curve
 *      (`publishedCurve(reader)`), so pacing and cap never fight.
 */
import type { BudgetGuard, Decision } from '../spend/guard.js';
import type { PacingReader, PacingStatus } from './reader.js';

/** One bid opportunity of a campaign (and arm). */
export interface BidRequest {
  readonly accountId: string;
  readonly campaignId: string;
  readonly armId?: string;
  /** What the bidder would pay without pacing, micros per impression. */
  readonly basePriceMicros: number;
}

/** What to do with the opportunity. */
export type PacedBid =
  | { readonly bid: true; readonly priceMicros: number; readonly status: PacingStatus }
  | {
      readonly bid: false;
      readonly reason: 'throttled' | Exclude<Decision, 'bid'>;
      readonly status: PacingStatus;
    };

/**
 * Paces one bid: throttle, shade, then ask the guard. `random` returns a number in [0, 1)
 * (injected, like the clock, so tests and simulations are reproducible).
 */
export function paceBid(
  reader: PacingReader,
  guard: BudgetGuard,
  request: BidRequest,
  random: () => number,
): PacedBid {
  const p = reader.forBid(request.accountId, request.campaignId, request.armId);
  if (random() >= p.throttle) return { bid: false, reason: 'throttled', status: p.status };
  const priceMicros = Math.max(1, Math.floor(request.basePriceMicros * p.bidMultiplier));
  const decision = guard.decide({
    campaignId: request.campaignId,
    ...(request.armId === undefined ? {} : { armId: request.armId }),
    priceMicros,
  });
  if (decision !== 'bid') return { bid: false, reason: decision, status: p.status };
  return { bid: true, priceMicros, status: p.status };
}
