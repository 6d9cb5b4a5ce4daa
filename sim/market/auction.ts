/**
 * Auctions: our bids against the market's best competing bid (sampled from real clearing prices)
 * and the floor. Second price: the winner pays the larger of the runner-up bid, the competing bid
 * and the floor. First price: the winner pays its bid — so only a lower bid (shading), never a
 * throttle, lowers the cost of an impression.
 */

/** Auction rule. */
export type AuctionKind = 'second-price' | 'first-price';

/** One of our bids in an auction. */
export interface AuctionBid<K> {
  readonly key: K;
  readonly bidMicros: number;
}

/** Who won and what they pay. */
export interface AuctionResult<K> {
  /** The winning bid's key, or undefined when the market (or the floor) won. */
  readonly winner: K | undefined;
  /** Price the winner pays, micros (0 when we lost). */
  readonly priceMicros: number;
}

/**
 * How a bid of an auction fared: `won`; `own` — another of our bids won (the portfolio bid against
 * itself); `market` — the competing bid or the floor won.
 */
export type BidOutcome = 'won' | 'own' | 'market';

/** A lost bid's {@link BidOutcome}. */
export type BidLoss = Exclude<BidOutcome, 'won'>;

/** The outcome of the bid keyed `key` in an auction that gave `result`. */
export function outcomeOf<K>(result: AuctionResult<K>, key: K): BidOutcome {
  if (result.winner === undefined) return 'market';
  return result.winner === key ? 'won' : 'own';
}

/**
 * Runs one auction. A tie with the competing bid or the floor is lost (the exchange keeps the
 * incumbent); among our own bids the first of equal bids wins.
 */
export function runAuction<K>(
  kind: AuctionKind,
  bids: readonly AuctionBid<K>[],
  competingMicros: number,
  floorMicros = 0,
): AuctionResult<K> {
  let best: AuctionBid<K> | undefined;
  let second = 0;
  for (const b of bids) {
    if (!best || b.bidMicros > best.bidMicros) {
      if (best) second = Math.max(second, best.bidMicros);
      best = b;
    } else second = Math.max(second, b.bidMicros);
  }
  const bar = Math.max(competingMicros, floorMicros);
  if (!best || best.bidMicros <= bar) return { winner: undefined, priceMicros: 0 };
  return {
    winner: best.key,
    priceMicros: kind === 'first-price' ? best.bidMicros : Math.max(bar, second),
  };
}
