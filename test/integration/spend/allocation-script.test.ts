/**
 * Allocations in Redis (docs/spend.md, "Allocations"), on a real redis-server, standalone and a
 * 3-node cluster: the lease script grants only within min(E, a) while now ≤ ae, nothing for a
 * strict guard without `a`, and exactly as before without `a` and not strict — through both
 * transports (raw caller and ioredis `defineCommand`, the same LEASE_LUA); the allocation script
 * merges monotonically (a paused pacer's older view cannot raise a cap above a release), lowers to
 * max(target, committed now) and never below what guards hold, releases nothing while committed
 * is unknown (not initialised, rejoin grace) unless nothing was ever leased (`u`), and its fields
 * survive a rebuild (spendInit); the pacer's spend read returns them (sums and whole-hash paths).
 */
import { describe, expect, it } from 'vitest';
import { rawSpendSource } from '../../../shared/pacing/spend-source.js';
import { allocationScripts } from '../../../shared/spend/allocation-script.js';
import { defineSpendCommands, readPlanDay, spendScripts } from '../../../shared/spend/live-counters.js';
import { useRedis } from '../../support/redis.js';

const Q = 60_000;
const T = 600_000;
const NOW = 1_800_000_000_000;
const KEEP = 86_400_000;

/**
 * Lease ARGV: now, epoch, E, want, minGrant, weight‰, keepMs, leaseAhead, strict, default cap,
 * default until, deltas.
 */
function leaseArgs(
  now: number,
  expected: number,
  want: number,
  strict: boolean,
  deltas: (string | number)[] = [],
  byDefault: [number, number] = [0, 0],
) {
  return [now, '', expected, want, 1, 1000, KEEP, 0, 0, strict ? '1' : '0', ...byDefault, ...deltas];
}

