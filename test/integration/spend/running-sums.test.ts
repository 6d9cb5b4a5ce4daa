/**
 * The lease script's running sums (docs/spend.md, "Running sums") on a real redis-server: the
 * state hash keeps `sl` / `sf` = the sums of its live `l:` / `f:` slot fields from `sk` up, so a
 * lease call reads a few fields instead of the whole hash. Checked against a model of the rule —
 * slot k counts iff k ≥ max(kmin of this call, the highest kmin a lease has stepped to) — over
 * random sequences of lease and apply calls with clocks that mostly advance, sometimes lag (a
 * guard on another host) and sometimes jump (a plan-day idle for an hour); from state hashes
 * written before the sums existed; and with the sums' fields deleted (a partial write, an
 * operator). After every call the hash itself must hold the invariant: `sl` / `sf` equal the sums
 * of the slot fields, and no slot field below `sk` is left. The same model checks the release
 * statistics (`b:<k>`, `sb`, `rf` / `rb` / `rn`: what was bid per slot, and what was still in flight
 * when a slot died) and the release they allow under a cap, and the pacer's reads of them.
 */
import { describe, expect, it } from 'vitest';
import { pipelinedSpendSource, rawSpendSource } from '../../../shared/pacing/spend-source.js';
import { prng } from '../../../shared/random/prng.js';
import { spendScripts } from '../../../shared/spend/live-counters.js';
import { type ReleaseStats, releasableOf, stepReleaseStats } from '../../../shared/spend/release.js';
import { useRedis } from '../../support/redis.js';

const Q = 60_000;
const T = 600_000;

/** The rule, on numbers: what the hash must hold and what each call must reply. */
class Model {
  readonly slots = new Map<string, number>();
  c = 0;
  /** The sums' floor, undefined when the hash has no (complete) sums. */
  sk: number | undefined;
  readonly seen = new Map<string, string>();

  private static slot(field: string): number {
    return Number(field.slice(2));
  }

  /** The release statistics (docs/spend.md, "In flight without loss notices"). */
  readonly stats: ReleaseStats = { rf: 0, rb: 0, rn: 0 };
  /** What the last lease released (the cap applied). */
  released = 0;

  private sumFrom(k0: number): { L: number; F: number; B: number } {
    let L = 0;
    let F = 0;
    let B = 0;
    for (const [f, v] of this.slots) {
      if (Model.slot(f) < k0) continue;
      if (f.startsWith('l:')) L += v;
      else if (f.startsWith('f:')) F += v;
      else B += v;
    }
    return { L, F, B };
  }

  private dropBelow(k0: number): void {
    for (const f of [...this.slots.keys()]) if (Model.slot(f) < k0) this.slots.delete(f);
  }

  lease(
    now: number,
    deltas: [string, number][],
    expected: number,
    want: number,
    minGrant: number,
    cap: number,
  ): number[] {
    const kmin = Math.floor((now - T) / Q);
    let sk: number;
    if (this.sk !== undefined && kmin - this.sk <= 16) {
      sk = Math.max(this.sk, kmin);
      // The slots that died since the last step: what was still in flight at T, against what was bid.
      for (let k = this.sk; k < sk; k++) {
        const b = this.slots.get(`b:${k}`);
        if (b !== undefined) stepReleaseStats(this.stats, this.slots.get(`f:${k}`) ?? 0, b);
      }
    } else sk = kmin;
    this.dropBelow(sk);
    for (const [f, d] of deltas) {
      if (Model.slot(f) < sk) continue;
      this.slots.set(f, (this.slots.get(f) ?? 0) + d);
      // A positive in-flight delta is a guard's settle: bids of that slot.
      if (f.startsWith('f:') && d > 0)
        this.slots.set(`b:${f.slice(2)}`, (this.slots.get(`b:${f.slice(2)}`) ?? 0) + d);
    }
    const { L, F, B } = this.sumFrom(sk);
    const release = Math.min(releasableOf(this.stats, B), cap);
    this.released = release;
    // A negative in-flight sum (bids resolved before their guard settled them) comes off the
    // leased float, which still holds those bids.
    const leased = F < 0 ? Math.max(0, Math.max(0, L) + F) : Math.max(0, L);
    const committed = this.c + leased + Math.max(0, Math.max(0, F) - release);
    const allowance = expected - committed;
    let grant = 0;
    if (want > 0) {
      if (allowance >= want) grant = want;
      else if (allowance >= minGrant && allowance > 0) grant = allowance;
    }
    const ks = Math.floor(now / Q);
    if (grant > 0) this.slots.set(`l:${ks}`, (this.slots.get(`l:${ks}`) ?? 0) + grant);
    this.sk = sk;
    return [grant, this.c, committed + grant, ks];
  }

