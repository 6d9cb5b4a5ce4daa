/**
 * A user's key group (occurrence set + log) with one key lost: the ingest script detects it on the
 * next write and rebuilds the missing key from the other before anything is counted, so
 * redeliveries and re-stamped copies stay duplicates (without the repair every redelivered event
 * counts again once its set is gone: docs/reliability.md, fault 2b). Losses come from DEL (each key alone) and
 * from real evictions: redis-server under `maxmemory` with `allkeys-random`, then the whole log
 * redelivered in its original order — every user's counts must equal the brute-force reference.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ingestRecords } from '../../../shared/counting/ingest.js';
import { ActionStore } from '../../../shared/counting/store.js';
import type { RedisClient } from '../../../shared/redis/connect.js';
import { DAY_MS, ManualClock, MINUTE_MS } from '../../../shared/time/clock.js';
import { type RedisUnderTest, startRedisWithClient } from '../../support/redis.js';
import { evictAtRandom, generateLog, prng, ReferenceCounter } from './fixtures.js';

const seed = Number(process.env.COUNTING_SEED ?? Math.floor(Math.random() * 2 ** 31));
const now0 = Date.UTC(2026, 10, 20, 9);
let redis: RedisUnderTest;
let client: RedisClient;
let store: ActionStore;

beforeAll(async () => {
  redis = await startRedisWithClient('standalone');
  client = redis.client;
  store = new ActionStore({ redis: client, clock: new ManualClock(now0) });
});

afterAll(async () => {
  await redis?.stop();
});

/** Ingests in batches of 200 (store and reference see the same arrivals in the same order). */
async function ingest(records: readonly Buffer[], reference?: ReferenceCounter) {
  const totals = { added: 0, repaired: 0 };
  for (let i = 0; i < records.length; i += 200) {
    const batch = records.slice(i, i + 200);
    const result = await ingestRecords(store, batch);
    expect(result.malformed).toEqual([]);
    totals.added += result.added;
    totals.repaired += result.repaired;
    reference?.deliver(batch, now0);
  }
  return totals;
}

/** Every user's total and per-campaign counts equal the reference's. */
async function expectCounts(userIds: readonly string[], reference: ReferenceCounter, label: string) {
  const range = { from: now0 - 30 * DAY_MS, to: now0 + DAY_MS };
  for (const userId of userIds) {
    const got = (await store.count(userId, [{ ranges: [range], groupBy: ['campaign', 'action'] }]))[0]?.[0];
    const want = reference.count(userId, now0 - 30 * DAY_MS, range, {}, ['campaign', 'action']);
    const context = `${label} seed=${seed} user=${userId}`;
    expect(got?.total, context).toBe(want.total);
    expect(new Map((got?.groups ?? []).map((g) => [JSON.stringify(g.key), g.count])), context).toEqual(
      want.groups,
    );
  }
}

/** A user population of its own (user ids are offset so the tests do not share users). */
function population(rand: () => number, events: number, userOffset: number) {
  const log = generateLog(rand, events, now0 - 29 * DAY_MS, now0 + 5 * MINUTE_MS);
  const rename = (id: string) => String(BigInt(id) + BigInt(userOffset));
  const records = log.records.map((r) => {
    const copy = Buffer.from(r);
    copy.writeBigUInt64BE(BigInt(rename(String(r.readBigUInt64BE(r.length - 8)))), r.length - 8);
    return copy;
  });
  return { records, userIds: log.userIds.map(rename) };
}

