/**
 * Ingest packs many users into one script call per cluster node (shared/counting/store.ts): the
 * calls must count exactly what one call per user counted — chunked at MAX_ARRIVALS_PER_CALL with
 * a user never split, ids of any bytes, on a standalone server and a 3-node cluster — and a call
 * that reaches a node owning only some of its users (a stale slot map) must write nothing, after
 * which the store retries those users one call each.
 */
import type { Cluster, Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { type DecodedRecord, decodeRecord } from '../../../shared/counting/event-decode.js';
import { ActionStore, MAX_ARRIVALS_PER_CALL, packArrivals } from '../../../shared/counting/store.js';
import { slotOf } from '../../../shared/redis/connect.js';
import { luaScript } from '../../../shared/redis/scripts/registry.js';
import { DAY_MS, HOUR_MS, ManualClock } from '../../../shared/time/clock.js';
import { useRedis } from '../../support/redis.js';
import { impressionWire } from './fixtures.js';

const now = Date.UTC(2026, 10, 21, 12);

/** A decoded event of `userId` (any string: the decoder only makes decimals, the store takes any). */
function event(userId: string, insertion: number, timestamp = now - HOUR_MS): DecodedRecord {
  return { ...decodeRecord(impressionWire(1, insertion, timestamp)), userId, keys: [userId] };
}

async function total(store: ActionStore, userId: string): Promise<number | undefined> {
  const counts = await store.count(userId, [{ ranges: [{ from: now - 30 * DAY_MS, to: now + 1 }] }]);
  return counts[0]?.[0]?.total;
}

describe.each(['standalone', 'cluster'] as const)('batched ingest on %s Redis', (mode) => {
  const r = useRedis(mode);
  const store = () => new ActionStore({ redis: r.redis, clock: new ManualClock(now), keyPrefix: `b${mode}` });

  it('counts many users in one add, a user with more arrivals than one call carries never split', async () => {
    const s = store();
    const big = MAX_ARRIVALS_PER_CALL * 2 + 17;
    const records: DecodedRecord[] = [];
    for (let u = 0; u < 300; u++) records.push(event(String(1000 + u), 1));
    // The heavy user's arrivals interleave with the others; every fifth one is a copy.
    for (let i = 0; i < big; i++) {
      records.splice(i, 0, event('77', i % 5 === 4 ? i - 1 : i));
    }
    const first = await s.add(records);
    const heavyDistinct = big - Math.floor(big / 5);
    expect(first.added).toBe(300 + heavyDistinct);
    expect(first.duplicates).toBe(big - heavyDistinct);
    expect(await total(s, '77')).toBe(heavyDistinct);
    for (const u of [1000, 1150, 1299]) expect(await total(s, String(u))).toBe(1);
    // A redelivery of everything, then re-stamped a minute earlier: all duplicates.
    expect(await s.add(records)).toMatchObject({ added: 0, duplicates: records.length, restamped: 0 });
    const restamped = records.map((e) => {
      const member = Buffer.from(e.member);
      member.writeUIntBE(e.timestamp - 60_000, 3, 6);
      return { ...e, member, timestamp: e.timestamp - 60_000 };
    });
    expect(await s.add(restamped)).toMatchObject({
      added: 0,
      duplicates: records.length,
      restamped: records.length,
    });
    expect(await total(s, '77')).toBe(heavyDistinct);
  });

  it('takes user ids with separators, braces and multi-byte characters: each its own key group', async () => {
    const s = store();
    const ids = ['a b', 'x}y', '{z', 'u:1,2', 'é', 'line\nbreak'];
    expect((await s.add(ids.map((id, i) => event(id, i + 1)))).added).toBe(ids.length);
    for (const id of ids) {
      expect(await total(s, id), id).toBe(1);
      expect(await r.redis.exists(s.key(id), s.logKey(id)), id).toBe(2);
    }
    expect((await s.add(ids.map((id, i) => event(id, i + 1)))).added).toBe(0);
  });

  it('refuses a record whose timestamp is not the one in its member bytes (the script reads the bytes)', async () => {
    const s = store();
    const e = event('5', 1);
    await expect(s.add([{ ...e, timestamp: e.timestamp - 1 }])).rejects.toThrow(
      /timestamp \d+ is not the one in its member bytes/,
    );
    await expect(s.add([{ ...e, userId: '', keys: [''] }])).rejects.toThrow(/User id "" is 0 bytes/);
    expect(await r.redis.exists(s.key('5'))).toBe(0);
  });

  if (mode === 'cluster') {
    it('a call reaching a node that owns only some of its users writes nothing (checked before any write)', async () => {
      const cluster = r.redis as Cluster;
      const masters = cluster.nodes('master') as Redis[];
      // Two users on different nodes, and the node owning the first.
      const prefix = 'direct';
      const owner = (id: string) => cluster.slots[slotOf(`${prefix}:v2:{${id}}`)]?.[0];
      const a = '1';
      let b = 2;
      while (owner(String(b)) === owner(a)) b++;
      const node = masters.find((m) => `${m.options.host}:${m.options.port}` === owner(a)) as Redis;
      const packed = packArrivals([
        { userId: a, maintain: true, members: [event(a, 1).member] },
        { userId: String(b), maintain: true, members: [event(String(b), 2).member] },
      ]);
      const settings = `${40 * DAY_MS} ${DAY_MS} 0 0 1:59`;
      const call = node.eval(
        luaScript('countingIngest').lua,
        2,
        `${prefix}:v2:{${a}}`,
        `${prefix}:v2:{${a}}:log`,
        String(now - 31 * DAY_MS),
        settings,
        prefix,
        packed,
      );
      await expect(call).rejects.toThrow(/non local key/);
      expect(await cluster.exists(`${prefix}:v2:{${a}}`, `${prefix}:v2:{${a}}:log`)).toBe(0);
      // The same call with the first user only is accepted.
      const alone = packArrivals([{ userId: a, maintain: true, members: [event(a, 1).member] }]);
      expect(
        await node.eval(
          luaScript('countingIngest').lua,
          2,
          `${prefix}:v2:{${a}}`,
          `${prefix}:v2:{${a}}:log`,
          '0',
          settings,
          prefix,
          alone,
        ),
      ).toEqual([1, 0, 0, 0]);
    });

    it('with a stale slot map, the users of a failed call are retried one call each and count once', async () => {
      const cluster = r.redis as Cluster;
      const s = store();
      const users = Array.from({ length: 40 }, (_, i) => String(5000 + i));
      const nodesOf = new Set(users.map((u) => cluster.slots[slotOf(s.key(u))]?.[0]));
      expect(nodesOf.size).toBeGreaterThan(1);
      const failedBefore = await failedScriptCalls(cluster);
      // The client believes one node owns every slot: the store sends one call for all users.
      const saved = cluster.slots.map((owners) => owners);
      const wrong = saved[0] as string[];
      for (let i = 0; i < cluster.slots.length; i++) cluster.slots[i] = wrong;
      try {
        const result = await s.add(users.map((u, i) => event(u, i + 1)));
        expect(result).toMatchObject({ added: users.length, duplicates: 0 });
      } finally {
        for (let i = 0; i < saved.length; i++) cluster.slots[i] = saved[i] as string[];
      }
      expect(await failedScriptCalls(cluster)).toBeGreaterThan(failedBefore);
      for (const u of users) expect(await total(s, u), u).toBe(1);
      expect((await s.add(users.map((u, i) => event(u, i + 1)))).added).toBe(0);
    });
  }
});

/** Script calls that failed, summed over the cluster's masters (INFO commandstats). */
async function failedScriptCalls(cluster: Cluster): Promise<number> {
  let failed = 0;
  for (const node of cluster.nodes('master')) {
    const info = await node.info('commandstats');
    for (const m of info.matchAll(/cmdstat_eval(?:sha)?:.*failed_calls=(\d+)/g)) failed += Number(m[1]);
  }
  return failed;
}
