/**
 * The day summary on redis-server, standalone and a 3-node cluster (docs/counting.md, "Long
 * windows: the day summary"): a store with a 45-day retention and 7 raw days answers every cap
 * check exactly as the whole-log read does, over 100 simulated days of arrivals (late ones,
 * redeliveries and re-stamped copies included), with caps whose windows and flights start at any
 * millisecond of any day, while the day table or the aggregates are lost, the log is repaired,
 * compacted (a retention passed twice over) and regrouped after a backfill, and kept day tables go
 * stale. A store that reads the cap log (the default; docs/counting.md, "The cap log") answers
 * every one of those checks the same.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { daysRead } from '../../../shared/counting/day-summary.js';
import { encodeActionEvent } from '../../../shared/counting/event-encode.js';
import { ingestRecords } from '../../../shared/counting/ingest.js';
import type { CapCandidate, CapRule } from '../../../shared/counting/query.js';
import {
  ActionStore,
  type ActionStoreOptions,
  userAggregatesKey,
  userDaysKey,
} from '../../../shared/counting/store.js';
import { prng, type Random } from '../../../shared/random/prng.js';
import { DAY_MS, HOUR_MS, ManualClock, MINUTE_MS } from '../../../shared/time/clock.js';
import { nodeOf, type RedisUnderTest, startRedisWithClient } from '../../support/redis.js';

const START = Date.UTC(2026, 7, 1, 0, 0, 0);
const USERS = ['71', '72', '73', '74'];
const int = (rand: Random, lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
const pick = <T>(rand: Random, items: readonly T[]): T => items[Math.floor(rand() * items.length)] as T;
const entitiesOf = (ad: number) => ({
  ad: 100 + ad,
  adGroup: 50 + (ad >> 1),
  campaign: 20 + (ad >> 2),
  advertiser: 9,
});

/** An event of `user` at `at` (its insertion id from `insertion`). */
function eventOf(
  user: string,
  at: number,
  insertion: number,
  fields: { action: 'impression' | 'click'; viewType: number; ad: number },
): Buffer {
  const insertionId = Buffer.alloc(16);
  insertionId.writeUInt32BE(insertion, 12);
  return encodeActionEvent({
    userId: user,
    timestamp: at,
    insertionId,
    action: fields.action,
    viewType: fields.viewType,
    ...entitiesOf(fields.ad),
  });
}

function eventAt(rand: Random, user: string, at: number, insertion: number): Buffer {
  return eventOf(user, at, insertion, {
    action: rand() < 0.85 ? 'impression' : 'click',
    viewType: int(rand, 0, 2),
    ad: int(rand, 0, 7),
  });
}

function randomCap(rand: Random): CapRule {
  const level = pick(rand, ['ad', 'adGroup', 'campaign', 'advertiser'] as const);
  const windowMs =
    pick(rand, [HOUR_MS, 3 * DAY_MS, 8 * DAY_MS, 40 * DAY_MS, 89 * DAY_MS, 120 * DAY_MS]) +
    int(rand, 0, DAY_MS);
  const kind = rand();
  if (kind < 0.2) return { level, lifetime: true, max: int(rand, 1, 150) };
  if (kind < 0.3) return { level, stopAfter: 'click', withinMs: windowMs };
  if (kind < 0.4) return { level, recencyMs: windowMs };
  const cap = { level, windowMs, max: int(rand, 1, 200) };
  return rand() < 0.3 ? { ...cap, viewType: int(rand, 0, 2) } : cap;
}

function candidates(rand: Random, now: number, horizon: number): CapCandidate[] {
  return Array.from({ length: int(rand, 1, 6) }, (_, i) => ({
    id: `c${i}`,
    entities: entitiesOf(int(rand, 0, 7)),
    // A flight start at any millisecond inside the retention.
    flightStartMs: horizon + int(rand, 0, now - horizon),
    caps: Array.from({ length: int(rand, 1, 5) }, () => randomCap(rand)),
  }));
}

