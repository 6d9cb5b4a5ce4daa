/**
 * The store at the timestamp width limit: with the clock near 2^48 − 1 ms (the largest valid
 * timestamp), events up to the limit are stored, deduplicated (re-stamped copies inside, on the
 * edge of and outside the window), trimmed and counted exactly like today's: 15-digit scores
 * reach Redis unrounded from the ingest script (Lua's own number printing keeps 14 significant
 * digits; redis.call converts numbers at full precision, and this test holds it to that), and the
 * set, the log and the reference agree.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ingestRecords } from '../../../shared/counting/ingest.js';
import { MAX_TIMESTAMP_MS } from '../../../shared/counting/schema.js';
import { ActionStore } from '../../../shared/counting/store.js';
import { DAY_MS, HOUR_MS, ManualClock, MINUTE_MS } from '../../../shared/time/clock.js';
import { type RedisUnderTest, startRedisWithClient } from '../../support/redis.js';
import { impressionWire, ReferenceCounter } from './fixtures.js';

let redis: RedisUnderTest;
// Ten minutes before the limit: events up to the limit are within the accepted skew.
const now = MAX_TIMESTAMP_MS - 10 * MINUTE_MS;
const clock = new ManualClock(now);
let store: ActionStore;

beforeAll(async () => {
  redis = await startRedisWithClient('standalone');
  store = new ActionStore({ redis: redis.client, clock });
});

afterAll(async () => {
  await redis?.stop();
});

/** An impression of user 77 (insertion ids distinct per `insertion`). */
const event = (insertion: number, timestamp: number): Buffer => impressionWire(77, insertion, timestamp);

describe('timestamps at the width limit through the store', () => {
  it('stores, deduplicates and counts events stamped up to 2^48 - 1 ms exactly', async () => {
    const arrivals = [
      event(1, MAX_TIMESTAMP_MS),
      event(1, MAX_TIMESTAMP_MS - 1), // re-stamped 1 ms earlier: duplicate
      event(2, MAX_TIMESTAMP_MS - 3 * DAY_MS),
      event(2, MAX_TIMESTAMP_MS - 2 * DAY_MS), // exactly a window later: counts
      event(2, MAX_TIMESTAMP_MS - 2 * DAY_MS - 1), // 1 ms before that one: duplicate
      event(3, MAX_TIMESTAMP_MS - 5 * DAY_MS + 7),
      event(3, MAX_TIMESTAMP_MS - 5 * DAY_MS + 7), // identical bytes
      event(3, MAX_TIMESTAMP_MS - 5 * DAY_MS + 7 - DAY_MS + 1), // earlier by window − 1: duplicate
      event(4, MAX_TIMESTAMP_MS - HOUR_MS + 1),
      event(4, MAX_TIMESTAMP_MS - HOUR_MS + 1), // the same bytes again
    ];
    const result = await ingestRecords(store, arrivals);
    expect(result.malformed).toEqual([]);
    const reference = new ReferenceCounter().deliver(arrivals, now);
    expect(result.added).toBe(reference.events('77').length);
    expect(result.added).toBe(5);

    // Scores and member timestamps are exact (no rounding to 14 digits).
    const scores = (await redis.client.zrange(store.key('77'), 0, -1, 'WITHSCORES')).filter((_, i) => i % 2);
    expect(scores.map(Number).sort()).toEqual(
      reference
        .events('77')
        .map((e) => Number(e.timestamp))
        .sort(),
    );
    expect(scores).toContain(String(MAX_TIMESTAMP_MS));

    const count = async (from: number, to: number) =>
      (await store.count('77', [{ ranges: [{ from, to }] }]))[0]?.[0]?.total;
    expect(await count(MAX_TIMESTAMP_MS, MAX_TIMESTAMP_MS + 1)).toBe(1);
    expect(await count(MAX_TIMESTAMP_MS - 2 * DAY_MS, MAX_TIMESTAMP_MS - 2 * DAY_MS + 1)).toBe(1);
    expect(await count(0, MAX_TIMESTAMP_MS + 1)).toBe(5);
    // A cap of an hour at the clock (10 min before the limit): the event 1 h − 1 ms before the
    // limit, and the one at the limit (ahead of the clock: counts as now).
    const caps = await store.checkFrequencyCaps({
      userId: '77',
      candidates: [{ id: 'x', entities: { ad: 11 }, caps: [{ level: 'ad', windowMs: HOUR_MS, max: 10 }] }],
    });
    expect(caps.allowed[0]?.strictest?.count).toBe(2);

    // A redelivery of everything changes nothing.
    expect((await ingestRecords(store, arrivals)).added).toBe(0);
    // Later (the clock itself may pass the limit), a write trims what is past retention + window.
    clock.set(MAX_TIMESTAMP_MS + 26 * DAY_MS + MINUTE_MS);
    expect((await ingestRecords(store, [event(9, MAX_TIMESTAMP_MS)])).added).toBe(1);
    expect(await redis.client.zcount(store.key('77'), '-inf', `(${clock.now() - 31 * DAY_MS}`)).toBe(0);
    expect(await redis.client.zcard(store.key('77'))).toBe(5);
    expect(await count(0, MAX_TIMESTAMP_MS + 1)).toBe(5);
  });
});
