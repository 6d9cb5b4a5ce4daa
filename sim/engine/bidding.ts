/**
 * The ad-server and auction phase of one request, as both engines run it: each eligible campaign
 * with budgets reads its pacing (throttle, bid multiplier) from the server's reader, draws its
 * valuation, asks the server's guard, and the bids that pass meet the market's best competing bid
 * in one auction; the winner's click and every bid's notices are drawn after it. Every losing bid
 * is reported as lost to another of ours or to the market (the report's self-competition figures).
 */
import type { PacingReader } from '../../shared/pacing/reader.js';
import type { Random } from '../../shared/random/prng.js';
import type { BudgetGuard } from '../../shared/spend/guard.js';
import type { SpendTracker } from '../../shared/spend/tracker.js';
import { armOf } from '../engine-parts.js';
import {
  type AuctionBid,
  type BidLoss,
  gaussian,
  outcomeOf,
  plannedNotices,
  runAuction,
} from '../market/index.js';
import type { Scenario } from '../scenario.js';
import { mix } from './market.js';
import type { CampaignRun, ReusableBid } from './world.js';

/** A notice's event, as the exchange sends it. */
export type NoticeEvent = Parameters<SpendTracker['apply']>[0];

/** An ad server: its reader of the published parameters and its guard. */
export interface AdServer {
  readonly reader: PacingReader;
  readonly guard: BudgetGuard;
}

/** A bidder of one auction (pooled: one object per concurrent bidder slot, not per bid). */
interface Bidder extends AuctionBid<number> {
  key: number;
  bidMicros: number;
  armId: string | undefined;
}

/** What the engine does with an auction's outcome. */
export interface AuctionSink<T> {
  /** A won impression (`clicked` drawn), charged `priceMicros`. */
  win(c: CampaignRun<T>, armId: string | undefined, at: number, priceMicros: number, clicked: boolean): void;
  /** A notice of a bid, due at `at`. */
  notice(c: CampaignRun<T>, at: number, event: NoticeEvent): void;
  /** A bid made at `at` that lost: to another of our bids (`own`) or to the market. */
  lost(c: CampaignRun<T>, armId: string | undefined, at: number, outcome: BidLoss): void;
}

/** Runs requests' bids and auctions (module comment); counts auctions and bids. */
export class Auctioneer<T> {
  auctions = 0;
  bids = 0;
  private bidNo = 0;
  private readonly bidders: Bidder[] = [];
  private readonly pool: Bidder[] = [];
  private readonly valuations: { median: number; sigma: number }[];

  constructor(
    private readonly scenario: Scenario,
    private readonly campaigns: readonly CampaignRun<T>[],
    private readonly random: Random,
    /** The largest bid (bids above are capped at it): the guards' minimum float. */
    private readonly cap: number,
    private readonly sink: AuctionSink<T>,
  ) {
    this.valuations = campaigns.map((c) => ({ median: c.spec.medianBidMicros, sigma: c.spec.bidSigma }));
  }

  /**
   * Request `id` at `at` on `server`: the eligible campaigns' bids and their auction. Returns the
   * number of bids (0: no auction).
   */
  run(
    id: number,
    at: number,
    competingMicros: number,
    eligible: readonly CampaignRun<T>[],
    server: AdServer,
  ): number {
    const { bidders, pool, random } = this;
    bidders.length = 0;
    for (const c of eligible) {
      if (!c.budgets) continue;
      const u = mix(id, c.salt);
      if (u >= c.spec.reach) continue;
      const armId = armOf(c.spec, u);
      const pacing = server.reader.forBid(c.spec.accountId, c.spec.id, armId);
      if (pacing.throttle < 1 && random() >= pacing.throttle) continue;
      const v = this.valuations[c.index] as { median: number; sigma: number };
      const value = v.median * Math.exp(v.sigma * gaussian(random));
      const bid = Math.min(this.cap, Math.max(1, Math.round(value * pacing.bidMultiplier)));
      const question = c.guardBids.get(armId ?? '') as ReusableBid;
      question.priceMicros = bid;
      if (server.guard.decide(question) !== 'bid') continue;
      let b = pool[bidders.length];
      if (!b) {
        b = { key: 0, bidMicros: 0, armId: undefined };
        pool.push(b);
      }
      b.key = c.index;
      b.bidMicros = bid;
      b.armId = armId;
      bidders.push(b);
    }
    if (bidders.length === 0) return 0;
    this.auctions++;
    this.bids += bidders.length;
    this.settle(at, competingMicros);
    return bidders.length;
  }

  private settle(at: number, competingMicros: number): void {
    const { scenario, random, sink } = this;
    const result = runAuction(
      scenario.market.auction,
      this.bidders,
      competingMicros,
      scenario.market.floorMicros,
    );
    for (const b of this.bidders) {
      const c = this.campaigns[b.key] as CampaignRun<T>;
      const outcome = outcomeOf(result, b.key);
      const won = outcome === 'won';
      if (won) sink.win(c, b.armId, at, result.priceMicros, random() < c.spec.ctr);
      else sink.lost(c, b.armId, at, outcome);
      const bidId = `b${++this.bidNo}`;
      for (const pn of plannedNotices(won, at, scenario.notices, random))
        sink.notice(
          c,
          pn.at,
          noticeEvent(pn.kind, bidId, c.spec.id, b.armId, at, b.bidMicros, pn.at, result.priceMicros),
        );
    }
  }
}

/** A win or loss notice of a bid, as the exchange sends it (built without spreads: hot path). */
export function noticeEvent(
  kind: 'win' | 'loss',
  bidId: string,
  campaignId: string,
  armId: string | undefined,
  bidAt: number,
  bidPriceMicros: number,
  at: number,
  clearingPriceMicros: number,
): NoticeEvent {
  if (kind === 'win')
    return armId === undefined
      ? { v: 1, type: 'win', bidId, campaignId, bidAt, bidPriceMicros, at, clearingPriceMicros }
      : { v: 1, type: 'win', bidId, campaignId, armId, bidAt, bidPriceMicros, at, clearingPriceMicros };
  return armId === undefined
    ? { v: 1, type: 'loss', bidId, campaignId, bidAt, bidPriceMicros, at }
    : { v: 1, type: 'loss', bidId, campaignId, armId, bidAt, bidPriceMicros, at };
}

/**
 * The guards' minimum float: the largest bid any campaign makes (its valuation's 99.99th
 * percentile, bids above are capped at it), so a float always covers one bid.
 */
export function minFloat(scenario: Scenario): number {
  let m = 5_000;
  for (const c of scenario.campaigns)
    m = Math.max(m, Math.round(c.medianBidMicros * Math.exp(3.72 * c.bidSigma)));
  return m;
}
