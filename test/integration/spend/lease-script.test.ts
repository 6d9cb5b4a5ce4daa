/**
 * The lease script's live-slot rule on a real redis-server: slot k of a plan-day is live at `now`
 * iff k >= kmin = floor((now − T) / q). The script decides it by comparing the field's length and
 * bytes with `l:<kmin>` / `f:<kmin>` instead of parsing each field's number (docs/spend.md,
 * "Script calls"), so this checks it against the rule computed here on numbers, over random hashes
 * whose slots straddle digit-count boundaries (9 / 10, 99 / 100, 999 / 1000 …), and with kmin ≤ 0.
 */
import { describe, expect, it } from 'vitest';
import { prng } from '../../../shared/random/prng.js';
import { spendScripts } from '../../../shared/spend/live-counters.js';
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
      const committed = 1000 + Math.max(0, L) + Math.max(0, F);
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
