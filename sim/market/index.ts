/**
 * A simple, reusable market for pacing simulations (the controller's soak tests and the market
 * simulator): per-minute bid-request traffic from an hourly shape with noise,
 * competing bids sampled from real iPinYou clearing prices, second- or first-price auctions,
 * win/loss notices with delay, loss and duplication. Deterministic for a seed.
 */
import { prng, type Random } from '../../shared/random/prng.js';
import type { AuctionKind } from './auction.js';
import { loadIpinyouHistogram, type PriceSampler, priceSampler } from './prices.js';
import { gaussian, TrafficModel, type TrafficOptions } from './traffic.js';

export * from './auction.js';
export * from './notices.js';
export * from './prices.js';
export * from './traffic.js';

/** One bid request of the market. */
export interface MarketRequest {
  /** When it arrives, epoch ms. */
  readonly at: number;
  /** The best competing bid in its auction, micros per impression. */
  readonly competingMicros: number;
  /** A uniform number for eligibility draws (the same request is eligible for the same campaigns whatever the strategy). */
  readonly audience: number;
}

/** Settings of a {@link Market}. */
export interface MarketOptions {
  readonly traffic: TrafficOptions;
  /** iPinYou campaign whose clearing prices are the competing bids. @default '1458' */
  readonly priceCampaign?: string;
  /** Micros per impression per histogram unit (fen CPM). @default 10 */
  readonly microsPerUnit?: number;
  /** Multiplies competing prices over [fromMs, toMs) (market shifts). */
  readonly priceShifts?: readonly { fromMs: number; toMs: number; factor: number }[];
  readonly auction: AuctionKind;
  /** Reserve price, micros per impression. @default 0 */
  readonly floorMicros?: number;
  readonly seed: number;
}

/** The market. */
export class Market {
  readonly prices: PriceSampler;
  private readonly traffic: TrafficModel;
  private readonly random: Random;

  constructor(readonly options: MarketOptions) {
    this.random = prng(options.seed);
    this.traffic = new TrafficModel(options.traffic, prng(options.seed ^ 0x5eed));
    const hist = loadIpinyouHistogram(options.priceCampaign ?? '1458');
    this.prices = priceSampler(
      hist,
      options.microsPerUnit === undefined ? {} : { microsPerUnit: options.microsPerUnit },
    );
  }

  /** The requests of the minute starting at `minuteMs`, in time order. */
  minute(minuteMs: number): MarketRequest[] {
    const n = this.traffic.requests(minuteMs);
    const out: MarketRequest[] = [];
    let shift = 1;
    for (const s of this.options.priceShifts ?? [])
      if (minuteMs >= s.fromMs && minuteMs < s.toMs) shift *= s.factor;
    for (let i = 0; i < n; i++) {
      out.push({
        at: minuteMs + Math.floor(this.random() * 60_000),
        competingMicros: Math.round(this.prices.sample(this.random) * shift),
        audience: this.random(),
      });
    }
    return out.sort((a, b) => a.at - b.at);
  }

  /** The auction rule. */
  get auction(): AuctionKind {
    return this.options.auction;
  }

  /** The reserve price. */
  get floorMicros(): number {
    return this.options.floorMicros ?? 0;
  }
}

/** A campaign's valuation: bid prices lognormal around a base. */
export function valuationSampler(baseBidMicros: number, sigma = 0.3): (random: Random) => number {
  return (random) => Math.max(1, Math.round(baseBidMicros * Math.exp(sigma * gaussian(random))));
}
