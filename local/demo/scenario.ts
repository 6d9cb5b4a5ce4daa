/**
 * What `npm run demo` seeds and how its simulated ad server behaves: pure functions of the
 * options and an injected random source (so the unit tests pin them down). The I/O — the budgets
 * table, the streams, the guard — is in `traffic.ts`.
 */
import type { Account, BudgetPlan, Campaign } from '../../shared/budget/model.js';
import { type ActionEvent, encodeActionEvent } from '../../shared/counting/event-encode.js';
import type { Random } from '../../shared/random/prng.js';
import { encodeSpendEvent, type SpendEvent } from '../../shared/spend/events.js';

/** The demo's budget model. */
export interface DemoBudgets {
  readonly accounts: readonly Account[];
  readonly campaigns: readonly Campaign[];
  readonly plans: readonly BudgetPlan[];
}

/** A campaign the traffic driver bids for. */
export interface DemoCampaign {
  readonly accountId: string;
  readonly campaignId: string;
  /** Numeric ids for action events (the counting schema's u64 dimensions). */
  readonly advertiserNumber: number;
  readonly campaignNumber: number;
  /** Share of requests eligible for this campaign (relative weight). */
  readonly weight: number;
  /** What the bidder would pay without pacing, micros per impression. */
  readonly basePriceMicros: number;
}

/** Options of {@link demoBudgets}. */
export interface DemoShape {
  /** @default 3 */
  readonly accounts?: number;
  /** @default 3 */
  readonly campaignsPerAccount?: number;
  /** Prefix of every id, so two demos (or a demo and a test) do not collide. @default 'demo' */
  readonly prefix?: string;
}

/** Time zones of the demo accounts, in turn: budget days start at different instants. */
export const DEMO_TIME_ZONES = ['UTC', 'America/New_York', 'Europe/Berlin', 'Asia/Tokyo'] as const;

/**
 * Accounts, campaigns and daily plans: campaign budgets from $40 to several hundred dollars, the
 * last campaign of each account in `asap` mode, and an account plan below the sum of its
 * campaigns' (so the account cap binds too). Ids are stable: seeding twice updates, never
 * duplicates.
 */
export function demoBudgets(shape: DemoShape = {}): { budgets: DemoBudgets; campaigns: DemoCampaign[] } {
  const nAccounts = shape.accounts ?? 3;
  const perAccount = shape.campaignsPerAccount ?? 3;
  const prefix = shape.prefix ?? 'demo';
  const accounts: Account[] = [];
  const campaigns: Campaign[] = [];
  const plans: BudgetPlan[] = [];
  const demoCampaigns: DemoCampaign[] = [];
  for (let a = 0; a < nAccounts; a++) {
    const accountId = `${prefix}-acct-${a + 1}`;
    accounts.push({
      accountId,
      name: `Demo advertiser ${a + 1}`,
      timeZone: DEMO_TIME_ZONES[a % DEMO_TIME_ZONES.length] as string,
      currency: 'USD',
    });
    let accountTotal = 0;
    for (let c = 0; c < perAccount; c++) {
      const campaignId = `${prefix}-camp-${a + 1}-${c + 1}`;
      const budgetMicros = (40 + 160 * ((a * perAccount + c) % 5)) * 1_000_000;
      accountTotal += budgetMicros;
      campaigns.push({ campaignId, accountId, name: `Demo campaign ${a + 1}.${c + 1}`, status: 'active' });
      plans.push({
        level: 'campaign',
        accountId,
        campaignId,
        dailyBudgetMicros: budgetMicros,
        pacingMode: c === perAccount - 1 && perAccount > 1 ? 'asap' : 'even',
      });
      demoCampaigns.push({
        accountId,
        campaignId,
        advertiserNumber: a + 1,
        campaignNumber: (a + 1) * 1000 + c + 1,
        weight: 1 + ((a + c) % 3),
        basePriceMicros: 1_000 + 500 * ((a + 2 * c) % 4),
      });
    }
    plans.push({
      level: 'account',
      accountId,
      dailyBudgetMicros: Math.floor((accountTotal * 0.8) / 1_000_000) * 1_000_000,
      pacingMode: 'even',
    });
  }
  return { budgets: { accounts, campaigns, plans }, campaigns: demoCampaigns };
}

/** Picks a campaign with probability proportional to its weight. */
export function pickCampaign(campaigns: readonly DemoCampaign[], random: Random): DemoCampaign {
  let total = 0;
  for (const c of campaigns) total += c.weight;
  let r = random() * total;
  for (const c of campaigns) {
    r -= c.weight;
    if (r < 0) return c;
  }
  return campaigns[campaigns.length - 1] as DemoCampaign;
}

