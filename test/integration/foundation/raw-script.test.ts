/**
 * The raw script caller the guard's lease calls and track-spend's applies go through
 * (shared/redis/resp/script-caller.ts), against real redis-server, standalone and a 3-node cluster: the
 * same replies and the same state as through ioredis over hundreds of interleaved spend calls;
 * replies of every RESP type; an error reply failing only its own call; scripts flushed (Redis
 * restarted) under a burst of calls on one key — each runs exactly once, in the order issued; a
 * connection killed while calls wait (they fail with the reason, the next call reconnects); a
 * stale cluster slot map; a client that is not connected yet; a process that exits after quit.
 */
import { Cluster, Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { startRedis } from '../../../local/emulators/redis.js';
import { repoRoot } from '../../../local/worker/process-invoker.js';
import { prng } from '../../../shared/random/prng.js';
import { slotsReady } from '../../../shared/redis/connect.js';
import { RawScriptError } from '../../../shared/redis/resp/errors.js';
import { RawScriptCaller, rawScript } from '../../../shared/redis/resp/script-caller.js';
import { spendScripts } from '../../../shared/spend/live-counters.js';
import { runChild } from '../../support/child.js';
import { killOtherConnections, nodeOf, useRedis, withStaleSlot } from '../../support/redis.js';

const APPEND = rawScript(
  'append',
  "redis.call('RPUSH', KEYS[1], ARGV[1]); return redis.call('LLEN', KEYS[1])",
  1,
);
const SHAPES = rawScript(
  'shapes',
  `if ARGV[1] == 'error' then return redis.error_reply('bad thing: ' .. KEYS[1]) end
   return {1, -42, 'text é', false, {7, 'x', {}}, redis.status_reply('OK'), ARGV[2]}`,
  1,
);

describe.each(['standalone', 'cluster'] as const)('raw script caller (%s)', (mode) => {
  const r = useRedis(mode);

  it('leaves the same replies and counters as ioredis over 600 interleaved lease and apply calls', async () => {
    if (r.redis instanceof Cluster) await slotsReady(r.redis);
    const raw = spendScripts(r.redis, 'raw');
    const client = spendScripts(r.redis, 'client');
    const random = prng(11);
    const now = 1_790_000_000_000;
    const slotMs = 60_000;
    const plans = 6;
    for (const side of ['raw', 'client'])
      for (let p = 0; p < plans; p++)
        await r.redis.hset(`rs:{${side}${p}}:s`, {
          r: 'e1',
          c: '0',
          q: String(slotMs),
          t: '600000',
          nc: '0',
        });
    const replies: Record<string, unknown[]> = { raw: [], client: [] };
    for (let round = 0; round < 20; round++) {
      const calls: ((side: 'raw' | 'client') => Promise<unknown>)[] = [];
      for (let i = 0; i < 30; i++) {
        const p = Math.floor(random() * plans);
        const at = now + round * 10_000 + i;
        const slot = Math.floor(at / slotMs);
        if (random() < 0.5) {
          const want = Math.floor(random() * 50_000);
          const deltas = random() < 0.5 ? [`l:${slot}`, -Math.floor(random() * 900), `f:${slot}`, 300] : [];
          calls.push((side) =>
            (side === 'raw' ? raw : client).lease(`rs:{${side}${p}}:s`, [
              at,
              'e1',
              1_000_000,
              want,
              100,
              1000,
              86_400_000,
              15_000,
              0,
              '0',
              0,
              0,
              ...deltas,
            ]),
          );
        } else {
          const bid = `b${Math.floor(random() * 120)}`;
          const kind = random() < 0.7 ? 'W' : 'L';
          calls.push((side) =>
            (side === 'raw' ? raw : client).apply(`rs:{${side}${p}}:s`, `rs:{${side}${p}}:n`, [
              at,
              bid,
              kind,
              400,
              600,
              at - 2_000,
              86_400_000,
            ]),
          );
        }
      }
      // Each side's calls issued together (pipelined, in order), the two sides one after the other.
      replies.raw?.push(...(await Promise.all(calls.map((c) => c('raw')))));
      replies.client?.push(...(await Promise.all(calls.map((c) => c('client')))));
    }
    const rename = (v: unknown) => JSON.stringify(v).replaceAll('client', 'raw');
    expect(rename(replies.client)).toBe(JSON.stringify(replies.raw));
    expect(replies.raw?.length).toBe(600);
    // Grants happened and duplicates were refused: the calls were not all alike.
    expect(replies.raw?.some((x) => Array.isArray(x) && (x[0] as number) > 0)).toBe(true);
    expect(replies.raw?.some((x) => x === 0)).toBe(true);
    for (let p = 0; p < plans; p++) {
      for (const k of ['s', 'n']) {
        const a = await r.redis.hgetall(`rs:{raw${p}}:${k}`);
        const b = await r.redis.hgetall(`rs:{client${p}}:${k}`);
        expect(b).toEqual(a);
      }
    }
  });

  it('returns every reply type as ioredis does, and fails only the call that got an error reply', async () => {
    const raw = RawScriptCaller.of(r.redis);
    const results = await Promise.allSettled([
      raw.call(SHAPES, ['rs:{shape}'], ['ok', '12345678901234']),
      raw.call(SHAPES, ['rs:{shape}'], ['error', '']),
      raw.call(SHAPES, ['rs:{shape}'], ['ok', 'é'.repeat(3000)]),
    ]);
    const reference = await r.redis.eval(SHAPES.lua, 1, 'rs:{shape}', 'ok', '12345678901234');
    expect(results[0]).toEqual({ status: 'fulfilled', value: reference });
    expect(reference).toEqual([1, -42, 'text é', null, [7, 'x', []], 'OK', '12345678901234']);
    const error = (results[1] as PromiseRejectedResult).reason as Error;
    expect(error).toBeInstanceOf(RawScriptError);
    expect(error.message).toMatch(/script shapes on rs:\{shape\}: bad thing: rs:\{shape\}/);
    expect(results[2]?.status).toBe('fulfilled');
    const long = (results[2] as PromiseFulfilledResult<unknown[]>).value;
    expect(long.slice(0, 6)).toEqual([1, -42, 'text é', null, [7, 'x', []], 'OK']);
    expect(long[6]).toBe('é'.repeat(3000));
  });

  it('runs each call once, in the order issued, when the scripts are flushed under a burst of calls', async () => {
    const raw = RawScriptCaller.of(r.redis);
    const key = 'rs:{burst}';
    expect(await raw.call(APPEND, [key], ['warm'])).toBe(1);
    const node = nodeOf(r.redis, key);
    for (let round = 0; round < 3; round++) {
      await node.script('FLUSH');
      const n = 200;
      const lengths = await Promise.all(
        Array.from({ length: n }, (_, i) => raw.call(APPEND, [key], [`r${round}-${i}`])),
      );
      expect(lengths).toEqual(Array.from({ length: n }, (_, i) => 2 + round * n + i));
    }
    const list = await r.redis.lrange(key, 0, -1);
    expect(list.length).toBe(601);
    expect(list.slice(1, 4)).toEqual(['r0-0', 'r0-1', 'r0-2']);
    expect(list.at(-1)).toBe('r2-199');
  });

  it("keeps the order issued when a script's first call follows or precedes another script's calls", async () => {
    const raw = RawScriptCaller.of(r.redis);
    const key = 'rs:{first-use}';
    expect(await raw.call(APPEND, [key], ['warm'])).toBe(1);
    // A script this node has never run: were its first call an EVALSHA, the NOSCRIPT retry would
    // run after the APPENDs written behind it (the simulator's outcome then hung on timing).
    const fresh = rawScript(
      'append-fresh',
      `-- first use ${mode}\nredis.call('RPUSH', KEYS[1], ARGV[1]); return redis.call('LLEN', KEYS[1])`,
      1,
    );
    const lengths = await Promise.all([
      raw.call(fresh, [key], ['a']),
      raw.call(APPEND, [key], ['b']),
      raw.call(fresh, [key], ['c']),
      raw.call(APPEND, [key], ['d']),
    ]);
    expect(lengths).toEqual([2, 3, 4, 5]);
    expect(await r.redis.lrange(key, 0, -1)).toEqual(['warm', 'a', 'b', 'c', 'd']);
  });

  it('fails the calls waiting on a killed connection with the reason, and reconnects for the next', async () => {
    const raw = RawScriptCaller.of(r.redis);
    const key = 'rs:{killed}';
    expect(await raw.call(APPEND, [key], ['before'])).toBe(1);
    const node = nodeOf(r.redis, key);
    // Writes paused: the calls wait in Redis while their connection is killed.
    const pauser = new Redis({ host: node.options.host, port: node.options.port, lazyConnect: true });
    await pauser.connect();
    try {
      await pauser.client('PAUSE', 2_000, 'WRITE');
      const waiting = Promise.allSettled([raw.call(APPEND, [key], ['x']), raw.call(APPEND, [key], ['y'])]);
      await new Promise((resolve) => setTimeout(resolve, 100));
      const own = await pauser.client('ID');
      const list = String(await pauser.client('LIST'));
      // The raw connection is the one whose last command is evalsha.
      const victim = [...list.matchAll(/id=(\d+) .*cmd=evalsha/g)].map((m) => Number(m[1]));
      expect(victim.length).toBe(1);
      expect(victim[0]).not.toBe(own);
      await pauser.client('KILL', 'ID', String(victim[0]));
      const settled = await waiting;
      for (const s of settled) {
        expect(s.status).toBe('rejected');
        expect(String((s as PromiseRejectedResult).reason)).toMatch(
          /closed with 2 call\(s\) waiting.*script ran is unknown/,
        );
      }
      await pauser.client('UNPAUSE');
      expect(await raw.call(APPEND, [key], ['after'])).toBe(2);
      expect(await r.redis.lrange(key, 0, -1)).toEqual(['before', 'after']);
    } finally {
      await pauser.client('UNPAUSE').catch(() => 0);
      pauser.disconnect();
    }
    // A kill with nothing waiting: the next call simply reconnects.
    await killOtherConnections(node);
    await new Promise((resolve) => setTimeout(resolve, 50));
    if (r.redis instanceof Cluster) await slotsReady(r.redis);
    expect(await raw.call(APPEND, [key], ['again'])).toBe(3);
  });

  it.runIf(mode === 'cluster')(
    'follows a redirect through the client when its slot map is stale',
    async () => {
      const cluster = r.redis as Cluster;
      const key = 'rs:{moved}';
      const raw = new RawScriptCaller(cluster);
      try {
        await withStaleSlot(cluster, key, async () => {
          expect(await raw.call(APPEND, [key], ['here'])).toBe(1);
          expect(await raw.call(APPEND, [key], ['again'])).toBe(2);
        });
      } finally {
        raw.close();
      }
      expect(await cluster.lrange(key, 0, -1)).toEqual(['here', 'again']);
    },
  );
});

describe('raw script caller lifetime', () => {
  it('goes through the client until it is connected, and lets the process exit once it quits', async () => {
    const server = await startRedis({ mode: 'standalone' });
    try {
      const port = Number(server.nodes[0]?.split(':')[1]);
      const lazy = new Redis({ port, lazyConnect: true });
      try {
        // Not connected yet: the call goes through ioredis, which connects.
        expect(await RawScriptCaller.of(lazy).call(APPEND, ['lazy'], ['a'])).toBe(1);
        expect(await RawScriptCaller.of(lazy).call(APPEND, ['lazy'], ['b'])).toBe(2);
      } finally {
        lazy.disconnect();
      }
      const script = `
          import { Redis } from 'ioredis';
          import { RawScriptCaller, rawScript } from './shared/redis/resp/script-caller.ts';
          const c = new Redis({ port: ${port} });
          await new Promise((r) => c.once('ready', r));
          const s = rawScript('n', "return redis.call('INCR', KEYS[1])", 1);
          console.log('n', await RawScriptCaller.of(c).call(s, ['n'], []), await RawScriptCaller.of(c).call(s, ['n'], []));
          await c.quit();
        `;
      // Killed (code 1) if it is still running after 15 s: something kept the process alive.
      const { code, stdout, stderr } = await runChild(
        process.execPath,
        ['--import', 'tsx', '--input-type=module', '-e', script],
        { cwd: repoRoot, env: process.env, timeoutMs: 15_000 },
      );
      const out = stdout + stderr;
      expect(out).toContain('n 1 2');
      expect(code).toBe(0);
    } finally {
      await server.stop();
    }
  }, 30_000);
});
