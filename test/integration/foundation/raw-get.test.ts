/**
 * The raw `GET` reader the cap check reads user logs with (shared/redis/resp/value-reader.ts), against real
 * redis-server: byte-for-byte what ioredis returns for values from empty to several MB (split
 * across TCP reads, pipelined, concurrent), a consumer's error failing only its own read, error
 * replies, a killed connection, cluster redirects after a stale slot map, and AUTH with a
 * username and a rotating password (as ElastiCache IAM auth uses) — which the pacer's raw spend
 * read now shares.
 */
import { spawn } from 'node:child_process';
import { type Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningRedis, startRedis } from '../../../local/emulators/redis.js';
import { repoRoot } from '../../../local/worker/process-invoker.js';
import { ActionStore } from '../../../shared/counting/store.js';
import { pipelinedSpendSource, rawSpendSource } from '../../../shared/pacing/spend-source.js';
import { prng } from '../../../shared/random/prng.js';
import { connectRedis, parseNodes, slotsReady } from '../../../shared/redis/connect.js';
import { RawReadTimeoutError, RawRedisAuthError, RawReplyError } from '../../../shared/redis/resp/errors.js';
import { type HashVisitor, RawHashReader } from '../../../shared/redis/resp/hash-reader.js';
import { clientValueReader, RawValueReader } from '../../../shared/redis/resp/value-reader.js';
import { ManualClock } from '../../../shared/time/clock.js';
import { killOtherConnections, nodeOf, useRedis, withStaleSlot } from '../../support/redis.js';

const copy = (b: Buffer | null) => (b === null ? null : Buffer.from(b));

