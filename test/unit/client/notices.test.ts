/**
 * Notice URLs: what the exchange gets (the OpenRTB macros literal, ids percent-encoded) and what
 * the notice endpoint turns them into — spend events track-spend's own decoder accepts, with the
 * clearing price converted from the substituted ${AUCTION_PRICE}; a mangled notice still becomes
 * an event, which track-spend quarantines with its reason.
 */
import { describe, expect, it } from 'vitest';
import {
  AUCTION_LOSS_MACRO,
  AUCTION_PRICE_MACRO,
  NoticeUrlError,
  noticeEvent,
  noticeUrls,
  spendPartitionKey,
} from '../../../shared/client/notices.js';
import {
  AuctionPriceMacroError,
  decodeSpendEvent,
  encodeSpendEvent,
  SpendSchemaError,
} from '../../../shared/spend/events.js';

const bid = {
  bidId: 'b/1&x=2',
  campaignId: 'c1',
  armId: 'A',
  bidAt: 1_763_700_000_000,
  bidPriceMicros: 3_000,
};
const AT = 1_763_700_004_000;

describe('noticeUrls', () => {
  it('builds nurl, burl and lurl carrying the bid, with the macros left literal', () => {
    const u = noticeUrls('https://ads.example.com/notice/', bid);
    expect(u.nurl).toBe(
      `https://ads.example.com/notice/win?b=b%2F1%26x%3D2&c=c1&a=A&t=1763700000000&p=3000&price=${AUCTION_PRICE_MACRO}`,
    );
    expect(u.burl).toContain('/notice/billing?');
    expect(u.lurl).toMatch(/\/notice\/loss\?.*&loss=\$\{AUCTION_LOSS\}$/);
  });

  it('refuses a base URL with a query or of another scheme', () => {
    expect(() => noticeUrls('https://ads.example.com/n?x=1', bid)).toThrow(NoticeUrlError);
    expect(() => noticeUrls('ftp://ads.example.com/n', bid)).toThrow(/http\(s\) URL/);
  });
});

describe('noticeEvent', () => {
  it('turns a win and a billing notice into the win event track-spend books (CPM → micros)', () => {
    const u = noticeUrls('https://ads.example.com/notice', bid);
    for (const url of [u.nurl, u.burl]) {
      const event = noticeEvent(url.replace(AUCTION_PRICE_MACRO, '2.10'), AT);
      expect(decodeSpendEvent(encodeSpendEvent(event))).toEqual({
        v: 1,
        type: 'win',
        ...bid,
        at: AT,
        clearingPriceMicros: 2_100,
      });
    }
  });

  it('turns a loss notice into a loss event', () => {
    const u = noticeUrls('https://ads.example.com/notice', { ...bid, armId: undefined });
    const event = noticeEvent(new URL(u.lurl.replace(AUCTION_LOSS_MACRO, '102')), AT);
    expect(decodeSpendEvent(encodeSpendEvent(event))).toEqual({
      v: 1,
      type: 'loss',
      bidId: bid.bidId,
      campaignId: 'c1',
      bidAt: bid.bidAt,
      bidPriceMicros: 3_000,
      at: AT,
    });
  });

  it('keeps a mangled notice as an event, so track-spend quarantines it with its reason', () => {
    const u = noticeUrls('https://ads.example.com/notice', bid);
    // The exchange did not substitute the macro.
    expect(() => decodeSpendEvent(encodeSpendEvent(noticeEvent(u.nurl, AT)))).toThrow(AuctionPriceMacroError);
    // A proxy dropped the bid time.
    const noTime = noticeEvent(u.nurl.replace(/&t=\d+/, '').replace(AUCTION_PRICE_MACRO, '1'), AT);
    expect(() => decodeSpendEvent(encodeSpendEvent(noTime))).toThrow(SpendSchemaError);
    // A bid time in seconds stays visible in the reason.
    const seconds = noticeEvent(
      u.nurl.replace('t=1763700000000', 't=1763700000').replace(AUCTION_PRICE_MACRO, '1'),
      AT,
    );
    expect(() => decodeSpendEvent(encodeSpendEvent(seconds))).toThrow(/seconds/);
  });

  it('refuses a URL that is not a notice path', () => {
    expect(() => noticeEvent('https://ads.example.com/notice/click?b=1', AT)).toThrow(NoticeUrlError);
  });
});

describe('spendPartitionKey', () => {
  it('is <campaign>/<bid>, never empty, at most 256 characters', () => {
    expect(spendPartitionKey({ campaignId: 'c1', bidId: 'b1' })).toBe('c1/b1');
    expect(spendPartitionKey({ campaignId: 'c', bidId: 'x'.repeat(300) })).toHaveLength(256);
    expect(spendPartitionKey({} as never)).toBe('/');
  });
});
