/**
 * The fence and claim scripts against real Redis, standalone and a real 3-node cluster: at most
 * one publisher per (shard, tick); a stale leader (lower epoch), a claim with a lower override
 * version and a repeated tick are refused; a publisher's batches land only while the stored claim
 * is exactly its own; clock skew between instances delays a new leader but never yields two
 * publishers for a tick; every outcome is in the shard's audit stream, in server order.
 */
import { Cluster } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { Fence } from '../../../shared/pacing/fence.js';
import { shardKeys } from '../../../shared/pacing/keys.js';
import { readAuditLog, ShardPublisher } from '../../../shared/pacing/publisher.js';
import { slotOf } from '../../../shared/redis/connect.js';
import { useRedis } from '../../support/redis.js';

const NOW = Date.UTC(2026, 10, 21, 12, 0, 0);
const f = (g: number, o: number, e: number): Fence => ({ g, o, e });

function write(campaignId: string, value: string) {
  return { campaignId, mode: 'X' as const, fields: ['plans', 'campaign', 'p:campaign', value] };
}

describe.each(['standalone', 'cluster'] as const)('claims and fenced publishing (%s)', (mode) => {
  const r = useRedis(mode);
  let shard = 0;
  const nextShard = () => ++shard;
  const publisher = (s: number, id: string) =>
    new ShardPublisher({ redis: r.redis, shard: s, publisherId: id, maxArgsPerBatch: 40 });

  it('accepts the first claim, then at most one per tick (equal ticks refused)', async () => {
    const s = nextShard();
    const a = publisher(s, 's-i0/a');
    const b = publisher(s, 's-i1/b');
    const first = await a.claim(f(1, 1, 1), 100, NOW);
    expect(first).toEqual({ accepted: true, reason: 'ok', previous: undefined });
    expect(await b.claim(f(1, 1, 1), 100, NOW)).toMatchObject({ accepted: false, reason: 'tick' });
    expect(await a.claim(f(1, 1, 1), 100, NOW)).toMatchObject({ accepted: false, reason: 'tick' });
    // A higher fence does not win a tick that is already claimed either.
    expect(await b.claim(f(1, 1, 2), 100, NOW)).toMatchObject({ accepted: false, reason: 'tick' });
    const next = await b.claim(f(1, 1, 2), 101, NOW);
    expect(next).toMatchObject({
      accepted: true,
      previous: { fence: f(1, 1, 1), tick: 100, publisher: 's-i0/a' },
    });
  });

  it('refuses a stale leader (lower epoch) for every later tick', async () => {
    const s = nextShard();
    const old = publisher(s, 'old/x');
    const fresh = publisher(s, 'new/y');
    expect((await old.claim(f(1, 1, 4), 10, NOW)).accepted).toBe(true);
    expect((await fresh.claim(f(1, 1, 5), 11, NOW)).accepted).toBe(true);
    for (const tick of [12, 13, 1_000_000]) {
      expect(await old.claim(f(1, 1, 4), tick, NOW)).toMatchObject({ accepted: false, reason: 'fence' });
    }
  });

  it('refuses a claim with a lower override version, whatever its epoch', async () => {
    const s = nextShard();
    const named = publisher(s, 'named/x');
    const holder = publisher(s, 'holder/y');
    expect((await named.claim(f(1, 3, 0), 20, NOW)).accepted).toBe(true); // override version 3, e = 0
    expect(await holder.claim(f(1, 2, 99), 21, NOW)).toMatchObject({ accepted: false, reason: 'fence' });
    // Back to auto bumps the override version: the lease holder's claim outranks the named one.
    expect((await holder.claim(f(1, 4, 99), 22, NOW)).accepted).toBe(true);
    expect(await named.claim(f(1, 3, 0), 23, NOW)).toMatchObject({ accepted: false, reason: 'fence' });
    // A newer generation (publisher-region flipped) outranks any override or epoch.
    expect((await named.claim(f(2, 0, 0), 24, NOW)).accepted).toBe(true);
  });

  it('lands a publisher’s batches only while the stored claim is exactly its own', async () => {
    const s = nextShard();
    const a = publisher(s, 'a/1');
    const b = publisher(s, 'b/2');
    await a.claim(f(1, 1, 1), 50, NOW);
    const campaigns = Array.from({ length: 25 }, (_, i) => write(`c${i}`, `a-${i}`));
    const ok = await a.publish({
      fence: f(1, 1, 1),
      tick: 50,
      nowMs: NOW,
      campaigns,
      state: { set: ['x:campaign', 's1'] },
      republishMs: 70_000,
    });
    expect(ok.batches).toBeGreaterThan(1); // 40 arguments per batch: several atomic batches
    expect(ok).toMatchObject({ rejectedBatches: 0, campaignsWritten: 25 });
    expect(await r.redis.hget(shardKeys(s).campaign('c7'), 'p:campaign')).toBe('a-7');
    expect(await r.redis.hgetall(shardKeys(s).campaign('c7'))).toMatchObject({
      v: '2',
      t: '50',
      f: '1.1.1',
      by: 'a/1',
    });
    // Contract v2: the completed publish is recorded in the claim hash (readers' freshness).
    expect(await r.redis.hmget(shardKeys(s).claim, 'pt', 'pat', 'rp')).toEqual(['50', String(NOW), '70000']);
    // b takes the shard; a (paused meanwhile) resumes and tries to finish tick 50, then tick 51.
    await b.claim(f(1, 1, 2), 51, NOW);
    const late = await a.publish({
      fence: f(1, 1, 1),
      tick: 50,
      nowMs: NOW,
      campaigns: campaigns.map((c) => write(c.campaignId, 'late')),
      state: { set: ['x:campaign', 'late'] },
    });
    expect(late.acceptedBatches).toBe(0);
    expect(late.rejectedBatches).toBe(late.batches);
    expect(late.heldBy).toEqual({ fence: f(1, 1, 2), tick: 51, publisher: 'b/2' });
    expect(await r.redis.hget(shardKeys(s).campaign('c7'), 'p:campaign')).toBe('a-7');
    expect(await r.redis.hget(shardKeys(s).state, 'x:campaign')).toBe('s1');
    // b has not published tick 51 yet, and a's refused batches did not record a completed publish:
    // readers still take their freshness from a's tick 50.
    expect(await r.redis.hmget(shardKeys(s).claim, 'pt', 'pat')).toEqual(['50', String(NOW)]);
    // The same publisher id with the right fence but an old tick is refused too.
    const stale = await b.publish({
      fence: f(1, 1, 2),
      tick: 50,
      nowMs: NOW,
      campaigns,
    });
    expect(stale.acceptedBatches).toBe(0);

    const log = await readAuditLog(r.redis, s);
    const accepted = log.filter((e) => e.accepted);
    expect(accepted.filter((e) => e.kind === 'claim').map((e) => [e.publisher, e.tick])).toEqual([
      ['a/1', 50],
      ['b/2', 51],
    ]);
    // Nothing of a's was accepted after b's claim, in the server's own order.
    const bFirst = log.findIndex((e) => e.accepted && e.publisher === 'b/2');
    expect(log.slice(bFirst).filter((e) => e.accepted && e.publisher === 'a/1')).toEqual([]);
    expect(log.filter((e) => e.kind === 'publish' && !e.accepted).length).toBe(late.batches + stale.batches);
  });

  it('replaces a hash on a full write, keeps other fields on a partial one, deletes state fields', async () => {
    const s = nextShard();
    const a = publisher(s, 'a/1');
    await a.claim(f(1, 1, 1), 7, NOW);
    await a.publish({
      fence: f(1, 1, 1),
      tick: 7,
      nowMs: NOW,
      campaigns: [{ campaignId: 'c', mode: 'F', fields: ['plans', 'campaign,arm:A', 'e:arm:A', 'curve'] }],
      state: { set: ['c:c:campaign', 's', 'c:c:arm:A', 's'] },
      forecast: { set: ['c:c:campaign', 'fc'] },
    });
    await a.claim(f(1, 1, 1), 8, NOW);
    await a.publish({
      fence: f(1, 1, 1),
      tick: 8,
      nowMs: NOW,
      campaigns: [{ campaignId: 'c', mode: 'P', fields: ['p:campaign', 'x'] }],
      state: { set: [], del: ['c:c:arm:A'] },
    });
    expect(await r.redis.hgetall(shardKeys(s).campaign('c'))).toMatchObject({
      t: '8',
      'e:arm:A': 'curve',
      'p:campaign': 'x',
    });
    expect(await r.redis.hkeys(shardKeys(s).state)).toEqual(['c:c:campaign']);
    await a.claim(f(1, 1, 1), 9, NOW);
    await a.publish({
      fence: f(1, 1, 1),
      tick: 9,
      nowMs: NOW,
      campaigns: [{ campaignId: 'c', mode: 'F', fields: ['plans', 'campaign'] }],
    });
    expect(Object.keys(await r.redis.hgetall(shardKeys(s).campaign('c'))).sort()).toEqual([
      'at',
      'by',
      'f',
      'plans',
      't',
      'v',
    ]);
    expect(await r.redis.pttl(shardKeys(s).campaign('c'))).toBeGreaterThan(86_400_000);
  });

  it('sends the side hashes before building the campaign writes, and refuses a 0x1f value before sending anything', async () => {
    const s = nextShard();
    const a = publisher(s, 'a/1');
    await a.claim(f(1, 1, 1), 7, NOW);
    const state = Array.from({ length: 400 }, (_, i) => [`c:c${i}:campaign`, `s${i}`]).flat();
    let builtAfter = -1;
    const out = await a.publish({
      fence: f(1, 1, 1),
      tick: 7,
      nowMs: NOW,
      state: { set: state },
      // Called once the state batches are sent (the audit stream below shows they ran first).
      campaigns: () => {
        builtAfter = Date.now();
        return Array.from({ length: 100 }, (_, i) => write(`c${i}`, `v${i}`));
      },
    });
    expect(builtAfter).toBeGreaterThan(0);
    expect(out).toMatchObject({ rejectedBatches: 0, campaignsWritten: 100 });
    expect(out.batches).toBeGreaterThan(2);
    expect(await r.redis.hlen(shardKeys(s).state)).toBe(400);
    expect(await r.redis.hget(shardKeys(s).campaign('c99'), 'p:campaign')).toBe('v99');
    // The last batch (a campaign batch) recorded the completed publish.
    expect(await r.redis.hget(shardKeys(s).claim, 'pt')).toBe('7');
    const entries = await readAuditLog(r.redis, s);
    const publishes = entries.filter((e) => e.kind === 'publish');
    expect(publishes.length).toBe(out.batches);
    expect(publishes[0]?.campaigns).toBe(0); // a state batch went first
    expect(publishes.at(-1)?.campaigns).toBeGreaterThan(0);

    await a.claim(f(1, 1, 1), 8, NOW);
    let built = false;
    await expect(
      a.publish({
        fence: f(1, 1, 1),
        tick: 8,
        nowMs: NOW,
        state: { set: ['c:c1:campaign', 'ok', 'c:c2:campaign', 'bad\x1fvalue'] },
        campaigns: () => {
          built = true;
          return [write('c1', 'later')];
        },
      }),
    ).rejects.toThrow(/unit separator 0x1f/);
    expect(built).toBe(false);
    expect(await r.redis.hget(shardKeys(s).state, 'c:c1:campaign')).toBe('s1');
    expect(await r.redis.hget(shardKeys(s).claim, 'pt')).toBe('7');
    expect((await readAuditLog(r.redis, s)).filter((e) => e.kind === 'publish').length).toBe(out.batches);
  });

  it('delays a new leader whose clock is behind, never giving a tick two publishers', async () => {
    const s = nextShard();
    const ahead = publisher(s, 'ahead/1'); // old leader, clock 25 s ahead (2.5 ticks)
    const behind = publisher(s, 'behind/2'); // takes over with a higher epoch
    const tickMs = 10_000;
    let realTick = 1000;
    const owners = new Map<number, string[]>();
    const record = (who: string, tick: number, accepted: boolean) => {
      if (accepted) owners.set(tick, [...(owners.get(tick) ?? []), who]);
    };
    for (let i = 0; i < 3; i++, realTick++) {
      const t = Math.floor((realTick * tickMs + 25_000) / tickMs);
      record('ahead', t, (await ahead.claim(f(1, 1, 1), t, NOW)).accepted);
    }
    const refused: number[] = [];
    let behindWon = false;
    for (let i = 0; i < 6; i++, realTick++) {
      const t = realTick; // behind's clock is the real one
      const out = await behind.claim(f(1, 1, 2), t, NOW);
      record('behind', t, out.accepted);
      if (out.accepted) behindWon = true;
      else refused.push(t);
      // The old leader claims blindly for one more tick (before its renewal fails), then once more
      // after the takeover (paused past it): it wins nothing once the new fence has claimed.
      if (i === 0 || behindWon) {
        const tAhead = Math.floor((realTick * tickMs + 25_000) / tickMs);
        const late = await ahead.claim(f(1, 1, 1), tAhead, NOW);
        record('ahead', tAhead, late.accepted);
        if (behindWon) expect(late).toMatchObject({ accepted: false, reason: 'fence' });
      }
    }
    expect(behindWon).toBe(true);
    expect(refused.length).toBeGreaterThan(0); // the skew costs the new leader ticks…
    expect(refused.length).toBeLessThanOrEqual(3);
    for (const [, who] of owners) expect(who).toHaveLength(1); // …but no tick ever has two publishers
  });

  it.runIf(mode === 'cluster')(
    'keeps every key of a shard in one slot, and shards on several nodes',
    async () => {
      const slots = new Set<number>();
      const k = shardKeys(5);
      for (const key of [k.claim, k.state, k.forecast, k.log, k.campaign('x'), k.campaign('y')])
        slots.add(slotOf(key));
      expect(slots.size).toBe(1);
      const nodes = new Set<string>();
      for (let s = 0; s < 24; s++)
        nodes.add(String((r.redis as Cluster).slots[slotOf(shardKeys(s).claim)]?.[0]));
      expect(nodes.size).toBe(3);
      expect(r.redis).toBeInstanceOf(Cluster);
    },
  );
});