describe.each(['standalone', 'cluster'] as const)('raw GET reader (%s)', (mode) => {
  const r = useRedis(mode);

  it('returns exactly what ioredis returns, for 400 values from empty to 3 MB read concurrently', async () => {
    const random = prng(5);
    const keys: string[] = [];
    let missing = 0;
    let large = 0;
    for (let i = 0; i < 400; i++) {
      const key = `raw:{u${i}}:log`;
      keys.push(key);
      if (i % 37 === 5) {
        missing++;
        continue;
      }
      const size =
        i % 100 === 0
          ? 3_000_000
          : i % 10 === 0
            ? 70_000 + i
            : i % 7 === 0
              ? 0
              : Math.floor(random() * 9_000);
      if (size >= 70_000) large++;
      const value = Buffer.alloc(size);
      for (let k = 0; k < size; k += 997) value[k] = Math.floor(random() * 256);
      value.fill(i % 251, 0, Math.min(size, 16));
      await r.redis.set(key, value);
    }
    const raw = new RawValueReader({ client: r.redis, maxReusedBytes: 1_000_000 });
    const reference = clientValueReader(r.redis);
    try {
      for (let round = 0; round < 2; round++) {
        const [fast, slow] = await Promise.all([
          Promise.all(keys.map((k) => raw.get(k, copy))),
          Promise.all(keys.map((k) => reference.get(k, copy))),
        ]);
        expect(fast.filter((v) => v === null).length).toBe(missing);
        expect(fast.filter((v) => v !== null && v.length >= 70_000).length).toBe(large);
        expect(large).toBeGreaterThan(30);
        // Byte comparison (a deep equality over 3 MB buffers takes minutes).
        const differing = keys.filter((_, i) => {
          const a = fast[i] ?? null;
          const b = slow[i] ?? null;
          return a === null || b === null ? a !== b : !a.equals(b);
        });
        expect(differing).toEqual([]);
      }
    } finally {
      raw.close();
    }
  });

  it('GETRANGE returns exactly what ioredis returns: inside, across and past the end, a missing key', async () => {
    const random = prng(6);
    const value = Buffer.from(Array.from({ length: 5000 }, () => Math.floor(random() * 256)));
    await r.redis.set('raw:{range}:log', value);
    const raw = new RawValueReader({ client: r.redis });
    const reference = clientValueReader(r.redis);
    const ranges: [string, number, number][] = [
      ['raw:{range}:log', 0, 2047],
      ['raw:{range}:log', 100, 199],
      ['raw:{range}:log', 4000, 9999],
      ['raw:{range}:log', 6000, 7000],
      ['raw:{range}:none', 0, 2047],
    ];
    try {
      const [fast, slow] = await Promise.all([
        Promise.all(ranges.map(([k, from, to]) => raw.getRange(k, from, to, copy))),
        Promise.all(ranges.map(([k, from, to]) => reference.getRange(k, from, to, copy))),
      ]);
      expect(fast.map((b) => b?.length)).toEqual([2048, 100, 1000, 0, 0]);
      expect(fast.every((b, i) => b?.equals(slow[i] as Buffer))).toBe(true);
      expect(fast[0]?.equals(value.subarray(0, 2048))).toBe(true);
    } finally {
      raw.close();
    }
  });

  it('fails only the read whose consumer throws; an error reply names the key and what Redis said', async () => {
    await r.redis.set('raw:{a}', 'alpha');
    await r.redis.hset('raw:{h}', 'f', '1');
    const raw = new RawValueReader({ client: r.redis });
    try {
      const results = await Promise.allSettled([
        raw.get('raw:{a}', (b) => b?.toString()),
        raw.get('raw:{a}', () => {
          throw new RangeError('bad candidate');
        }),
        raw.get('raw:{h}', (b) => b?.toString()),
        raw.get('raw:{a}', (b) => b?.toString()),
      ]);
      expect(results[0]).toEqual({ status: 'fulfilled', value: 'alpha' });
      expect(results[1]).toMatchObject({
        status: 'rejected',
        reason: { name: 'RangeError', message: 'bad candidate' },
      });
      expect(results[2]).toMatchObject({ status: 'rejected' });
      const wrongType = (results[2] as PromiseRejectedResult).reason as Error;
      expect(wrongType).toBeInstanceOf(RawReplyError);
      expect(wrongType.message).toMatch(/GET raw:\{h\}: WRONGTYPE/);
      expect(results[3]).toEqual({ status: 'fulfilled', value: 'alpha' });
    } finally {
      raw.close();
    }
  });

  it('is shared per client: 25 stores on one client add one end listener and one socket per node', async () => {
    const before = r.redis.listenerCount('end');
    const stores = Array.from(
      { length: 25 },
      (_, i) => new ActionStore({ redis: r.redis, clock: new ManualClock(0), keyPrefix: `shared${i}` }),
    );
    const logs = await Promise.all(stores.map((s) => s.eventLog('42')));
    expect(logs.every((l) => l.length === 0)).toBe(true);
    expect(r.redis.listenerCount('end') - before).toBeLessThanOrEqual(1);
    expect(RawValueReader.of(r.redis)).toBe(RawValueReader.of(r.redis));
  });

  it('opens a new connection after its connection is killed', async () => {
    await r.redis.set('raw:{k}', 'kept');
    const raw = new RawValueReader({ client: r.redis });
    try {
      expect(await raw.get('raw:{k}', (b) => b?.toString())).toBe('kept');
      // Kill every connection but the test client's own, on the key's node.
      await killOtherConnections(nodeOf(r.redis, 'raw:{k}'));
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(await raw.get('raw:{k}', (b) => b?.toString())).toBe('kept');
    } finally {
      raw.close();
    }
  });

  it.runIf(mode === 'cluster')(
    'follows a redirect through the client when its slot map is stale',
    async () => {
      const cluster = r.redis as Cluster;
      await slotsReady(cluster);
      await cluster.set('raw:{moved}', 'here');
      const raw = new RawValueReader({ client: cluster });
      try {
        await withStaleSlot(cluster, 'raw:{moved}', async () => {
          expect(await raw.get('raw:{moved}', (b) => b?.toString())).toBe('here');
        });
      } finally {
        raw.close();
      }
    },
  );
});

