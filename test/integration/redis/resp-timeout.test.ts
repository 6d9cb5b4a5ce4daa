/**
 * The raw layer's one timeout policy (shared/redis/resp/timeout.ts) holds for script calls as for
 * reads, against real redis-server: a node busy longer than the limit (`DEBUG SLEEP`) fails the
 * calls waiting on it with a `RawReadTimeoutError` (a `RawRedisError`) that names the node and the
 * call and says what to do, before the node is back — and the next call works; a node busy for
 * less than the limit is waited for; a large reply that trickles in for many times the limit (a
 * slow link, not a silent node) is not cut off.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningRedis, startRedis } from '../../../local/emulators/redis.js';
import { PacelineError } from '../../../shared/errors.js';
import { connectRedis, parseNodes, type RedisClient } from '../../../shared/redis/connect.js';
import { RawReadTimeoutError, RawRedisError } from '../../../shared/redis/resp/errors.js';
import { RawScriptCaller, rawScript } from '../../../shared/redis/resp/script-caller.js';
import { type LatencyProxy, startLatencyProxy } from '../../support/latency-proxy.js';
import { nodeOf, useRedis } from '../../support/redis.js';

const INCR = rawScript('incr', "return redis.call('INCR', KEYS[1])", 1);
const BLOB = rawScript('blob', "return string.rep('z', tonumber(ARGV[1]))", 1);

describe('script calls on a 3-node cluster', () => {
  const r = useRedis('cluster', { debugCommand: true });

  it('fail with a timeout that says what to do when the node is silent past the limit, then work again', async () => {
    const caller = new RawScriptCaller(r.redis, { timeoutMs: 300 });
    try {
      expect(await caller.call(INCR, ['t:{a}'], [])).toBe(1);
      const node = nodeOf(r.redis, 't:{a}');
      const sleeping = node.call('DEBUG', 'SLEEP', '1.5');
      await new Promise((resolve) => setTimeout(resolve, 50));
      const started = performance.now();
      const settled = await Promise.allSettled([
        caller.call(INCR, ['t:{a}'], []),
        caller.call(INCR, ['t:{a}'], []),
      ]);
      const waited = performance.now() - started;
      for (const s of settled) {
        expect(s.status).toBe('rejected');
        const error = (s as PromiseRejectedResult).reason as Error;
        expect(error).toBeInstanceOf(RawReadTimeoutError);
        expect(error).toBeInstanceOf(RawRedisError);
        expect(error).toBeInstanceOf(PacelineError);
        expect(error.message).toMatch(
          /sent nothing for 300 ms while script incr on t:\{a\} waited \(2 call\(s\) waiting\); the connection is dropped and the next call opens a new one\. Check the node .*raise timeoutMs/,
        );
      }
      // Failed on the silence, long before the node woke up (1.5 s).
      expect(waited).toBeGreaterThanOrEqual(250);
      expect(waited).toBeLessThan(1_300);
      await sleeping;
      // Works again on a new connection. Whether the timed-out calls ran is unknown to the caller
      // (the node may still read them from the dropped connection when it wakes).
      expect(await caller.call(INCR, ['t:{a}'], [])).toBeGreaterThanOrEqual(2);
    } finally {
      caller.close();
    }
  });

  it('wait for a node busy for less than the limit', async () => {
    const caller = new RawScriptCaller(r.redis, { timeoutMs: 1_000 });
    try {
      const node = nodeOf(r.redis, 't:{b}');
      const sleeping = node.call('DEBUG', 'SLEEP', '0.3');
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(await caller.call(INCR, ['t:{b}'], [])).toBe(1);
      await sleeping;
    } finally {
      caller.close();
    }
  });

  it('reject a timeout that is not a positive number of ms', () => {
    expect(() => new RawScriptCaller(r.redis, { timeoutMs: 0 })).toThrow(
      /RawScriptCaller: timeoutMs must be a positive number of ms \(got 0\)/,
    );
  });
});

describe('a large script reply trickling in', () => {
  let server: RunningRedis;
  let proxy: LatencyProxy;
  let slow: RedisClient;

  beforeAll(async () => {
    server = await startRedis({ mode: 'standalone' });
    // The server's replies at 200 KB/s: a 1 MB reply takes ~5 s, five times the 1 s limit (a limit
    // well above the first byte's latency on a loaded host, where the proxy's thread waits too).
    proxy = await startLatencyProxy(Number(server.nodes[0]?.split(':')[1]), 0, 1, 200_000);
    slow = connectRedis({ nodes: parseNodes(`127.0.0.1:${proxy.port}`), mode: 'standalone', tls: false });
  }, 60_000);

  afterAll(async () => {
    slow?.disconnect();
    await proxy?.stop();
    await server?.stop();
  });

  it('is read whole: the limit is on silence, not on the call’s duration', async () => {
    const caller = new RawScriptCaller(slow, { timeoutMs: 1_000 });
    try {
      await slow.ping();
      const started = performance.now();
      const reply = await caller.call(BLOB, ['blob'], [1_000_000]);
      expect(performance.now() - started).toBeGreaterThan(3_000);
      expect(reply).toBe('z'.repeat(1_000_000));
    } finally {
      caller.close();
    }
  }, 30_000);
});