for (const mode of ['standalone', 'cluster'] as const) {
  describe(`allocations in Redis (${mode})`, () => {
    const r = useRedis(mode);
    let n = 0;
    /** A fresh initialised plan-day state (as spendInit leaves it). */
    async function planDay(fields: Record<string, string | number> = {}): Promise<string> {
      const key = `al:{${mode}${n++}}:s`;
      await r.redis.hset(key, { r: 'e1', q: Q, t: T, g: 0, c: 0, nc: 0, ...fields });
      return key;
    }

    it('the lease script caps at min(E, a) while now ≤ ae, through both transports alike', async () => {
      for (const transport of ['raw', 'client'] as const) {
        const lease = spendScripts(r.redis, transport).lease;
        const key = await planDay({ a: 5_000, ae: NOW + 1_000 });
        expect((await lease(key, leaseArgs(NOW, 1_000_000, 3_000, true)))[0]).toBe(3_000);
        // 3,000 committed: 2,000 left of a even though E allows far more
        // held (reply[7]) = 1: the allocation, not E, cut the grant short
        expect(await lease(key, leaseArgs(NOW, 1_000_000, 3_000, true))).toMatchObject({ 0: 2_000, 7: 1 });
        expect(await lease(key, leaseArgs(NOW, 1_000_000, 3_000, true))).toMatchObject({ 0: 0, 7: 1 });
        // E below a: E caps, and the allocation held nothing back
        const low = await planDay({ a: 5_000, ae: NOW + 1_000 });
        expect(await lease(low, leaseArgs(NOW, 1_500, 3_000, true))).toMatchObject({ 0: 1_500, 7: 0 });
        expect(await lease(low, leaseArgs(NOW, 1_500, 3_000, true))).toMatchObject({ 0: 0, 7: 0 });
        // after ae: nothing, strict or not
        const late = await planDay({ a: 5_000, ae: NOW - 1 });
        expect((await lease(late, leaseArgs(NOW, 1_000_000, 3_000, true)))[0]).toBe(0);
        expect((await lease(late, leaseArgs(NOW, 1_000_000, 3_000, false)))[0]).toBe(0);
        // strict without a: nothing; not strict without a: E alone, as for one region
        const none = await planDay();
        expect((await lease(none, leaseArgs(NOW, 1_000_000, 3_000, true)))[0]).toBe(0);
        expect((await lease(none, leaseArgs(NOW, 1_000_000, 3_000, false)))[0]).toBe(3_000);
        // strict without a, within the region's default lease: its floor caps (a plan-day's first
        // instant, before the pacer wrote an allocation); after it, nothing
        const first = await planDay();
        expect((await lease(first, leaseArgs(NOW, 1_000_000, 3_000, true, [], [2_000, NOW])))[0]).toBe(2_000);
        expect((await lease(first, leaseArgs(NOW, 1_000_000, 3_000, true, [], [2_000, NOW])))[0]).toBe(0);
        const expired = await planDay();
        expect((await lease(expired, leaseArgs(NOW, 1_000_000, 3_000, true, [], [2_000, NOW - 1])))[0]).toBe(
          0,
        );
        // the allocation held those leases back: the pacer's demand estimate is told (ac), and
        // what the lease asked for (aw: the float its allocation must make room for)
        expect(await r.redis.hmget(expired, 'ac', 'aw')).toEqual([String(NOW), '3000']);
        // deltas still settle (they start after the strict flag)
        const settled = await planDay({ a: 10_000, ae: NOW + 1_000 });
        const slot = Math.floor(NOW / Q);
        await lease(settled, leaseArgs(NOW, 1_000_000, 4_000, true));
        await lease(settled, leaseArgs(NOW, 1_000_000, 0, true, [`l:${slot}`, -1_000, `f:${slot}`, 1_000]));
        expect(await r.redis.hmget(settled, `l:${slot}`, `f:${slot}`)).toEqual(['3000', '1000']);
      }
    });

    it('merges monotonically: an older view written after a release cannot raise the cap', async () => {
      const alloc = allocationScripts(r.redis);
      const key = await planDay();
      const base = { liveAtMs: NOW, ae: NOW + 60_000, first: false, keepMs: KEEP };
      expect(await alloc.write(key, { ...base, ag: 10_000, ax: 0, ar: 0 })).toMatchObject({ a: 10_000 });
      const lowered = await alloc.write(key, { ...base, ag: 10_000, ax: 0, ar: 0, lowerTo: 4_000 });
      expect(lowered).toMatchObject({ a: 4_000, ar: 6_000, released: 6_000 });
      // a paused pacer's write from before the release, and an older ack
      const stale = await alloc.write(key, { ...base, ag: 9_000, ax: 0, ar: 0, ae: NOW });
      expect(stale).toMatchObject({ a: 4_000, ag: 10_000, ar: 6_000, ae: NOW + 60_000 });
      // a reclaim applied: (ax, ar) move together, the counter restarts at the reclaim's
      expect(await alloc.write(key, { ...base, ag: 10_000, ax: 1_000, ar: 5_000 })).toMatchObject({
        a: 4_000,
        ax: 1_000,
        ar: 5_000,
      });
      expect(await r.redis.hmget(key, 'a', 'ag', 'ar', 'ax', 'ae')).toEqual([
        '4000',
        '10000',
        '5000',
        '1000',
        String(NOW + 60_000),
      ]);
    });

    it('lowers to max(target, committed now): floats and bids guards hold are never released', async () => {
      const alloc = allocationScripts(r.redis);
      const lease = spendScripts(r.redis).lease;
      const key = await planDay({ c: 1_000 });
      const base = { liveAtMs: NOW, ae: NOW + 60_000, first: false, keepMs: KEEP };
      await alloc.write(key, { ...base, ag: 20_000, ax: 0, ar: 0 });
      await lease(key, leaseArgs(NOW, 1_000_000, 5_000, true));
      const slot = Math.floor(NOW / Q);
      // 2,000 of the float spent: in flight now
      await lease(key, leaseArgs(NOW, 1_000_000, 0, true, [`l:${slot}`, -2_000, `f:${slot}`, 2_000]));
      const w = await alloc.write(key, { ...base, ag: 20_000, ax: 0, ar: 0, lowerTo: 0 });
      // committed = c 1,000 + float 3,000 + in flight 2,000
      expect(w).toMatchObject({ a: 6_000, released: 14_000 });
      // the lease script agrees: nothing more to grant
      expect((await lease(key, leaseArgs(NOW, 1_000_000, 1_000, true)))[0]).toBe(0);
      // once the slots are dead (T later) the same lowering releases them too
      const later = await alloc.write(key, {
        ...base,
        liveAtMs: NOW + T + Q,
        ag: 20_000,
        ax: 0,
        ar: 0,
        lowerTo: 0,
      });
      expect(later).toMatchObject({ a: 1_000, released: 5_000 });
    });

    it('releases nothing while committed is unknown, except from a plan-day nothing ever leased', async () => {
      const alloc = allocationScripts(r.redis);
      const fields = { liveAtMs: NOW, ae: NOW + 60_000, keepMs: KEEP, ag: 10_000, ax: 0, ar: 0 };
      const base = { ...fields, lowerTo: 0 };
      // a hash the pacer creates after a reset (not its first write): no lowering
      const reset = `al:{${mode}reset}:s`;
      expect(await alloc.write(reset, { ...base, first: false })).toMatchObject({ a: 10_000, released: 0 });
      expect(await r.redis.pttl(reset)).toBeGreaterThan(0);
      // rejoin grace after a rebuild: no lowering
      const grace = await planDay({ g: NOW + 1 });
      expect(await alloc.write(grace, { ...base, first: false })).toMatchObject({ a: 10_000, released: 0 });
      // the pacer's first write of a plan-day nobody leased from: u, and a release down to 0
      const fresh = `al:{${mode}fresh}:s`;
      expect(await alloc.write(fresh, { ...fields, first: true })).toMatchObject({ a: 10_000 });
      expect(await r.redis.hget(fresh, 'u')).toBe('1');
      expect(await alloc.write(fresh, { ...base, first: false, lowerTo: 2_000 })).toMatchObject({
        a: 2_000,
        released: 8_000,
      });
      // the first lease rebuilds the plan-day (spendInit): u is gone, the allocation survives
      defineSpendCommands(r.redis);
      await r.redis.spendInit(
        fresh,
        `${fresh.slice(0, -2)}:n`,
        `${fresh.slice(0, -2)}:st`,
        'e9',
        0,
        Q,
        T,
        KEEP,
        0,
      );
      expect(await r.redis.hmget(fresh, 'u', 'r', 'a', 'ag', 'ar', 'ax', 'ae')).toEqual([
        null,
        'e9',
        '2000',
        '10000',
        '8000',
        '0',
        String(NOW + 60_000),
      ]);
      const live = await readPlanDay(r.redis, fresh, NOW);
      expect(live.epoch).toBe('e9');
      // and the clear script (a deployment back to one region) removes the fields only
      await alloc.clear(fresh);
      expect(await r.redis.hmget(fresh, 'a', 'ae', 'r')).toEqual([null, null, 'e9']);
    });

    it('the pacer spend read returns the allocation fields (sums and whole-hash paths)', async () => {
      const key = await planDay({ c: 700, a: 9, ae: 8, ag: 20, ar: 7, ax: 4, ac: 3, aw: 6 });
      const withSums = await planDay({
        c: 700,
        sk: Math.floor((NOW - T) / Q),
        sl: 0,
        sf: 0,
        a: 9,
        ae: 8,
        ag: 20,
        ar: 7,
        ax: 4,
        ac: 3,
        aw: 6,
      });
      const plain = await planDay({ c: 5 });
      for (const source of [
        rawSpendSource(r.redis, { allocations: 'strict' }),
        rawSpendSource(r.redis, { allocations: 'strict', sums: false }),
      ]) {
        const [whole, sums, none] = await source.read([key, withSums, plain], NOW);
        const alloc = { a: 9, ae: 8, ag: 20, ar: 7, ax: 4, ac: 3, aw: 6 };
        expect(whole).toMatchObject({ confirmedMicros: 700, alloc });
        expect(sums).toMatchObject({ confirmedMicros: 700, alloc });
        expect(none?.alloc).toEqual({
          a: undefined,
          ae: undefined,
          ag: undefined,
          ar: undefined,
          ax: undefined,
        });
        source.close();
      }
      // allocations off: only a stored cap is reported (so the pacer can remove it)
      const off = rawSpendSource(r.redis);
      const [stale, , clean] = await off.read([key, withSums, plain], NOW);
      expect(stale?.alloc?.a).toBe(9);
      expect(clean).toEqual({
        initialised: true,
        confirmedMicros: 5,
        inFlightMicros: 0,
        leasedMicros: 0,
        releasableMicros: 0,
      });
      off.close();
    });
  });
}
