/**
 * Shard leases on dynalite with the real SDK: acquire, renew, take over on expiry (checked in code
 * against each instance's injected clock), release on a clean stop, an epoch that only grows,
 * exactly one winner when several contend, adoption by a newer invocation of the holding instance
 * (which fences out the older one), an older invocation learning that a newer one of its instance
 * started (superseded), and a holder that keeps its lease until expiry while DynamoDB is
 * unreachable.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { ShardLease } from '../../../shared/pacing/lease.js';
import { ManualClock } from '../../../shared/time/clock.js';

const T0 = Date.UTC(2026, 10, 21, 12, 0, 0);
const TTL = 25_000;
let region: LocalRegion;
let nextShard = 100;

beforeAll(async () => {
  region = await startLocalRegion();
});
afterAll(async () => {
  await region?.stop();
});

function lease(shard: number, instance: number, clock: ManualClock, startMs = T0): ShardLease {
  return new ShardLease({
    client: region.dynamodb,
    tableName: region.tableName('leases'),
    shard,
    instanceId: `s${shard}-i${instance}`,
    processId: `p${instance}-${startMs}`,
    invocationStartMs: startMs,
    ttlMs: TTL,
    clock,
  });
}

describe('shard lease', () => {
  it('acquires an absent lease, renews it, and keeps others following', async () => {
    const shard = nextShard++;
    const clock = new ManualClock(T0);
    const a = lease(shard, 0, clock);
    const b = lease(shard, 1, clock);
    expect(await a.tick()).toMatchObject({ held: true, epoch: 1, event: 'acquired' });
    expect(await b.tick()).toMatchObject({
      held: false,
      event: 'follower',
      record: { holder: `s${shard}-i0`, epoch: 1 },
    });
    clock.advance(10_000);
    const renewed = await a.tick();
    expect(renewed).toMatchObject({ held: true, epoch: 1, event: 'renewed' });
    expect(renewed.record?.expiresAtMs).toBe(T0 + 10_000 + TTL);
  });

  it('is taken over only after expiry on the taker’s clock, with a higher epoch; the old holder learns it lost', async () => {
    const shard = nextShard++;
    const clock = new ManualClock(T0);
    const a = lease(shard, 0, clock);
    const b = lease(shard, 1, clock);
    await a.tick();
    clock.advance(TTL - 1);
    expect((await b.tick()).held).toBe(false); // 1 ms before expiry: not yet
    clock.advance(1);
    expect(await b.tick()).toMatchObject({ held: true, epoch: 2, event: 'acquired' });
    expect(await a.tick()).toMatchObject({
      held: false,
      event: 'lost',
      record: { holder: `s${shard}-i1`, epoch: 2 },
    });
  });

  it('lets exactly one of several contenders win an expired lease', async () => {
    const shard = nextShard++;
    const clock = new ManualClock(T0);
    await lease(shard, 0, clock).tick();
    clock.advance(TTL);
    const contenders = [1, 2, 3, 4].map((i) => lease(shard, i, clock));
    const views = await Promise.all(contenders.map((c) => c.tick()));
    expect(views.filter((v) => v.held)).toHaveLength(1);
    expect(views.find((v) => v.held)?.epoch).toBe(2);
  });

  it('hands over at once after a clean release, keeping the epoch growing', async () => {
    const shard = nextShard++;
    const clock = new ManualClock(T0);
    const a = lease(shard, 0, clock);
    const b = lease(shard, 1, clock);
    await a.tick();
    expect((await a.release()).event).toBe('released');
    expect(await b.tick()).toMatchObject({ held: true, epoch: 2, event: 'acquired' });
    await b.release();
    expect(await a.tick()).toMatchObject({ held: true, epoch: 3 });
  });

  it('is adopted at once by a newer invocation of the holding instance, which fences out the older one', async () => {
    const shard = nextShard++;
    const clock = new ManualClock(T0);
    const minute1 = lease(shard, 0, clock, T0);
    await minute1.tick();
    clock.advance(60_000);
    const minute2 = lease(shard, 0, clock, T0 + 60_000); // the next minute's invocation, another process
    expect(await minute2.tick()).toMatchObject({ held: true, epoch: 2, event: 'adopted' });
    // The older invocation (late or resumed) loses and does not adopt it back.
    expect(await minute1.tick()).toMatchObject({ held: false, event: 'lost' });
    expect(await minute1.tick()).toMatchObject({ held: false, event: 'follower' });
    expect((await minute2.tick()).event).toBe('renewed');
  });

  it('an older invocation learns that a newer one of its instance started (superseded), holder or follower', async () => {
    const shard = nextShard++;
    const clock = new ManualClock(T0);
    const leader1 = lease(shard, 0, clock, T0);
    const follower1 = lease(shard, 1, clock, T0 + 3_000);
    await leader1.tick();
    await follower1.tick();
    expect([leader1.superseded, follower1.superseded]).toEqual([false, false]);
    // The next minute's invocations start while these still run their windows (they overlap).
    clock.advance(60_000);
    const leader2 = lease(shard, 0, clock, T0 + 60_000);
    const follower2 = lease(shard, 1, clock, T0 + 64_000);
    expect(await leader2.tick()).toMatchObject({ held: true, event: 'adopted' });
    await follower2.tick();
    // The follower sees it at its next tick; the holder when its renewal fails (adopted).
    await follower1.tick();
    expect(follower1.superseded).toBe(true);
    expect(await leader1.tick()).toMatchObject({ held: false, event: 'lost' });
    expect(leader1.superseded).toBe(true);
    // The newer ones are not; an older start registered late does not supersede a newer one.
    await leader2.tick();
    await follower2.tick();
    expect([leader2.superseded, follower2.superseded]).toEqual([false, false]);
    const late = lease(shard, 1, clock, T0 + 62_000); // a delivery of the earlier firing, late
    await late.tick();
    expect(late.superseded).toBe(true);
    await follower2.tick();
    expect(follower2.superseded).toBe(false);
  });

  it('a holder is never superseded: a duplicate started at the same instant that took the lease runs on', async () => {
    const shard = nextShard++;
    const clock = new ManualClock(T0);
    const first = lease(shard, 0, clock, T0);
    await first.tick();
    clock.advance(60_000);
    const a = lease(shard, 0, clock, T0 + 60_000);
    const b = lease(shard, 0, clock, T0 + 60_000); // the same delivery twice, same millisecond
    const [va, vb] = await Promise.all([a.tick(), b.tick()]);
    const holder = va.held ? a : b;
    const other = va.held ? b : a;
    expect([va.held, vb.held].filter(Boolean)).toHaveLength(1);
    expect(holder.superseded).toBe(false);
    await other.tick();
    await holder.tick();
    expect(holder.superseded).toBe(false);
    expect((await holder.tick()).event).toBe('renewed');
  });

  it('keeps the lease until expiry while DynamoDB is unreachable, then stops holding it', async () => {
    const shard = nextShard++;
    const clock = new ManualClock(T0);
    const a = lease(shard, 0, clock);
    await a.tick();
    await region.dynamoEmulator.suspend();
    try {
      clock.advance(10_000);
      const v = await a.tick();
      expect(v).toMatchObject({ held: true, event: 'unavailable', epoch: 1 });
      expect(v.error).toBeDefined();
      clock.advance(TTL);
      expect((await a.tick()).held).toBe(false);
    } finally {
      await region.dynamoEmulator.resume();
    }
  });

  it('never lowers the epoch across many changes of holder', async () => {
    const shard = nextShard++;
    const clock = new ManualClock(T0);
    let last = 0;
    for (let round = 0; round < 8; round++) {
      const l = lease(shard, round % 3, clock, T0 + round);
      const v = await l.tick();
      expect(v.held).toBe(true);
      expect(v.epoch).toBeGreaterThan(last);
      last = v.epoch;
      if (round % 2 === 0) await l.release();
      else clock.advance(TTL);
    }
  });
});
