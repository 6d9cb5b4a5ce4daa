/**
 * The cap log (shared/redis/scripts/counting-caplog.lua), what cap checks read: after any ingest
 * it holds exactly the log's events (byte for byte what `capLogOf` makes of the log, or the same
 * events in another order once the day summary regrouped the log), and a cap log, tuple index or
 * log lost alone never changes a verdict — checks read the log while the cap log is missing, and
 * the user's next counted event (or daily maintenance) rebuilds it. A user with more tuples than
 * a cap log numbers is read from its log.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CAP_LOG_EVENT_BYTES,
  CAP_LOG_KEPT,
  CAP_LOG_MIN_LOG_BYTES,
  CAP_LOG_NOT_KEPT,
  capLogOf,
} from '../../../shared/counting/cap-log.js';
import { evaluateCaps } from '../../../shared/counting/caps.js';
import { encodeActionEvent } from '../../../shared/counting/event-encode.js';
import { ingestRecords } from '../../../shared/counting/ingest.js';
import { userCapLogKey, userCapTuplesKey } from '../../../shared/counting/keys.js';
import { actionEventSchema } from '../../../shared/counting/schema.js';
import { ActionStore } from '../../../shared/counting/store.js';
import type { RedisClient } from '../../../shared/redis/connect.js';
import { DAY_MS, ManualClock, MINUTE_MS } from '../../../shared/time/clock.js';
import { type RedisUnderTest, startRedisWithClient } from '../../support/redis.js';
import { compareCaps } from './cap-compare.js';
import { evictAtRandom, generateLog, prng, ReferenceCounter } from './fixtures.js';

const seed = Number(process.env.COUNTING_SEED ?? Math.floor(Math.random() * 2 ** 31));
const now0 = Date.UTC(2026, 10, 20, 9);
let redis: RedisUnderTest;
let client: RedisClient;

beforeAll(async () => {
  redis = await startRedisWithClient('standalone');
  client = redis.client;
});

afterAll(async () => {
  await redis?.stop();
});

async function ingest(
  store: ActionStore,
  records: readonly Buffer[],
  reference?: ReferenceCounter,
  at = now0,
) {
  for (let i = 0; i < records.length; i += 200) {
    const batch = records.slice(i, i + 200);
    expect((await ingestRecords(store, batch)).malformed).toEqual([]);
    reference?.deliver(batch, at);
  }
}

/** The events of a cap log as sortable strings (tuple bytes, action, view type, timestamp). */
function eventsOf(capLog: Buffer, from: number): string[] {
  const tuples: Buffer[] = [];
  const out: string[] = [];
  for (let pos = 1; pos < capLog.length; ) {
    const t = capLog.readUInt16BE(pos);
    if (t === 0xffff) {
      const length = actionEventSchema.layouts.get(capLog[pos + 2] as number)?.memberLength as number;
      tuples.push(capLog.subarray(pos + 2, pos + 2 + 1 + length - 27));
      pos += 2 + 1 + length - 27;
      continue;
    }
    const ts = capLog.readUIntBE(pos + 4, 6);
    if (ts >= from) out.push(`${tuples[t]?.toString('hex')} ${capLog[pos + 2]} ${capLog[pos + 3]} ${ts}`);
    pos += CAP_LOG_EVENT_BYTES;
  }
  return out.sort();
}