  apply(now: number, field: string, kind: 'W' | 'L', price: number, bid: number, bidAt: number): number {
    const prev = this.seen.get(field);
    if (prev === 'W' || (kind === 'L' && prev !== undefined)) return 0;
    if (kind === 'W') this.c += price;
    let reply = 1;
    const k = Math.floor(bidAt / Q);
    // A loss already released the bid's in-flight amount: a later win only adds the price.
    if (prev === 'L') {
      // nothing to release
    } else if (k >= Math.floor((now - T) / Q)) {
      if (this.sk === undefined || k >= this.sk)
        this.slots.set(`f:${k}`, (this.slots.get(`f:${k}`) ?? 0) - bid);
    } else reply = 2;
    this.seen.set(field, kind);
    return reply;
  }
}

describe('lease script: running sums', () => {
  const r = useRedis('standalone');

  it('replies as the rule says and keeps sl / sf / sk true to the fields, over 40 random plan-days', async () => {
    const scripts = spendScripts(r.redis, 'raw');
    // The pacer's spend read from the sums, against the whole hash read by the contract's reader.
    const sumsRead = rawSpendSource(r.redis);
    const reference = pipelinedSpendSource(r.redis);
    const random = prng(77);
    let calls = 0;
    let stepped = 0;
    let rebuilt = 0;
    let lagged = 0;
    let released = 0;
    for (let day = 0; day < 40; day++) {
      const key = `rsum:{p${day}}:s`;
      const notices = `rsum:{p${day}}:n`;
      const model = new Model();
      let now = 1_790_000_000_000 + Math.floor(random() * Q);
      const base: Record<string, string> = { r: 'e1', q: String(Q), t: String(T), g: '0', c: '0', nc: '0' };
      // A quarter of the plan-days start as written before the sums existed, with slot fields.
      if (day % 4 === 0) {
        const k0 = Math.floor(now / Q);
        for (let k = k0 - 14; k <= k0; k++) {
          if (random() < 0.6) base[`l:${k}`] = String(Math.floor(random() * 5000));
          if (random() < 0.6) base[`f:${k}`] = String(Math.floor(random() * 3000) - 500);
        }
        for (const [f, v] of Object.entries(base)) if (f[1] === ':') model.slots.set(f, Number(v));
      }
      await r.redis.hset(key, base);
      let bids = 0;
      for (let step = 0; step < 120; step++) {
        const u = random();
        if (u < 0.03) now += 20 * Q + Math.floor(random() * 40 * Q);
        else if (u < 0.1) {
          now -= Math.floor(random() * 3 * Q);
          lagged++;
        } else now += Math.floor(random() * 20_000);
        if (random() < 0.02) {
          // The sums' fields lost (one of them): the next lease must sum the fields again.
          await r.redis.hdel(key, random() < 0.5 ? 'sl' : 'sf');
          model.sk = undefined;
        }
        const before = model.sk;
        if (random() < 0.55) {
          const kNow = Math.floor(now / Q);
          const deltas: [string, number][] = [];
          const n = Math.floor(random() * 4);
          for (let i = 0; i < n; i++) {
            const k = kNow - Math.floor(random() * 14);
            deltas.push([`${random() < 0.5 ? 'l' : 'f'}:${k}`, Math.floor(random() * 4000) - 2000]);
          }
          const expected = Math.floor(random() * 200_000);
          const want = random() < 0.8 ? 5000 : 0;
          // Most calls release up to a cap; some count every in-flight amount (cap 0).
          const cap = random() < 0.2 ? 0 : Math.floor(random() * 6000);
          const args: (string | number)[] = [
            now,
            'e1',
            expected,
            want,
            1000,
            1000,
            86_400_000,
            0,
            cap,
            '0',
            0,
            0,
          ];
          for (const [f, d] of deltas) args.push(f, d);
          const reply = await scripts.lease(key, args);
          const want4 = model.lease(now, deltas, expected, want, 1000, cap);
          expect([reply[0], reply[2], reply[3], reply[4]], `day ${day} step ${step} lease`).toEqual(want4);
          if (model.released > 0) released++;
          const kmin = Math.floor((now - T) / Q);
          if (before === undefined || kmin - before > 16) rebuilt++;
          else if (kmin > before) stepped++;
        } else {
          const bidAt = now - Math.floor(random() * 12 * Q);
          const field = random() < 0.1 && bids > 0 ? `b${Math.floor(random() * bids)}` : `b${bids++}`;
          const kind = random() < 0.4 ? 'W' : 'L';
          const price = 100 + Math.floor(random() * 900);
          const args = [now, field, kind, price, price + 50, bidAt, 86_400_000] as const;
          const reply = await scripts.apply(key, notices, [...args]);
          expect(reply, `day ${day} step ${step} apply`).toBe(
            model.apply(now, field, kind, price, price + 50, bidAt),
          );
        }
        calls++;
        // The invariant, on the hash itself.
        const all = await r.redis.hgetall(key);
        if (all.sk !== undefined && all.sl !== undefined && all.sf !== undefined) {
          const sk = Number(all.sk);
          let L = 0;
          let F = 0;
          let B = 0;
          for (const [f, v] of Object.entries(all)) {
            if (f[1] !== ':') continue;
            const k = Number(f.slice(2));
            expect(k, `day ${day} step ${step}: ${f} below sk ${sk}`).toBeGreaterThanOrEqual(sk);
            if (f[0] === 'l') L += Number(v);
            else if (f[0] === 'f') F += Number(v);
            else B += Number(v);
          }
          expect(
            [Number(all.sl), Number(all.sf), Number(all.sb ?? 0)],
            `day ${day} step ${step} sums`,
          ).toEqual([L, F, B]);
          if (all.rb !== undefined)
            expect(
              [Number(all.rf), Number(all.rb), Number(all.rn)],
              `day ${day} step ${step} release`,
            ).toEqual([model.stats.rf, model.stats.rb, model.stats.rn]);
        }
        // The pacer's read at instants around the call's (its clock is not the guards'): the same
        // snapshot from the sums as from every field.
        for (const at of [now, now - Q, now + Q / 2, now + 2 * Q + 1, now + 5 * Q]) {
          expect(await sumsRead.read([key], at), `day ${day} step ${step} pacer read at ${at - now}`).toEqual(
            await reference.read([key], at),
          );
        }
      }
    }
    sumsRead.close();
    // Every path was taken many times.
    expect(calls).toBe(40 * 120);
    expect(sumsRead.stats.sums).toBeGreaterThan(5_000);
    expect(sumsRead.stats.whole).toBeGreaterThan(2_000);
    expect(stepped).toBeGreaterThan(100);
    expect(rebuilt).toBeGreaterThan(40);
    expect(lagged).toBeGreaterThan(100);
    // The release statistics were learned and used (docs/spend.md, "In flight without loss notices").
    expect(released).toBeGreaterThan(100);
  }, 180_000); // ~15 s alone: thousands of script calls, none of them timed (a loaded host is slower)
});