describe.each(['standalone', 'cluster'] as const)('day summary on %s redis-server', (mode) => {
  let redis: RedisUnderTest;
  beforeAll(async () => {
    redis = await startRedisWithClient(mode);
  });
  afterAll(async () => {
    await redis?.stop();
  });
  /** A store at the tests' 45-day retention that reads logs, not cap logs (what is under test). */
  const overLogs = (clock: ManualClock, rawDays: number, more: Partial<ActionStoreOptions> = {}) =>
    new ActionStore({ redis: redis.client, clock, retentionDays: 45, rawDays, capLogReads: false, ...more });

  it('reads the whole log when the summary saves nothing, and its table again later', async () => {
    const clock = new ManualClock(START);
    const user = mode === 'standalone' ? '81' : '82';
    const summarised = overLogs(clock, 7);
    const whole = overLogs(clock, 90);
    const event = (at: number, insertion: number, ad: number) =>
      eventOf(user, at, insertion, { action: 'impression', viewType: 0, ad });
    // 20 days of two events on two ads: a day's aggregates are as many bytes as its members.
    let insertion = 0;
    for (let day = 0; day < 20; day++) {
      clock.set(START + day * DAY_MS + 12 * HOUR_MS);
      await ingestRecords(summarised, [
        event(clock.now() - HOUR_MS, ++insertion, 0),
        event(clock.now() - 2 * HOUR_MS, ++insertion, 1),
      ]);
    }
    clock.set(START + 20 * DAY_MS + 12 * HOUR_MS);
    const request = {
      userId: user,
      candidates: [
        { id: 'a', entities: entitiesOf(0), caps: [{ level: 'ad', windowMs: 30 * DAY_MS, max: 100 }] },
        { id: 'b', entities: entitiesOf(1), caps: [{ level: 'campaign', windowMs: 15 * DAY_MS, max: 12 }] },
      ] as CapCandidate[],
    };
    const check = async () => {
      const expected = await whole.checkFrequencyCaps(request);
      expect(await summarised.checkFrequencyCaps(request)).toEqual(expected);
    };
    for (let i = 0; i < 10; i++) await check();
    expect(summarised.daySummaryReads).toEqual({ summarised: 0, whole: 0, noGain: 10 });
    // Days 2 to 11 become heavy (late arrivals: 30 views of one ad each), so their aggregates
    // are a fraction of their members; the table kept from the sparse days must not hide them.
    for (let day = 2; day < 12; day++) {
      const at = START + day * DAY_MS;
      await ingestRecords(
        summarised,
        Array.from({ length: 30 }, (_, k) => event(at + k * MINUTE_MS, ++insertion, 0)),
      );
    }
    let checks = 0;
    while (summarised.daySummaryReads.summarised === 0 && checks < 40) {
      await check();
      checks++;
    }
    // The cached table answers at most 32 checks with "no gain" before it is read again.
    expect(summarised.daySummaryReads.summarised).toBe(1);
    expect(checks).toBeLessThanOrEqual(33);
    for (let i = 0; i < 5; i++) await check();
    expect(summarised.daySummaryReads.summarised).toBe(6);
    expect(summarised.daySummaryReads.whole).toBe(0);
  });

  it('answers every check as the whole log does, through 100 days of arrivals and faults', async () => {
    const rand = prng(mode === 'standalone' ? 31 : 32);
    const clock = new ManualClock(START);
    const summarised = overLogs(clock, 7);
    // The reference: the same keys, every check over the whole log (raw days = the retention).
    const whole = overLogs(clock, 90);
    // The same reads through ioredis instead of the raw connection.
    const viaClient = overLogs(clock, 7, { rawReads: false });
    // What a store reads by default: the cap log (counting-caplog.lua), kept through all of it.
    const capLog = new ActionStore({ redis: redis.client, clock, retentionDays: 45, rawDays: 7 });
    let insertion = 0;
    let comparisons = 0;
    let longChecks = 0;
    let compactions = 0;
    const sent: Buffer[] = [];
    for (let day = 0; day < 100; day++) {
      clock.set(START + day * DAY_MS + int(rand, 0, DAY_MS - 1));
      const now = clock.now();
      const batch: Buffer[] = [];
      for (const user of USERS) {
        for (let i = int(rand, 0, 12); i > 0; i--) {
          // Mostly today's events; some late ones for any earlier day of the retention.
          const at = rand() < 0.85 ? now - int(rand, 0, 6 * HOUR_MS) : now - int(rand, 0, 50 * DAY_MS);
          batch.push(eventAt(rand, user, at, ++insertion));
        }
      }
      // Redeliveries of earlier events ride along, some re-stamped (duplicates by identity).
      for (let i = 0; i < 5 && sent.length > 0; i++) {
        const copy = Buffer.from(pick(rand, sent));
        if (rand() < 0.5) {
          const at = Math.min(now, Number(copy.readBigUInt64BE(1)) + int(rand, -HOUR_MS, HOUR_MS));
          copy.writeBigUInt64BE(BigInt(at), 1);
        }
        batch.push(copy);
      }
      sent.push(...batch.slice(0, 20));
      const before = await Promise.all(USERS.map((u) => redis.client.strlen(summarised.logKey(u))));
      await ingestRecords(summarised, batch);
      const after = await Promise.all(USERS.map((u) => redis.client.strlen(summarised.logKey(u))));
      if (after.some((n, i) => n < (before[i] as number))) compactions++;
      if (day === 41) {
        // The backfill's runs were regrouped: about one run per day again.
        const table = (await redis.client.getBuffer(userDaysKey(USERS[0] as string))) as Buffer;
        expect(table[0]).toBe(3);
        expect(table.readUInt16BE(13)).toBeLessThanOrEqual(46 + 16);
      }
      if (day === 40) {
        // A backfill after the day's maintenance: 300 events over the past 39 days in no time
        // order. The log stays fragmented (checks read it whole) until the next maintenance
        // regroups it by day.
        const backfill = Array.from({ length: 300 }, () =>
          eventAt(rand, USERS[0] as string, now - int(rand, 0, 39 * DAY_MS), ++insertion),
        );
        await ingestRecords(summarised, backfill);
      }
      if (day % 17 === 16) {
        // The summary is lost (eviction): reads fall back to the whole log until maintenance.
        await redis.client.del(userDaysKey(pick(rand, USERS)));
      }
      if (day % 19 === 18) {
        // The aggregates alone are lost: the day table no longer matches them.
        await redis.client.del(userAggregatesKey(pick(rand, USERS)));
      }
      if (day % 23 === 22) {
        // The log is lost: the next write rebuilds it from the set, and the summary with it.
        const user = pick(rand, USERS);
        await nodeOf(redis.client, summarised.logKey(user)).del(summarised.logKey(user));
        await ingestRecords(summarised, [eventAt(rand, user, now - MINUTE_MS, ++insertion)]);
      }
      const horizon = summarised.horizon(now);
      for (let k = 0; k < 12; k++) {
        const userId = pick(rand, USERS);
        const request = { userId, candidates: candidates(rand, now, horizon) };
        const expected = await whole.checkFrequencyCaps(request);
        expect(await summarised.checkFrequencyCaps(request)).toEqual(expected);
        expect(await viaClient.checkFrequencyCaps(request)).toEqual(expected);
        expect(await capLog.checkFrequencyCaps(request)).toEqual(expected);
        comparisons++;
        if (daysRead(request.candidates, now, horizon, Math.floor(now / DAY_MS) - 6) !== undefined)
          longChecks++;
      }
    }
    expect(comparisons).toBe(1200);
    // Both summarised stores read through the summary in most long checks (not a fallback that
    // always reads the whole log), and fell back when it was lost.
    for (const store of [summarised, viaClient]) {
      const { summarised: through, whole: fellBack, noGain } = store.daySummaryReads;
      expect(through + fellBack + noGain).toBe(longChecks);
      expect(through).toBeGreaterThan(0.8 * longChecks);
      expect(fellBack).toBeGreaterThan(0);
    }
    expect(longChecks).toBeGreaterThan(900);
    // The cap log answered nearly every check itself (a miss: a user without events yet).
    expect(capLog.capLogMisses).toBeLessThan(0.05 * comparisons);
    // Logs were compacted (and their summaries rebuilt) as the retention passed.
    expect(compactions).toBeGreaterThan(0);
  }, 120_000);
});
