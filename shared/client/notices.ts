/**
 * OpenRTB notice URLs and the spend events they turn into (docs/client.md, "Notice URLs").
 *
 * A bid response carries three URLs the exchange calls back: `nurl` (win notice), `burl` (billing
 * notice) and `lurl` (loss notice). track-spend needs, per notice, the bid id, campaign, arm,
 * `bidAt` (the guard's decide time: it names the budget day and the in-flight slot to release)
 * and the bid price (the in-flight amount) — docs/spend.md, "Events" — so the ad server puts them
 * in the URL itself: a notice is then self-contained, whichever ad-server instance receives it and
 * in whatever order. The clearing price comes from the exchange through the OpenRTB
 * `${AUCTION_PRICE}` macro (decimal CPM), which track-spend converts to micros per impression.
 *
 * Both `nurl` and `burl` become `win` events: the ledger books a bid exactly once (conditional
 * put per bid id, the first notice's price wins), so an exchange that calls both is counted once.
 */
import { errorKind } from '../errors.js';
import { type LossEvent, SPEND_EVENT_VERSION, type SpendEvent, type WinEvent } from '../spend/events.js';

/** The OpenRTB clearing-price macro, substituted by the exchange (decimal CPM). */
// biome-ignore lint/suspicious/noTemplateCurlyInString: the literal OpenRTB macro, not a template.
export const AUCTION_PRICE_MACRO = '${AUCTION_PRICE}';
/** The OpenRTB loss-reason macro (an integer code), substituted by the exchange in `lurl`. */
// biome-ignore lint/suspicious/noTemplateCurlyInString: the literal OpenRTB macro, not a template.
export const AUCTION_LOSS_MACRO = '${AUCTION_LOSS}';

/** Which notice a URL is. */
export type NoticeKind = 'win' | 'billing' | 'loss';

/** What a notice URL carries about its bid. */
export interface NoticeBid {
  readonly bidId: string;
  readonly campaignId: string;
  readonly armId?: string;
  /** The guard's decide time, epoch ms. */
  readonly bidAt: number;
  /** The bid price (in-flight amount), integer micros per impression. */
  readonly bidPriceMicros: number;
}

/** The three notice URLs of one bid. */
export interface NoticeUrls {
  /** OpenRTB `nurl` (win notice). */
  readonly nurl: string;
  /** OpenRTB `burl` (billing notice). */
  readonly burl: string;
  /** OpenRTB `lurl` (loss notice). */
  readonly lurl: string;
}

/** Query parameter names (short: exchanges cap URL lengths). */
const P = {
  bidId: 'b',
  campaignId: 'c',
  armId: 'a',
  bidAt: 't',
  bidPriceMicros: 'p',
  price: 'price',
  loss: 'loss',
} as const;

/** A notice URL that cannot be read (not one this client built, or mangled on the way). */
export class NoticeUrlError extends errorKind('NoticeUrlError', 'client.notice-url') {}

function noticeUrl(baseUrl: string, kind: NoticeKind, bid: NoticeBid): string {
  const base = baseUrl.endsWith('/') ? baseUrl.slice(0, -1) : baseUrl;
  const q = [
    `${P.bidId}=${encodeURIComponent(bid.bidId)}`,
    `${P.campaignId}=${encodeURIComponent(bid.campaignId)}`,
    ...(bid.armId === undefined ? [] : [`${P.armId}=${encodeURIComponent(bid.armId)}`]),
    `${P.bidAt}=${bid.bidAt}`,
    `${P.bidPriceMicros}=${bid.bidPriceMicros}`,
    // The macros stay literal (not percent-encoded): the exchange must recognise them.
    kind === 'loss' ? `${P.loss}=${AUCTION_LOSS_MACRO}` : `${P.price}=${AUCTION_PRICE_MACRO}`,
  ];
  return `${base}/${kind}?${q.join('&')}`;
}

/**
 * The `nurl`, `burl` and `lurl` of a bid: `<baseUrl>/<win|billing|loss>?b=<bidId>&c=<campaign>
 * [&a=<arm>]&t=<bidAt>&p=<bidPriceMicros>&price=${AUCTION_PRICE}` (`&loss=${AUCTION_LOSS}` on
 * the loss URL). Ids are percent-encoded; the macros are left literal for the exchange.
 */
export function noticeUrls(baseUrl: string, bid: NoticeBid): NoticeUrls {
  if (!/^https?:\/\/[^?#]+$/.test(baseUrl)) {
    throw new NoticeUrlError(
      `noticeBaseUrl ${JSON.stringify(baseUrl)} must be an http(s) URL without query or fragment, e.g. https://ads.example.com/notice.`,
    );
  }
  return {
    nurl: noticeUrl(baseUrl, 'win', bid),
    burl: noticeUrl(baseUrl, 'billing', bid),
    lurl: noticeUrl(baseUrl, 'loss', bid),
  };
}

/** A number field as sent, or the raw text when it is not one (so a quarantine reason shows it). */
function numberOrRaw(raw: string | null): number | string | undefined {
  if (raw === null) return undefined;
  return /^\d{1,16}$/.test(raw) ? Number(raw) : raw;
}

/**
 * The spend event of a notice the exchange called (`nurl` / `burl` → `win`, `lurl` → `loss`),
 * stamped `at = nowMs`. The fields are taken as sent, without judging them: the event goes on the
 * spend stream anyway and track-spend validates it, so a mangled notice (an unsubstituted macro,
 * a price in the wrong unit) is quarantined with its reason and can be replayed once understood,
 * never silently dropped by the ad server. Only a URL that is not a notice path of this client
 * at all throws {@link NoticeUrlError}.
 */
export function noticeEvent(url: string | URL, nowMs: number): SpendEvent {
  const u = typeof url === 'string' ? new URL(url, 'http://notice.invalid') : url;
  const kind = u.pathname.split('/').pop();
  if (kind !== 'win' && kind !== 'billing' && kind !== 'loss') {
    throw new NoticeUrlError(
      `Notice path ${JSON.stringify(u.pathname)} does not end in /win, /billing or /loss: not a notice URL from noticeUrls().`,
    );
  }
  const q = u.searchParams;
  const armId = q.get(P.armId);
  // Unvalidated on purpose (see above): the cast only names the intended shape.
  const base = {
    v: SPEND_EVENT_VERSION,
    bidId: q.get(P.bidId) ?? undefined,
    campaignId: q.get(P.campaignId) ?? undefined,
    ...(armId === null ? {} : { armId }),
    bidAt: numberOrRaw(q.get(P.bidAt)),
    bidPriceMicros: numberOrRaw(q.get(P.bidPriceMicros)),
    at: nowMs,
  };
  if (kind === 'loss') return { ...base, type: 'loss' } as unknown as LossEvent;
  return { ...base, type: 'win', auctionPrice: q.get(P.price) ?? undefined } as unknown as WinEvent;
}

/**
 * Partition key of a spend event on the spend stream: `<campaignId>/<bidId>`. A bid's bid, win
 * and loss events share a shard (kept in order), while a hot campaign's bids spread over every
 * shard (a per-campaign key would pin it to one shard's 1,000 records/s). Cut to Kinesis's 256
 * characters; never empty.
 */
export function spendPartitionKey(event: Pick<SpendEvent, 'campaignId' | 'bidId'>): string {
  return `${String(event.campaignId ?? '')}/${String(event.bidId ?? '')}`.slice(0, 256);
}