describe('raw connections with AUTH (username + password, as ElastiCache IAM auth)', () => {
  let server: RunningRedis;
  let admin: Redis;
  beforeAll(async () => {
    server = await startRedis({ mode: 'standalone' });
    admin = new Redis({ port: Number(server.nodes[0]?.split(':')[1]) });
    await admin.call('ACL', 'SETUSER', 'pacer', 'on', '>token-1', '~*', '+@all');
    await admin.call('ACL', 'SETUSER', 'root', 'on', '>root', '~*', '+@all');
    await admin.auth('root', 'root');
    // No unauthenticated access: a raw connection that skipped AUTH would get NOAUTH.
    await admin.call('ACL', 'SETUSER', 'default', 'off');
  }, 60_000);
  afterAll(async () => {
    admin?.disconnect();
    await server?.stop();
  });

  const client = (password: string) =>
    connectRedis(
      { mode: 'standalone', nodes: parseNodes(server.nodesEnv), tls: false },
      { redisOptions: { username: 'pacer', password } },
    );

  it('authenticates the log reader and the spend reader with the client’s current credentials', async () => {
    const c = client('token-1');
    try {
      await c.set('log:{1}', Buffer.alloc(100_000, 3));
      await c.hset('pl:{1}:state', { r: 'e', q: '60000', t: '0', c: '1234' });
      const raw = new RawValueReader({ client: c });
      expect((await raw.get('log:{1}', copy))?.length).toBe(100_000);
      const spend = rawSpendSource(c);
      const reference = await pipelinedSpendSource(c).read(['pl:{1}:state'], 120_000);
      expect(await spend.read(['pl:{1}:state'], 120_000)).toEqual(reference);
      expect(reference[0]?.confirmedMicros).toBe(1234);
      // The raw connections authenticated as the client's user (default is off): the client's
      // own connection and the three raw ones — the log reader's, and the spend read's two (its
      // running-sums HMGET, and the whole-hash read this hash needs: it has no sums).
      expect(spend.stats).toEqual({ sums: 0, whole: 1 });
      const list = String(await admin.client('LIST'));
      expect(list.match(/user=pacer/g)?.length ?? 0).toBe(4);
      raw.close();
      spend.close();
    } finally {
      c.disconnect();
    }
  });

  it('refuses with an error naming the node and the user when the password no longer works', async () => {
    const c = client('token-1');
    try {
      expect(await c.ping()).toBe('PONG');
      // Rotated on the server, not (yet) in the client: the next connect must say so, clearly.
      await admin.call('ACL', 'SETUSER', 'pacer', 'resetpass', '>token-2');
      const raw = new RawValueReader({ client: c });
      const error = await raw.get('log:{1}', copy).catch((e: Error) => e);
      expect(error).toBeInstanceOf(RawRedisAuthError);
      expect((error as Error).message).toMatch(
        /Redis node 127\.0\.0\.1:\d+ refused AUTH for pacer: -WRONGPASS/,
      );
      // With the new token in the client's options (what the IAM refresher does), it works again.
      (c as Redis).options.password = 'token-2';
      expect((await raw.get('log:{1}', copy))?.length).toBe(100_000);
      raw.close();
    } finally {
      await admin.call('ACL', 'SETUSER', 'pacer', 'resetpass', '>token-1');
      c.disconnect();
    }
  });
});

