/**
 * The pacer's bulk live-spend read: the raw-RESP reader folds each state hash from its reply bytes
 * and must agree exactly with ioredis + the contract's reader (planDaySnapshot) — random slots,
 * negative in-flight entries, expired slots, the release statistics, uninitialised and missing
 * hashes, hashes large enough to be split across TCP reads — on standalone Redis and a 3-node
 * cluster. Also the CLI's exit code when a store cannot be reached.
 */
import { describe, expect, it } from 'vitest';
import { EXIT, main } from '../../../cli/paceline.js';
import { pipelinedSpendSource, rawSpendSource } from '../../../shared/pacing/spend-source.js';
import { prng } from '../../../shared/random/prng.js';
import { pipelineByNode } from '../../../shared/redis/connect.js';
import { useRedis } from '../../support/redis.js';

const NOW = Date.UTC(2026, 10, 21, 12, 0, 0);

describe.each(['standalone', 'cluster'] as const)('bulk live-spend read (%s)', (mode) => {
  const r = useRedis(mode);

  it('agrees exactly with the contract reader on 3,000 varied hashes', async () => {
    const random = prng(11);
    const keys: string[] = [];
    const writes: { key: string; fields: Record<string, string> }[] = [];
    const slot = Math.floor(NOW / 60_000);
    for (let i = 0; i < 3_000; i++) {
      const key = `pl:1:{c:camp${i}}:campaign:2026-11-21`;
      keys.push(key);
      if (i % 50 === 7) continue; // missing key
      const fields: Record<string, string> = {
        q: '60000',
        t: '600000',
        g: '0',
        c: String(Math.floor(random() * 1e9)),
      };
      if (i % 40 !== 3) fields.r = `epoch-${i}`; // some are not initialised
      const slots = i % 500 === 0 ? 3_000 : Math.floor(random() * 25); // a few huge hashes (split reads)
      for (let k = 0; k < slots; k++) {
        const s = slot - Math.floor(random() * 20) + 3; // live and expired slots
        fields[`l:${s}`] = String(Math.floor(random() * 5_000));
        fields[`f:${s}`] = String(Math.floor(random() * 6_000) - 1_000); // may be negative
        // What the guards bid in that slot (release statistics), for two thirds of the hashes.
        if (i % 3 !== 0) fields[`b:${s}`] = String(Math.floor(random() * 8_000));
      }
      if (i % 3 !== 0 && random() < 0.7) {
        // Learned release statistics; some below the slots they need, so some release nothing.
        const rb = 1 + Math.floor(random() * 90_000);
        Object.assign(fields, {
          rb: String(rb),
          rf: String(Math.floor(random() * rb)),
          rn: String(Math.floor(random() * 8_000)),
        });
      }
      if (i % 3 === 1) {
        // Running sums as the lease script keeps them (no slot field below sk; sl / sf the sums of
        // the rest), with sk from 4 slots below this read's first live slot to 2 above it: the sums
        // read answers from them or reads the hash whole.
        const sk = slot - 10 - 4 + Math.floor(random() * 7);
        let sl = 0;
        let sf = 0;
        let sb = 0;
        for (const f of Object.keys(fields)) {
          if (f[1] !== ':') continue;
          if (Number(f.slice(2)) < sk) delete fields[f];
          else if (f[0] === 'l') sl += Number(fields[f]);
          else if (f[0] === 'f') sf += Number(fields[f]);
          else sb += Number(fields[f]);
        }
        Object.assign(fields, { sk: String(sk), sl: String(sl), sf: String(sf) });
        if (sb > 0) fields.sb = String(sb);
        // Stored with another slot width than the read assumes (60 s): read whole.
        if (i % 7 === 5) fields.q = '30000';
      }
      writes.push({ key, fields });
    }
    await pipelineByNode(
      r.redis,
      writes,
      (w) => w.key,
      (p, w) => {
        p.hset(w.key, w.fields);
      },
    );
    const raw = rawSpendSource(r.redis);
    try {
      const fast = await raw.read(keys, NOW);
      const reference = await pipelinedSpendSource(r.redis).read(keys, NOW);
      expect(fast).toEqual(reference);
      expect(fast.filter((s) => !s.initialised).length).toBeGreaterThan(100);
      // Releases were computed, from the sums and from whole hashes.
      expect(fast.filter((s) => (s.releasableMicros ?? 0) > 0).length).toBeGreaterThan(300);
      // Both ways were taken: from the sums (sk within 2 slots below the first live one, or above
      // it) and whole (no sums, or sums older than that).
      expect(raw.stats.sums).toBeGreaterThan(400);
      expect(raw.stats.whole).toBeGreaterThan(1_500);
      // Every hash read whole gives the same.
      const whole = rawSpendSource(r.redis, { sums: false });
      try {
        expect(await whole.read(keys, NOW)).toEqual(reference);
        expect(whole.stats).toEqual({ sums: 0, whole: keys.length });
      } finally {
        whole.close();
      }
      // A second read on the same connections.
      expect(await raw.read(keys.slice(0, 100), NOW + 60_000)).toEqual(
        await pipelinedSpendSource(r.redis).read(keys.slice(0, 100), NOW + 60_000),
      );
      // The same read in parts of 700 keys (the pacer steps each part as it arrives).
      const parts = raw.readParts?.(keys, NOW, 700) ?? [];
      expect(parts.length).toBe(5);
      expect((await Promise.all(parts)).flat()).toEqual(reference);
    } finally {
      raw.close();
    }
  });
});