describe('partially lost key group', () => {
  it('a lost occurrence set is rebuilt from the log: redelivered and re-stamped events stay duplicates', async () => {
    const rand = prng(seed);
    const { records, userIds } = population(rand, 2000, 1);
    const reference = new ReferenceCounter();
    await ingest(records, reference);
    const before = await Promise.all(userIds.map((u) => client.zrange(store.key(u), 0, -1, 'WITHSCORES')));
    for (const u of userIds) await client.del(store.key(u));
    const again = await ingest(records);
    expect(again.added, `seed=${seed}`).toBe(0);
    expect(again.repaired).toBe(userIds.length);
    await expectCounts(userIds, reference, 'set lost');
    // The rebuilt set is the same set (the same occurrences in the same form).
    const after = await Promise.all(userIds.map((u) => client.zrange(store.key(u), 0, -1, 'WITHSCORES')));
    expect(after.map((a) => [...a].sort())).toEqual(before.map((b) => [...b].sort()));
  });

  it('a lost log is rebuilt from the set on the next write (reads under-count until then, never over-count)', async () => {
    const rand = prng(seed + 1);
    const { records, userIds } = population(rand, 2000, 2);
    const reference = new ReferenceCounter();
    await ingest(records, reference);
    const logs = await Promise.all(userIds.map((u) => client.strlen(store.logKey(u))));
    for (const u of userIds) await client.del(store.logKey(u));
    const range = [{ ranges: [{ from: now0 - 30 * DAY_MS, to: now0 + DAY_MS }] }];
    for (const u of userIds) expect((await store.count(u, range))[0]?.[0]?.total).toBe(0);
    // Any write for the user repairs it: here, a redelivery of one of the user's own events.
    for (const u of userIds) {
      const own = records.find((r) => String(r.readBigUInt64BE(r.length - 8)) === u) as Buffer;
      const result = await ingestRecords(store, [own]);
      expect(result.repaired).toBe(1);
      expect(result.added).toBe(0);
    }
    expect(await Promise.all(userIds.map((u) => client.strlen(store.logKey(u))))).toEqual(logs);
    await ingest(records);
    await expectCounts(userIds, reference, 'log lost');
  });

  it('evictions under memory pressure (allkeys-random), then a full redelivery: counts equal the reference', async () => {
    const rand = prng(seed + 2);
    const { records } = population(rand, 12_000, 3);
    // Many small users, so evictions hit some groups partially, some whole, some not at all.
    const spread = records.map((r, i) => {
      const copy = Buffer.from(r);
      copy.writeBigUInt64BE(copy.readBigUInt64BE(copy.length - 8) * 1000n + BigInt(i % 150), copy.length - 8);
      return copy;
    });
    const users = [...new Set(spread.map((r) => String(r.readBigUInt64BE(r.length - 8))))];
    const reference = new ReferenceCounter();
    await ingest(spread, reference);
    await expectCounts(users, reference, 'before eviction');

    const evicted = await evictAtRandom(client, 40, 32 * 1024);
    const present = await Promise.all(
      users.map(async (u) => (await client.exists(store.key(u))) + (await client.exists(store.logKey(u)))),
    );
    const partial = present.filter((n) => n === 1).length;
    const whole = present.filter((n) => n === 0).length;
    expect(evicted, `seed=${seed}`).toBeGreaterThan(20);
    expect(partial, `seed=${seed} groups with one key left`).toBeGreaterThan(5);
    expect(whole + partial, `seed=${seed}`).toBeLessThan(users.length);

    // Lambda redelivers everything (e.g. a replay): repaired groups count nothing twice, groups
    // lost whole are rebuilt from the arrivals themselves, in the same order.
    const again = await ingest(spread);
    expect(again.repaired).toBe(partial);
    await expectCounts(users, reference, 'after eviction and redelivery');
  });

  it('both keys always carry the TTL: set on a new group, refreshed at the first write of each (clock) day', async () => {
    const clock = new ManualClock(now0);
    const own = new ActionStore({ redis: client, clock });
    const ttl = 30 * DAY_MS + DAY_MS + 15 * MINUTE_MS + DAY_MS;
    const user = '424242';
    const record = (insertion: number, at: number) => {
      const [r] = population(prng(insertion), 1, 0).records;
      const copy = Buffer.from(r as Buffer);
      copy.writeUIntBE(at, 3, 6);
      copy.writeUInt32BE(insertion, 21);
      copy.writeBigUInt64BE(BigInt(user), copy.length - 8);
      return copy;
    };
    const ttls = async () => [await client.pttl(own.key(user)), await client.pttl(own.logKey(user))];
    const near = (value: number, target: number) => value <= target && value > target - 60_000;

    await ingestRecords(own, [record(1, now0 - 1000)]);
    for (const t of await ttls()) expect(near(t, ttl), `ttl ${t}`).toBe(true);
    // The day's slack used up (as if a day passed in real time): later writes that same clock
    // day need not refresh (the client maintained the user today) …
    await client.pexpire(own.key(user), ttl - DAY_MS);
    await client.pexpire(own.logKey(user), ttl - DAY_MS);
    expect((await ingestRecords(own, [record(2, now0 - 500)])).added).toBe(1);
    for (const t of await ttls()) expect(near(t, ttl - DAY_MS), `ttl ${t}`).toBe(true);
    // … the first write of the next clock day refreshes both keys.
    clock.advance(DAY_MS);
    expect((await ingestRecords(own, [record(3, clock.now() - 500)])).added).toBe(1);
    for (const t of await ttls()) expect(near(t, ttl), `ttl ${t}`).toBe(true);
    // A group lost whole and written again the same day gets its TTL at once.
    await client.del(own.key(user), own.logKey(user));
    expect((await ingestRecords(own, [record(4, clock.now() - 400)])).added).toBe(1);
    for (const t of await ttls()) expect(near(t, ttl), `ttl ${t}`).toBe(true);
  });
});