describe('raw readers when Redis stops answering', () => {
  /** A server of its own (the test pauses it with SIGSTOP, as a hung or frozen node would be). */
  const pausable = async () => {
    const server = await startRedis({ mode: 'standalone' });
    const client = connectRedis({
      nodes: parseNodes(server.nodes.join(',')),
      mode: 'standalone',
      tls: false,
    });
    return { server, client, pid: server.pids[0] as number };
  };

  it('fails the waiting reads after timeoutMs, names the node, and reads again once Redis is back', async () => {
    const { server, client, pid } = await pausable();
    const raw = new RawValueReader({ client, timeoutMs: 300 });
    try {
      await client.set('raw:{hang}', 'before');
      expect(await raw.get('raw:{hang}', (b) => b?.toString())).toBe('before');
      process.kill(pid, 'SIGSTOP');
      const t0 = performance.now();
      const reads = [
        raw.get('raw:{hang}', (b) => b?.toString()),
        raw.get('raw:{other}', (b) => b?.toString()),
      ];
      const settled = await Promise.allSettled(reads);
      const waited = performance.now() - t0;
      // Both fail (the second was queued behind the first), after the timeout and within its
      // checking period (+ scheduling slack), not after the TCP connection gives up (minutes).
      for (const s of settled) {
        expect(s.status).toBe('rejected');
        const error = (s as PromiseRejectedResult).reason as Error;
        expect(error).toBeInstanceOf(RawReadTimeoutError);
        expect(error.message).toMatch(
          new RegExp(`${server.nodes[0]} sent nothing for 300 ms while GET raw:\\{hang\\} waited \\(2 call`),
        );
      }
      expect(waited).toBeGreaterThanOrEqual(300);
      expect(waited).toBeLessThan(3000);
      process.kill(pid, 'SIGCONT');
      // The dropped connection is replaced: the next read is answered.
      expect(await raw.get('raw:{hang}', (b) => b?.toString())).toBe('before');
    } finally {
      process.kill(pid, 'SIGCONT');
      raw.close();
      client.disconnect();
      await server.stop();
    }
  });

  it('fails a bulk HGETALL read (spend, refresh-ahead) the node stops answering, and reads again once it is back', async () => {
    const { server, client, pid } = await pausable();
    const reader = new RawHashReader({ client, timeoutMs: 300 });
    /** Folds a hash into its field count. */
    const fields: HashVisitor<number> = {
      n: 0,
      begin() {
        this.n = 0;
      },
      field() {
        this.n++;
      },
      end() {
        return this.n;
      },
      fromObject: (hash) => Object.keys(hash).length,
    } as HashVisitor<number> & { n: number };
    try {
      await client.hset('raw:{h}', 'a', '1', 'b', '2');
      expect(await reader.read(['raw:{h}', 'raw:{none}'], fields)).toEqual([2, 0]);
      process.kill(pid, 'SIGSTOP');
      const t0 = performance.now();
      const error = await reader.read(['raw:{h}'], fields).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      const waited = performance.now() - t0;
      expect(error).toBeInstanceOf(RawReadTimeoutError);
      expect(error?.message).toMatch(/sent nothing for 300 ms during a read of 1 hash\(es\) \(0 answered\)/);
      expect(waited).toBeGreaterThanOrEqual(300);
      expect(waited).toBeLessThan(3000);
      process.kill(pid, 'SIGCONT');
      expect(await reader.read(['raw:{h}'], fields)).toEqual([2]);
    } finally {
      process.kill(pid, 'SIGCONT');
      reader.close();
      client.disconnect();
      await server.stop();
    }
  });

  it('rejects a timeout that is not a positive number of ms', () => {
    const client = new Redis({ lazyConnect: true });
    expect(() => new RawValueReader({ client, timeoutMs: 0 })).toThrow(/timeoutMs must be a positive/);
    expect(() => new RawHashReader({ client, timeoutMs: -1 })).toThrow(/timeoutMs must be a positive/);
    client.disconnect();
  });
});

describe('raw reader lifetime', () => {
  /** Runs `script` in a child process; its exit code and output (killed after 15 s). */
  const runChild = async (script: string) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      out += d.toString();
    });
    const code = await new Promise<number | null>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`still running after 15 s; output: ${out}`));
      }, 15_000);
      child.once('exit', (c) => {
        clearTimeout(timer);
        resolve(c);
      });
    });
    return { code, out };
  };

  it('does not keep a process alive once its client has quit (log reader)', async () => {
    const server = await startRedis({ mode: 'standalone' });
    try {
      const { code, out } = await runChild(`
        import { Redis } from 'ioredis';
        import { RawValueReader } from './shared/redis/resp/value-reader.ts';
        const c = new Redis({ port: ${Number(server.nodes[0]?.split(':')[1])} });
        await c.set('k', 'v');
        const raw = new RawValueReader({ client: c });
        console.log(await raw.get('k', (b) => b?.toString()));
        await c.quit();
      `);
      expect(out).toContain('v');
      expect(code).toBe(0);
    } finally {
      await server.stop();
    }
  }, 30_000);

  it('does not keep a process alive once its client has quit (spend reader, whole and in parts)', async () => {
    const server = await startRedis({ mode: 'standalone' });
    try {
      const { code, out } = await runChild(`
        import { Redis } from 'ioredis';
        import { rawSpendSource } from './shared/pacing/spend-source.ts';
        const c = new Redis({ port: ${Number(server.nodes[0]?.split(':')[1])} });
        await c.hset('s', { r: 'e', q: '60000', t: '600000', c: '42' });
        const raw = rawSpendSource(c);
        const whole = await raw.read(['s'], 0);
        const parts = await Promise.all(raw.readParts(['s', 's', 's'], 0, 2));
        console.log('confirmed', whole[0].confirmedMicros, parts.flat().length);
        await c.quit();
      `);
      expect(out).toContain('confirmed 42 3');
      expect(code).toBe(0);
    } finally {
      await server.stop();
    }
  }, 30_000);
});
