/**
 * The lease script's live-slot rule on a real redis-server: slot k of a plan-day is live at `now`
 * iff k >= kmin = floor((now − T) / q). The script decides it by comparing the field's length and
 * bytes with `l:<kmin>` / `f:<kmin>` instead of parsing each field's number (docs/spend.md,
 * "Script calls"), so this checks it against the rule computed here on numbers, over random hashes
 * whose slots straddle digit-count boundaries (9 / 10, 99 / 100, 999 / 1000 …), and with kmin ≤ 0.
 * And a bid whose win notice lands before its guard settles it counts once, in the script and in
 * the contract's reader alike.
 */
import { describe, expect, it } from 'vitest';
import { prng } from '../../../shared/random/prng.js';
import { readPlanDay, spendScripts } from '../../../shared/spend/live-counters.js';
import { useRedis } from '../../support/redis.js';

describe('lease script: live slots', () => {
  const r = useRedis('standalone');

  it('sums exactly the live l:/f: fields and deletes exactly the dead l:/f:/b: ones, across digit-count boundaries', async () => {
    const scripts = spendScripts(r.redis, 'raw');
    const random = prng(2024);
    const q = 1000;
    const t = 10_000;
    let checked = 0;
    let deadSeen = 0;
    for (let round = 0; round < 300; round++) {
      // kmin from −3 to a little past 10^5, biased to just around a power of ten.
      const power = 10 ** Math.floor(random() * 6);
      const kmin = round % 10 === 0 ? -3 + Math.floor(random() * 4) : power + Math.floor(random() * 7) - 3;
      const now = kmin * q + t + Math.floor(random() * q);
      expect(Math.floor((now - t) / q)).toBe(kmin);
      const key = `ls:{p${round}}:s`;
      const fields: Record<string, string> = { r: 'e1', q: String(q), t: String(t), g: '0', c: '1000' };
      let L = 0;
      let F = 0;
      const dead: string[] = [];
      const live: string[] = [];
      for (let i = 0; i < 24; i++) {
        const k = Math.max(0, kmin + Math.floor(random() * 2 * (Math.abs(kmin) + 5)) - Math.abs(kmin) - 5);
        // A third of the fields are the bids' b:<k> (release statistics): dead like the others,
        // never counted in what is committed.
        const u = random();
        const kind = u < 0.34 ? 'l' : u < 0.67 ? 'f' : 'b';
        const field = `${kind}:${k}`;
        if (fields[field] !== undefined) continue;
        const value = Math.floor(random() * 1000) - 100;
        fields[field] = String(value);
        if (k < kmin) dead.push(field);
        else {
          live.push(field);
          if (kind === 'l') L += value;
          else if (kind === 'f') F += value;
        }
      }
      await r.redis.hset(key, fields);
      const reply = await scripts.lease(key, [now, 'e1', 10 ** 12, 0, 1, 1000, 60_000, 0, 0, '0', 0, 0]);
      // Each sum clamped at 0, a negative in-flight sum taken off the leased float first.
      const committed = 1000 + (F < 0 ? Math.max(0, Math.max(0, L) + F) : Math.max(0, L) + F);
      expect(reply[0]).toBe(0);
      expect(reply[2]).toBe(1000);
      expect(reply[3]).toBe(committed);
      const left = await r.redis.hgetall(key);
      for (const f of dead) expect(left[f], `${f} is dead at kmin ${kmin}`).toBeUndefined();
      for (const f of live) expect(left[f], `${f} is live at kmin ${kmin}`).toBe(fields[f]);
      checked += live.length + dead.length;
      deadSeen += dead.length;
    }
    // The rounds were not trivial: many fields on both sides of the boundary.
    expect(checked).toBeGreaterThan(5000);
    expect(deadSeen).toBeGreaterThan(1000);
  });
});

describe('lease script: a bid resolved before its guard settled it', () => {
  const r = useRedis('standalone');

  it('counts once: its price in confirmed, its amount no longer in the lease', async () => {
    const scripts = spendScripts(r.redis, 'raw');
    const q = 1000;
    const t = 30_000;
    const leaseAheadMs = 5000;
    const now = Date.UTC(2026, 2, 7, 6, 0, 30); // a day's first minute, where E is small
    const key = 'ls:{held}:s';
    const notices = 'ls:{held}:n';
    await r.redis.hset(key, { r: 'e1', q: String(q), t: String(t), g: '0', c: '0' });
    const lease = (at: number, expected: number, want: number, deltas: (string | number)[] = []) =>
      scripts.lease(key, [
        at,
        'e1',
        expected,
        want,
        1,
        1000,
        3_600_000,
        leaseAheadMs,
        0,
        '0',
        0,
        0,
        ...deltas,
      ]);
    // A guard leases 500,000 and bids 300,000 of it at +1 s (first price: it pays its bid).
    const first = await lease(now, 1_000_000, 500_000);
    expect(first[0]).toBe(500_000);
    const leaseSlot = first[4];
    const bidAt = now + 1000;
    const bidSlot = Math.floor(bidAt / q);
    // The win lands at +2 s, before the guard's next call settles the bid out of its lease.
    expect(
      await scripts.apply(key, notices, [now + 2000, 'bid-1', 'W', 300_000, 300_000, bidAt, 3_600_000]),
    ).toBe(1);
    // Held: 300,000 confirmed + the 200,000 of float left unspent — not 300,000 + 500,000.
    const live = await readPlanDay(r.redis, key, now + 2500);
    expect(live.confirmedMicros).toBe(300_000);
    expect(live.confirmedMicros + live.inFlightMicros + live.leasedMicros).toBe(500_000);
    // So E = 800,000 leaves 300,000 to lease (counting the bid twice would leave nothing).
    const second = await lease(now + 3000, 800_000, 300_000);
    expect(second[0]).toBe(300_000);
    expect(second[3]).toBe(800_000);
    // The guard's settle (lease → in flight of the bid's slot) changes nothing that is counted.
    const settled = await lease(now + 4000, 800_000, 0, [
      `l:${leaseSlot}`,
      -300_000,
      `f:${bidSlot}`,
      300_000,
    ]);
    expect(settled[3]).toBe(800_000);
    const after = await readPlanDay(r.redis, key, now + 4000);
    expect(after.confirmedMicros + after.inFlightMicros + after.leasedMicros).toBe(800_000);
  });
});
