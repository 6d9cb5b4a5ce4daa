/**
 * Spend-event decoding: valid bids / wins / losses decode; every kind of bad record is rejected
 * with its own MalformedRecordError subclass and stable reason code (so it is quarantined, never
 * dropped); the OpenRTB ${AUCTION_PRICE} convention converts exactly.
 */
import { describe, expect, it } from 'vitest';
import { MalformedRecordError } from '../../../shared/quarantine/quarantine.js';
import {
  AuctionPriceMacroError,
  auctionPriceToMicros,
  decodeSpendEvent,
  encodeSpendEvent,
  InvalidPriceError,
  SpendSchemaError,
  UnknownBidError,
} from '../../../shared/spend/events.js';

const at = Date.parse('2026-11-21T12:00:00Z');
const win = { v: 1, type: 'win', bidId: 'b-1', campaignId: 'c1', bidAt: at - 5000, bidPriceMicros: 3000, at };
const enc = (o: unknown) => Buffer.from(JSON.stringify(o));
/** The OpenRTB macro as an exchange that forgot to substitute it sends it. */
// biome-ignore lint/suspicious/noTemplateCurlyInString: the literal macro text is the test input
const MACRO = '${AUCTION_PRICE}';

function reason(o: unknown): string {
  try {
    decodeSpendEvent(typeof o === 'string' ? Buffer.from(o) : enc(o));
  } catch (error) {
    expect(error).toBeInstanceOf(MalformedRecordError);
    return (error as MalformedRecordError).reasonCode;
  }
  throw new Error('expected a rejection');
}

describe('decodeSpendEvent', () => {
  it('decodes bids, wins and losses and round-trips', () => {
    const bid = {
      v: 1,
      type: 'bid',
      bidId: 'b-1',
      campaignId: 'c1',
      armId: 'A',
      bidAt: at,
      bidPriceMicros: 3000,
    } as const;
    expect(decodeSpendEvent(encodeSpendEvent(bid))).toEqual(bid);
    expect(decodeSpendEvent(enc({ ...win, clearingPriceMicros: 2100 }))).toMatchObject({
      type: 'win',
      clearingPriceMicros: 2100,
    });
    expect(decodeSpendEvent(enc({ ...win, type: 'loss' }))).toMatchObject({ type: 'loss', at });
  });

  it('accepts the exchange-substituted OpenRTB AUCTION_PRICE macro value (decimal CPM)', () => {
    expect(decodeSpendEvent(enc({ ...win, auctionPrice: '2.5' }))).toMatchObject({
      clearingPriceMicros: 2500,
    });
    expect(auctionPriceToMicros('0.0015')).toBe(2); // 1.5 micros rounds half up
    expect(auctionPriceToMicros('1.2344')).toBe(1234);
    expect(auctionPriceToMicros('3')).toBe(3000);
  });

  it.each([
    ['not json', 'spend.not-json'],
    [[1, 2], 'spend.not-object'],
    [{ ...win, v: 2 }, 'spend.unsupported-version'],
    [{ ...win, type: 'click' }, 'spend.unknown-type'],
    [{ ...win, campaignId: 'c{1}' }, 'spend.invalid-field'],
    [{ ...win, bidAt: at / 1000 }, 'spend.invalid-time'],
    [{ ...win, clearingPriceMicros: -1 }, 'spend.price-negative'],
    [{ ...win, clearingPriceMicros: 'NaN' }, 'spend.price-nan'],
    [{ ...win, clearingPriceMicros: 1.5 }, 'spend.price-not-integer'],
    [{ ...win, bidPriceMicros: 5e9, clearingPriceMicros: 5e9 }, 'spend.price-absurd'],
    [{ ...win, clearingPriceMicros: 3001 }, 'spend.clearing-above-bid'],
    [{ ...win, auctionPrice: MACRO }, 'spend.unsubstituted-macro'],
    [{ ...win, auctionPrice: 'AAABBBCCC' }, 'spend.auction-price-format'],
    [{ ...win, auctionPrice: 2.5 }, 'spend.auction-price-format'],
    [{ ...win }, 'spend.missing-price'],
    [{ ...win, clearingPriceMicros: 1, auctionPrice: '1' }, 'spend.ambiguous-price'],
    [{ ...win, bidAt: at + 3_600_000, clearingPriceMicros: 1 }, 'spend.notice-before-bid'],
  ])('rejects %j as %s', (input, code) => {
    expect(reason(input)).toBe(code);
  });

  it('uses one error class per kind of problem', () => {
    expect(() => decodeSpendEvent(enc({ ...win, clearingPriceMicros: -1 }))).toThrow(InvalidPriceError);
    expect(() => decodeSpendEvent(enc({ ...win, auctionPrice: MACRO }))).toThrow(AuctionPriceMacroError);
    expect(() => decodeSpendEvent(enc({ ...win, v: 9 }))).toThrow(SpendSchemaError);
    expect(() => decodeSpendEvent(enc({ ...win, bidAt: at + 3_600_000, clearingPriceMicros: 1 }))).toThrow(
      UnknownBidError,
    );
  });
});
