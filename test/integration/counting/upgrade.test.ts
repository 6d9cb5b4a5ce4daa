/**
 * Upgrade from key schema v1 (dedup on the full bytes only) to v2, as docs/counting.md states it:
 * v1 keys are written raw here exactly as the v1 contract described them (set: member = stored
 * member, score = timestamp; log: the members concatenated in arrival order). Readers fall back to
 * a user's v1 log while the user has no v2 log; the first v2 write for the user replays the v1
 * history through the v2 rule (from the log, or from the set when the log was lost) and deletes
 * the v1 keys; with `legacyV1Keys: false` v1 keys are neither read nor imported.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeRecord } from '../../../shared/counting/event-decode.js';
import { encodeActionEvent } from '../../../shared/counting/event-encode.js';
import { ingestRecords } from '../../../shared/counting/ingest.js';
import { ActionStore, userKey, userLogKey } from '../../../shared/counting/store.js';
import type { RedisClient } from '../../../shared/redis/connect.js';
import { DAY_MS, HOUR_MS, ManualClock } from '../../../shared/time/clock.js';
import { type RedisUnderTest, startRedisWithClient } from '../../support/redis.js';
import { ReferenceCounter } from './fixtures.js';

const now = Date.UTC(2026, 10, 21, 12);
let redis: RedisUnderTest;
let client: RedisClient;
const clock = new ManualClock(now);

beforeAll(async () => {
  redis = await startRedisWithClient('cluster');
  client = redis.client;
});

afterAll(async () => {
  await redis?.stop();
});

function event(userId: string, insertion: number, timestamp: number, ad = 11): Buffer {
  const insertionId = Buffer.alloc(16);
  insertionId.writeUInt32BE(insertion, 12);
  return encodeActionEvent({
    userId,
    timestamp,
    insertionId,
    action: 'impression',
    viewType: 'home',
    ad,
    adGroup: 7,
    campaign: 3,
    advertiser: 1,
  });
}

/** Writes a user's v1 keys as the v1 ingest did: distinct members, set scored by time, log in order. */
async function writeV1(userId: string, records: readonly Buffer[], keys: { set: boolean; log: boolean }) {
  const seen = new Set<string>();
  for (const r of records) {
    const { member, timestamp } = decodeRecord(r);
    if (seen.has(member.toString('hex'))) continue;
    seen.add(member.toString('hex'));
    if (keys.set) await client.zadd(userKey(userId, 'act', 1), timestamp, member);
    if (keys.log) await client.append(userLogKey(userId, 'act', 1), member);
  }
}

const total = async (store: ActionStore, userId: string) =>
  (await store.count(userId, [{ ranges: [{ from: now - 30 * DAY_MS, to: now + DAY_MS }] }]))[0]?.[0]?.total;

/** A v1 history with re-stamped copies (v1 counted each), an expired event and a duplicate. */
function history(userId: string): Buffer[] {
  return [
    event(userId, 1, now - 5 * DAY_MS),
    event(userId, 1, now - 5 * DAY_MS + HOUR_MS), // re-stamped: v1 counted it, v2 does not
    event(userId, 2, now - 3 * DAY_MS),
    event(userId, 2, now - 2 * DAY_MS), // exactly a window later: counts under v2 too
    event(userId, 3, now - 2 * HOUR_MS),
    event(userId, 3, now - 2 * HOUR_MS), // identical bytes: one member in v1 already
    event(userId, 3, now - HOUR_MS), // re-stamped
    event(userId, 4, now - 40 * DAY_MS), // past retention + window: dropped
  ];
}

describe('key schema v1 → v2', () => {
  it('reads a not-yet-migrated user from the v1 log, then imports it on the first v2 write', async () => {
    const store = new ActionStore({ redis: client, clock });
    const user = '501';
    const old = history(user);
    await writeV1(user, old, { set: true, log: true });
    // v1 semantics until the user is written: 6 distinct byte strings inside the retention.
    expect(await total(store, user)).toBe(6);
    expect(await total(new ActionStore({ redis: client, clock, legacyV1Keys: false }), user)).toBe(0);

    const fresh = event(user, 5, now - 10_000);
    const result = await ingestRecords(store, [fresh, old[0] as Buffer]);
    expect(result).toMatchObject({ added: 1, duplicates: 1, migrated: 1, repaired: 0 });
    const reference = new ReferenceCounter().deliver([...old, fresh, old[0] as Buffer], now);
    expect(reference.events(user)).toHaveLength(5);
    expect(await total(store, user)).toBe(5);
    expect(await client.exists(userKey(user, 'act', 1), userLogKey(user, 'act', 1))).toBe(0);
    // Nothing left to import: the next write is a plain v2 write.
    expect((await ingestRecords(store, [fresh])).migrated).toBe(0);
  });

  it('imports from the v1 set when the v1 log was lost, and from the v1 log alone', async () => {
    const store = new ActionStore({ redis: client, clock });
    for (const [user, keys] of [
      ['502', { set: true, log: false }],
      ['503', { set: false, log: true }],
    ] as const) {
      const old = history(user);
      await writeV1(user, old, keys);
      const result = await ingestRecords(store, [event(user, 9, now - 1000)]);
      expect(result.migrated, user).toBe(1);
      expect(await total(store, user), user).toBe(5);
      expect(await client.zcard(store.key(user)), user).toBe(5);
      expect(await client.strlen(store.logKey(user)), user).toBe(5 * 59);
    }
  });

  it('drops v1 members wider than 48 bits (accepted by v1 validation, read truncated by v1 readers)', async () => {
    const store = new ActionStore({ redis: client, clock });
    const user = '504';
    const bad = decodeRecord(event(user, 1, now - HOUR_MS)).member;
    bad.writeBigUInt64BE(2n ** 48n + BigInt(now - HOUR_MS), 1);
    await client.zadd(userKey(user, 'act', 1), now - HOUR_MS, bad);
    await client.append(userLogKey(user, 'act', 1), bad);
    await writeV1(user, [event(user, 2, now - HOUR_MS)], { set: true, log: true });
    expect((await ingestRecords(store, [event(user, 3, now - 1000)])).migrated).toBe(1);
    expect(await total(store, user)).toBe(2);
  });

  it('with legacyV1Keys off, v1 keys are neither read nor imported', async () => {
    const store = new ActionStore({ redis: client, clock, legacyV1Keys: false });
    const user = '505';
    await writeV1(user, history(user), { set: true, log: true });
    const result = await ingestRecords(store, [event(user, 9, now - 1000)]);
    expect(result.migrated).toBe(0);
    expect(await total(store, user)).toBe(1);
    expect(await client.exists(userKey(user, 'act', 1))).toBe(1);
  });
});