describe.each(['standalone', 'cluster'] as const)('bulk live-spend read in parts (%s)', (mode) => {
  const r = useRedis(mode);

  it('fails only the part holding a key that is not a hash; the other parts match the reference', async () => {
    const keys = Array.from({ length: 1_000 }, (_, i) => `pl:1:{c:parts${i}}:campaign:2026-11-21`);
    await pipelineByNode(
      r.redis,
      keys,
      (k) => k,
      (p, k) => {
        p.hset(k, {
          q: '60000',
          t: '600000',
          g: '0',
          c: '1234',
          r: 'e',
          [`l:${Math.floor(NOW / 60_000)}`]: '7',
          // The parts after the corrupt key are bulky, so their replies are still arriving when
          // its re-read through ioredis fails: that failure must not reject them.
          ...(Number(k.slice(k.indexOf('parts') + 5, k.indexOf('}'))) >= 600
            ? Object.fromEntries(Array.from({ length: 300 }, (_, j) => [`z${j}`, 'padding'.repeat(4)]))
            : {}),
        });
      },
    );
    // A string where a hash belongs (a corrupt key): its part rejects with Redis's own reason.
    await r.redis.del(keys[450] as string);
    await r.redis.set(keys[450] as string, 'not a hash');
    const raw = rawSpendSource(r.redis);
    try {
      const parts = raw.readParts?.(keys, NOW, 200) ?? [];
      expect(parts.length).toBe(5);
      const settled = await Promise.allSettled(parts);
      expect(settled.map((x) => x.status)).toEqual([
        'fulfilled',
        'fulfilled',
        'rejected',
        'fulfilled',
        'fulfilled',
      ]);
      expect(String((settled[2] as PromiseRejectedResult).reason)).toMatch(/WRONGTYPE/);
      const reference = await pipelinedSpendSource(r.redis).read(keys.slice(600), NOW);
      expect((settled.slice(3) as PromiseFulfilledResult<unknown[]>[]).flatMap((x) => x.value)).toEqual(
        reference,
      );
      expect(
        (settled[0] as PromiseFulfilledResult<{ confirmedMicros: number }[]>).value[0]?.confirmedMicros,
      ).toBe(1234);
    } finally {
      raw.close();
    }
  });
});

describe('paceline status against an unreachable store', () => {
  it('reports an unreachable store with exit 6 (EXIT.unreachable)', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const env = {
      AWS_REGION: 'us-east-1',
      AWS_ENDPOINT_URL_DYNAMODB: 'http://127.0.0.1:9',
      AWS_ENDPOINT_URL_SSM: 'http://127.0.0.1:9',
      REDIS_NODES: '127.0.0.1:9',
      REDIS_MODE: 'standalone',
      PACER_SHARDS: '2',
      AWS_ACCESS_KEY_ID: 'local',
      AWS_SECRET_ACCESS_KEY: 'local',
    };
    const io = { out: (l: string) => out.push(l), err: (l: string) => err.push(l), env, now: () => 0 };
    expect(await main(['status'], io)).toBe(EXIT.unreachable);
    expect(out[0]).toMatch(/^Target: local us-east-1/);
    expect(err).toHaveLength(1);
    expect(err[0]).toMatch(/could not reach a store/);
  }, 30_000);
});