/** How auctions end. */
export interface AuctionModel {
  /** Probability a bid wins. @default 0.3 */
  readonly winRate: number;
  /** Probability a lost bid gets a loss notice (the rest expire from in-flight). @default 0.5 */
  readonly lossNoticeRate: number;
  /** Probability an impression is clicked. @default 0.02 */
  readonly clickRate: number;
  /** Notice delay range, ms. @default [200, 3_000] */
  readonly noticeDelayMs: readonly [number, number];
}

/** Default {@link AuctionModel}. */
export const defaultAuctionModel: AuctionModel = {
  winRate: 0.3,
  lossNoticeRate: 0.5,
  clickRate: 0.02,
  noticeDelayMs: [200, 3_000],
};

/** What happens to one bid. */
export type AuctionOutcome =
  | {
      readonly kind: 'win';
      readonly delayMs: number;
      readonly clearingPriceMicros: number;
      readonly clicked: boolean;
    }
  | { readonly kind: 'loss'; readonly delayMs: number; readonly notice: boolean };

/**
 * The outcome of a bid at `bidPriceMicros`: second-price-like clearing prices (50–100 % of the
 * bid, never above it), a notice delay inside the model's range.
 */
export function auctionOutcome(bidPriceMicros: number, model: AuctionModel, random: Random): AuctionOutcome {
  const [lo, hi] = model.noticeDelayMs;
  const delayMs = Math.round(lo + random() * (hi - lo));
  if (random() < model.winRate) {
    const clearingPriceMicros = Math.max(
      1,
      Math.min(bidPriceMicros, Math.round(bidPriceMicros * (0.5 + random() / 2))),
    );
    return { kind: 'win', delayMs, clearingPriceMicros, clicked: random() < model.clickRate };
  }
  return { kind: 'loss', delayMs, notice: random() < model.lossNoticeRate };
}

/** A record for one of the region's streams. */
export interface DemoRecord {
  readonly stream: 'actions' | 'spend';
  readonly data: Buffer;
  readonly partitionKey: string;
}

/** 16 random bytes (an insertion id). */
function randomBytes(random: Random): Buffer {
  const b = Buffer.alloc(16);
  for (let i = 0; i < 16; i++) b[i] = Math.floor(random() * 256);
  return b;
}

/** A spend event record (partition key: the campaign, so its notices stay in order). */
export function spendRecord(event: SpendEvent): DemoRecord {
  return { stream: 'spend', data: encodeSpendEvent(event), partitionKey: event.campaignId };
}

/** An impression or click of a campaign's ad by a user. */
export function actionEvent(
  campaign: DemoCampaign,
  action: 'impression' | 'click',
  userId: number,
  atMs: number,
  random: Random,
): ActionEvent {
  return {
    userId,
    timestamp: atMs,
    insertionId: randomBytes(random),
    action,
    viewType: 'home',
    ad: campaign.campaignNumber * 10 + 1,
    adGroup: campaign.campaignNumber * 10,
    campaign: campaign.campaignNumber,
    advertiser: campaign.advertiserNumber,
  };
}

/** An action event record (partition key: the decimal user id, as docs/counting.md asks). */
export function actionRecord(
  campaign: DemoCampaign,
  action: 'impression' | 'click',
  userId: number,
  atMs: number,
  random: Random,
): DemoRecord {
  return {
    stream: 'actions',
    data: encodeActionEvent(actionEvent(campaign, action, userId, atMs, random)),
    partitionKey: String(userId),
  };
}

/**
 * A poison record, alternating streams: a win with a negative price on the spend stream (the
 * tracker quarantines it as `spend.price-negative`), or a truncated action event on the actions
 * stream. Both must end in the dead-letter table with their reason, never block their shard.
 */
export function poisonRecord(n: number, campaign: DemoCampaign, atMs: number): DemoRecord {
  if (n % 2 === 0) {
    return {
      stream: 'spend',
      data: Buffer.from(
        JSON.stringify({
          v: 1,
          type: 'win',
          bidId: `poison-${n}`,
          campaignId: campaign.campaignId,
          bidAt: atMs,
          at: atMs,
          bidPriceMicros: 1_000,
          clearingPriceMicros: -1_000,
        }),
      ),
      partitionKey: campaign.campaignId,
    };
  }
  return { stream: 'actions', data: Buffer.from([1, 0, 0, 1, 2, 3]), partitionKey: `poison-${n}` };
}