describe('cap log', () => {
  it('mirrors the log through redeliveries, re-stamped copies and compaction; checks through it are exact', async () => {
    const clock = new ManualClock(now0);
    const store = new ActionStore({ redis: client, clock, keyPrefix: 'cl1' });
    const rand = prng(seed);
    const log = generateLog(rand, 3000, now0 - 32 * DAY_MS, now0 + 5 * MINUTE_MS, { identities: true });
    const reference = new ReferenceCounter();
    await ingest(store, log.records, reference);
    await ingest(store, log.records.slice(0, 800), reference);
    const users = log.userIds;
    const mirror = async (label: string) => {
      for (const u of users) {
        const capLog = await client.getBuffer(userCapLogKey(u, 'cl1'));
        const full = (await client.getBuffer(`cl1:v2:{${u}}:log`)) ?? Buffer.alloc(0);
        if (full.length < CAP_LOG_MIN_LOG_BYTES) expect(capLog, `${label} seed=${seed}`).toBeNull();
        else expect(capLog?.equals(capLogOf(full, actionEventSchema)), `${label} seed=${seed}`).toBe(true);
      }
    };
    await mirror('after ingest');
    const comparisons = await compareCaps({ store, reference, log, rand, rounds: 150, now: now0, seed });
    expect(comparisons).toBeGreaterThan(500);
    expect(store.capLogMisses).toBe(0);
    // Ten days on: a third of each log is past the trim point, so maintenance compacts the logs;
    // the cap logs follow.
    clock.set(now0 + 10 * DAY_MS);
    const later = generateLog(rand, 400, now0 + 9 * DAY_MS, now0 + 10 * DAY_MS, { identities: true });
    await ingest(store, later.records, reference, clock.now());
    await mirror('after compaction');
    const bytes = await Promise.all(users.map((u) => client.strlen(userCapLogKey(u, 'cl1'))));
    const logBytes = await Promise.all(users.map((u) => client.strlen(`cl1:v2:{${u}}:log`)));
    expect(bytes.reduce((a, b) => a + b, 0)).toBeLessThan(logBytes.reduce((a, b) => a + b, 0));
  });

  it('with the day summary (which regroups the log) holds the same events inside the retention', async () => {
    const clock = new ManualClock(now0);
    const store = new ActionStore({ redis: client, clock, keyPrefix: 'cl2', retentionDays: 90, rawDays: 8 });
    const rand = prng(seed + 1);
    // Out of time order over 80 days (a backfill): the summary regroups the log by day.
    const log = generateLog(rand, 3000, now0 - 80 * DAY_MS, now0, { identities: true });
    for (let day = 0; day < 3; day++) {
      clock.set(now0 + day * DAY_MS);
      await ingest(store, log.records.slice(day * 1000, (day + 1) * 1000), undefined, clock.now());
    }
    const trim = clock.now() - 90 * DAY_MS - DAY_MS;
    for (const u of log.userIds) {
      const full = (await client.getBuffer(`cl2:v2:{${u}}:log`)) ?? Buffer.alloc(0);
      const capLog = (await client.getBuffer(userCapLogKey(u, 'cl2'))) as Buffer;
      expect(capLog[0]).toBe(CAP_LOG_KEPT);
      expect(eventsOf(capLog, trim), `seed=${seed} user=${u}`).toEqual(
        eventsOf(capLogOf(full, actionEventSchema), trim),
      );
    }
  });

  it('a cap log, a tuple index or the set and log lost alone: verdicts stay exact, the next counted event rebuilds', async () => {
    const clock = new ManualClock(now0);
    const store = new ActionStore({ redis: client, clock, keyPrefix: 'cl3' });
    const rand = prng(seed + 2);
    const log = generateLog(rand, 2000, now0 - 29 * DAY_MS, now0, { identities: true });
    const reference = new ReferenceCounter();
    await ingest(store, log.records, reference);
    const [a, b, c] = log.userIds as [string, string, string];
    const tag = (u: string) => `cl3:v2:{${u}}`;
    await client.del(userCapLogKey(a, 'cl3'));
    await client.del(userCapTuplesKey(b, 'cl3'));
    // Set and log lost, cap log kept: the group starts over, and so must its cap log.
    await client.del(tag(c), `${tag(c)}:log`);
    const ofUser = (u: string) => log.records.filter((r) => String(r.readBigUInt64BE(r.length - 8)) === u);
    // Before any write: a's checks read its log (a miss each), b's its intact cap log. (c's user
    // group is gone until its events arrive again; its households and devices are intact.)
    const misses = store.capLogMisses;
    const rest = { ...log, userIds: log.userIds.filter((u) => u !== c) };
    expect(
      await compareCaps({ store, reference, log: rest, rand, rounds: 60, now: now0, seed }),
    ).toBeGreaterThan(100);
    expect(store.capLogMisses).toBeGreaterThan(misses);
    // A redelivery counts nothing and leaves the cap log as it is (checks keep reading the log);
    // the user's next counted event rebuilds it (so does the user's daily maintenance).
    for (const u of [a, b]) await ingestRecords(store, (ofUser(u) as Buffer[]).slice(0, 1));
    expect(await client.exists(userCapLogKey(a, 'cl3'))).toBe(0);
    const fresh = (u: string) =>
      encodeActionEvent({
        userId: u,
        timestamp: now0 - 1000,
        insertionId: Buffer.alloc(16, 0xee),
        action: 'impression',
        ad: 1,
        adGroup: 1,
        campaign: 1,
        advertiser: 1,
      });
    await ingest(store, [fresh(a), fresh(b)], reference);
    // c's events arrive again: counted anew, once (the reference counted them once already).
    await ingest(store, ofUser(c));
    for (const u of [a, b, c]) {
      const full = (await client.getBuffer(`${tag(u)}:log`)) as Buffer;
      const capLog = (await client.getBuffer(userCapLogKey(u, 'cl3'))) as Buffer;
      expect(capLog.equals(capLogOf(full, actionEventSchema)), `seed=${seed} user=${u}`).toBe(true);
    }
    const before = store.capLogMisses;
    expect(await compareCaps({ store, reference, log, rand, rounds: 80, now: now0, seed })).toBeGreaterThan(
      100,
    );
    expect(store.capLogMisses).toBe(before);
  });

  it('a user with more tuples than a cap log numbers is read from its log', async () => {
    const store = new ActionStore({ redis: client, clock: new ManualClock(now0), keyPrefix: 'cl4' });
    const records = Array.from({ length: 0x10000 + 5 }, (_, i) =>
      encodeActionEvent({
        userId: 77,
        timestamp: now0 - 1000 - i,
        insertionId: Buffer.alloc(16, (i % 250) + 1),
        action: 'impression',
        ad: 1 + i,
        adGroup: 1,
        campaign: 1,
        advertiser: 1,
      }),
    );
    for (let i = 0; i < records.length; i += 5000) await ingestRecords(store, records.slice(i, i + 5000));
    const capLog = (await client.getBuffer(userCapLogKey('77', 'cl4'))) as Buffer;
    expect([...capLog]).toEqual([CAP_LOG_NOT_KEPT]);
    expect(await client.exists(userCapTuplesKey('77', 'cl4'))).toBe(0);
    const candidates = [
      {
        id: 'x',
        entities: { ad: 5, adGroup: 1, campaign: 1, advertiser: 1 },
        caps: [{ level: 'campaign', windowMs: DAY_MS, max: 70_000 }],
      },
      {
        id: 'y',
        entities: { ad: 5, adGroup: 1, campaign: 1, advertiser: 1 },
        caps: [{ level: 'campaign', windowMs: DAY_MS, max: 0x10000 + 5 }],
      },
    ];
    const misses = store.capLogMisses;
    const result = await store.checkFrequencyCaps({ userId: '77', candidates });
    expect(store.capLogMisses).toBe(misses + 1);
    expect(result.allowed.map((v) => v.id)).toEqual(['x']);
    expect(result.rejected[0]?.strictest?.count).toBe(0x10000 + 5);
    const log = (await client.getBuffer('cl4:v2:{77}:log')) as Buffer;
    expect(result).toEqual(evaluateCaps(log, candidates, now0, now0 - 30 * DAY_MS));
  });

  it('a short log has no cap log and is read whole beside it (one round trip); a long one gets one', async () => {
    const clock = new ManualClock(now0);
    const store = new ActionStore({ redis: client, clock, keyPrefix: 'cl6', legacyV1Keys: false });
    const rand = prng(seed + 4);
    // About 5 events per user: logs well under CAP_LOG_MIN_LOG_BYTES whatever the seed (at 100
    // events, about 1 seed in 40 gave some user a log past it; at 40, none of 20,000 past 1,540
    // bytes).
    const log = generateLog(rand, 40, now0 - 10 * DAY_MS, now0, { identities: true });
    const reference = new ReferenceCounter();
    await ingest(store, log.records, reference);
    for (const u of log.userIds) {
      expect(await client.strlen(`cl6:v2:{${u}}:log`)).toBeLessThan(CAP_LOG_MIN_LOG_BYTES);
      expect(await client.exists(userCapLogKey(u, 'cl6'), userCapTuplesKey(u, 'cl6'))).toBe(0);
    }
    const calls = async () => {
      const stats = await client.info('commandstats');
      const of = (name: string) => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
      return { get: of('get'), getrange: of('getrange') };
    };
    const before = await calls();
    const checks = 30;
    for (let i = 0; i < checks; i++) {
      const userId = log.userIds[i % log.userIds.length] as string;
      await store.checkFrequencyCaps({
        userId,
        candidates: [
          {
            id: 'a',
            entities: { ad: 500, adGroup: 1, campaign: 1, advertiser: 1 },
            caps: [{ level: 'ad', windowMs: DAY_MS, max: 3 }],
          },
        ],
      });
    }
    const after = await calls();
    // One GET (the cap log: none) and one GETRANGE (the whole short log) per check, nothing more.
    expect(after.get - before.get).toBe(checks);
    expect(after.getrange - before.getrange).toBe(checks);
    expect(await compareCaps({ store, reference, log, rand, rounds: 60, now: now0, seed })).toBeGreaterThan(
      60,
    );
    // Each user's log grows past the threshold: the write that crosses it (not the day's
    // maintenance, which came first) builds the cap log, with the group's TTL.
    const more = generateLog(rand, 2400, now0 - 10 * DAY_MS, now0, { identities: true });
    await ingest(store, more.records, reference);
    for (const u of log.userIds) {
      const full = (await client.getBuffer(`cl6:v2:{${u}}:log`)) as Buffer;
      expect(full.length).toBeGreaterThanOrEqual(CAP_LOG_MIN_LOG_BYTES);
      const capLog = (await client.getBuffer(userCapLogKey(u, 'cl6'))) as Buffer;
      expect(capLog.equals(capLogOf(full, actionEventSchema)), `seed=${seed} user=${u}`).toBe(true);
      const ttl = await client.pttl(`cl6:v2:{${u}}:log`);
      for (const key of [userCapLogKey(u, 'cl6'), userCapTuplesKey(u, 'cl6')]) {
        expect(Math.abs((await client.pttl(key)) - ttl), `${key} seed=${seed}`).toBeLessThan(60_000);
      }
    }
    expect(await compareCaps({ store, reference, log, rand, rounds: 60, now: now0, seed })).toBeGreaterThan(
      60,
    );
    expect(store.capLogMisses).toBe(0);
  });

  it('evictions under memory pressure (allkeys-random), then a full redelivery: every cap check equals the reference', async () => {
    await client.flushall();
    const store = new ActionStore({ redis: client, clock: new ManualClock(now0), keyPrefix: 'cl7' });
    const rand = prng(seed + 5);
    const log = generateLog(rand, 4000, now0 - 29 * DAY_MS, now0, { identities: true });
    const reference = new ReferenceCounter();
    await ingest(store, log.records, reference);
    // Every key group's keys: users', households', devices' and sessions' (all with long logs).
    const tags = (await client.keys('cl7:v2:{*}:log')).map((k) => k.slice(0, -':log'.length));
    const parts = [':log', ':cap', ':tix', ''] as const;
    const present = async () =>
      Promise.all(
        tags.map(async (t) => Promise.all(parts.map(async (p) => (await client.exists(t + p)) === 1))),
      );
    expect(
      (await present()).every((keys) => keys.every(Boolean)),
      `seed=${seed}`,
    ).toBe(true);

    await evictAtRandom(client, 24, 16 * 1024);
    const after = await present();
    expect(
      after.some((keys) => !keys.every(Boolean)),
      `seed=${seed} nothing evicted`,
    ).toBe(true);

    // A replay of everything in the same order rebuilds lost groups as they were; cap logs lost
    // alone are read around (the log) until a counted event rebuilds them.
    await ingest(store, log.records);
    expect(await compareCaps({ store, reference, log, rand, rounds: 150, now: now0, seed })).toBeGreaterThan(
      300,
    );
  });

  it('capLogReads: false reads the log and gives the same verdicts', async () => {
    const clock = new ManualClock(now0);
    const store = new ActionStore({ redis: client, clock, keyPrefix: 'cl5' });
    const plain = new ActionStore({ redis: client, clock, keyPrefix: 'cl5', capLogReads: false });
    const rand = prng(seed + 3);
    const log = generateLog(rand, 1000, now0 - 10 * DAY_MS, now0, { identities: true });
    const reference = new ReferenceCounter();
    await ingest(store, log.records, reference);
    expect(
      await compareCaps({ store: plain, reference, log, rand, rounds: 40, now: now0, seed }),
    ).toBeGreaterThan(40);
    expect(plain.capLogMisses).toBe(0);
  });
});
