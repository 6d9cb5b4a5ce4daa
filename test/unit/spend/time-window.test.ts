/**
 * The spend booking window: times are checked against the consumer's clock — a bid or
 * notice further ahead than the skew, or a bid older than the maximum age, is rejected with its
 * own reason code (quarantined, never booked); reasons quote field values in bounded form.
 */
import { describe, expect, it } from 'vitest';
import { bounded, DEAD_LETTER_LIMITS } from '../../../shared/quarantine/dead-letter-store.js';
import { MalformedRecordError } from '../../../shared/quarantine/quarantine.js';
import {
  checkSpendTimes,
  decodeSpendEvent,
  defaultSpendLimits,
  preview,
  type SpendEvent,
} from '../../../shared/spend/events.js';

const now = Date.parse('2026-11-21T12:00:00Z');
const DAY = 86_400_000;
const win = (bidAt: number, at = bidAt + 1000): SpendEvent => ({
  v: 1,
  type: 'win',
  bidId: 'b',
  campaignId: 'c',
  bidAt,
  bidPriceMicros: 10,
  at,
  clearingPriceMicros: 5,
});

function reason(event: SpendEvent, limits = defaultSpendLimits): string | undefined {
  try {
    checkSpendTimes(event, now, limits);
    return undefined;
  } catch (error) {
    expect(error).toBeInstanceOf(MalformedRecordError);
    return (error as MalformedRecordError).reasonCode;
  }
}

describe('spend time window', () => {
  it('books times inside the window, edges included', () => {
    const skew = defaultSpendLimits.clockSkewMs;
    expect(reason(win(now - 5000))).toBeUndefined();
    expect(reason(win(now + skew, now + skew))).toBeUndefined();
    expect(reason(win(now - defaultSpendLimits.maxBidAgeMs))).toBeUndefined();
    expect(
      reason({ v: 1, type: 'bid', bidId: 'b', campaignId: 'c', bidAt: now, bidPriceMicros: 1 }),
    ).toBeUndefined();
  });

  it('rejects the future, the distant past and notices from the future, each with its reason', () => {
    const skew = defaultSpendLimits.clockSkewMs;
    expect(reason(win(now + skew + 1, now + skew + 1))).toBe('spend.bid-in-future');
    expect(reason(win(now + DAY))).toBe('spend.bid-in-future');
    expect(reason(win(Date.parse('2200-01-01T00:00:00Z')))).toBe('spend.bid-in-future');
    expect(reason(win(Date.parse('2001-09-10T00:00:00Z')))).toBe('spend.bid-too-old');
    expect(reason(win(now - defaultSpendLimits.maxBidAgeMs - 1))).toBe('spend.bid-too-old');
    expect(reason(win(now - 1000, now + skew + 1))).toBe('spend.notice-in-future');
    expect(
      reason({
        v: 1,
        type: 'loss',
        bidId: 'b',
        campaignId: 'c',
        bidAt: now,
        bidPriceMicros: 1,
        at: now + DAY,
      }),
    ).toBe('spend.notice-in-future');
    // A larger maximum age books an old, genuine notice on replay.
    expect(reason(win(now - 10 * DAY), { ...defaultSpendLimits, maxBidAgeMs: 30 * DAY })).toBeUndefined();
  });

  it('says what to check', () => {
    expect(() => checkSpendTimes(win(now + DAY), now)).toThrow(/check the ad server's clock/);
    expect(() => checkSpendTimes(win(now - 30 * DAY), now)).toThrow(/SPEND_MAX_BID_AGE_MS/);
  });
});

describe('bounded reasons', () => {
  it('quote a huge field value in a bounded form', () => {
    const huge = 'x'.repeat(900 * 1024);
    expect(preview(huge).length).toBeLessThan(100);
    let message = '';
    try {
      decodeSpendEvent(Buffer.from(JSON.stringify({ ...win(now), bidId: huge })));
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/bidId="xxx.*… \(921602 chars\)/);
    expect(message.length).toBeLessThan(300);
  });

  it('cut any text to the store limit and say so', () => {
    const cut = bounded('y'.repeat(10_000), DEAD_LETTER_LIMITS.reasonChars);
    expect(cut.length).toBe(DEAD_LETTER_LIMITS.reasonChars);
    expect(cut).toMatch(/\[cut, 10000 chars\]$/);
    expect(bounded('short', 10)).toBe('short');
  });
});
