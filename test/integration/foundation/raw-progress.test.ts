/**
 * The raw readers' timeout is on progress, not duration (shared/redis/resp/timeout.ts,
 * SilenceWatchdog), against real redis-server: a read that streams steadily for many times the
 * limit succeeds (through a proxy that trickles the replies), a stall of this process longer than
 * the limit is not taken for the node's silence (the bytes waiting in the socket count, and so do
 * the commands this process had not sent yet), a node
 * busy for less than the limit (`DEBUG SLEEP`) is waited for, and one busy for longer fails the
 * read — which a retry after the node is back reads again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningRedis, startRedis } from '../../../local/emulators/redis.js';
import { connectRedis, parseNodes, type RedisClient } from '../../../shared/redis/connect.js';
import { RawReadTimeoutError } from '../../../shared/redis/resp/errors.js';
import { type HashVisitor, RawHashReader } from '../../../shared/redis/resp/hash-reader.js';
import { RawValueReader } from '../../../shared/redis/resp/value-reader.js';
import { type LatencyProxy, startLatencyProxy } from '../../support/latency-proxy.js';

let server: RunningRedis;
let client: RedisClient;
let proxy: LatencyProxy;
/** The same server through a proxy that trickles its replies at 1 MB/s. */
let slow: RedisClient;
let admin: RedisClient;

const VALUES = 40;
const VALUE_BYTES = 64 * 1024;
const HASHES = 200;
const FIELD_BYTES = 1024;

beforeAll(async () => {
  server = await startRedis({ mode: 'standalone', debugCommand: true });
  const nodes = parseNodes(server.nodes.join(','));
  client = connectRedis({ nodes, mode: 'standalone', tls: false });
  admin = connectRedis({ nodes, mode: 'standalone', tls: false });
  proxy = await startLatencyProxy(Number(server.nodes[0]?.split(':')[1]), 0, 1, 1_000_000);
  slow = connectRedis({ nodes: [{ host: '127.0.0.1', port: proxy.port }], mode: 'standalone', tls: false });
  for (let i = 0; i < VALUES; i++)
    await client.set(`v:{${i}}`, String.fromCharCode(97 + (i % 26)).repeat(VALUE_BYTES));
  for (let i = 0; i < HASHES; i++) {
    const fields: string[] = [];
    for (let f = 0; f < 10; f++) fields.push(`f${f}`, 'x'.repeat(FIELD_BYTES));
    await client.hset(`h:{${i}}`, ...fields);
  }
}, 60_000);

afterAll(async () => {
  client?.disconnect();
  admin?.disconnect();
  slow?.disconnect();
  await proxy?.stop();
  await server?.stop();
});

/** Folds a hash into its total value bytes. */
const valueBytes = (): HashVisitor<number> => {
  let n = 0;
  return {
    begin() {
      n = 0;
    },
    field(_buf, _fs, _fe, vs, ve) {
      n += ve - vs;
    },
    end: () => n,
    fromObject: (hash) => Object.values(hash).reduce((a, v) => a + v.length, 0),
  };
};

const keysOf = (prefix: string, count: number) => Array.from({ length: count }, (_, i) => `${prefix}:{${i}}`);

/** Blocks this process's event loop for `ms` (its own CPU work, a GC pause, a descheduled host). */
const stall = (ms: number) => {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy
  }
};

describe('raw readers time out on silence, not on duration', () => {
  it('GET: a queue answered steadily for many times the limit is read whole', async () => {
    const raw = new RawValueReader({ client: slow, timeoutMs: 300 });
    try {
      // The first read opens the connection (through the client until it is ready).
      await slow.ping();
      const t0 = performance.now();
      const lengths = await Promise.all(keysOf('v', VALUES).map((k) => raw.get(k, (b) => b?.length)));
      const took = performance.now() - t0;
      expect(lengths).toEqual(new Array(VALUES).fill(VALUE_BYTES));
      // 2.6 MB at 1 MB/s: the last read waited far longer than the limit, never in silence.
      expect(took).toBeGreaterThan(1_500);
    } finally {
      raw.close();
    }
  });

  it('HGETALL: a bulk read streaming for many times the limit is read whole', async () => {
    const reader = new RawHashReader({ client: slow, timeoutMs: 300 });
    try {
      const t0 = performance.now();
      const got = await reader.read(keysOf('h', HASHES), valueBytes());
      const took = performance.now() - t0;
      expect(got).toEqual(new Array(HASHES).fill(10 * FIELD_BYTES));
      expect(took).toBeGreaterThan(1_500);
    } finally {
      reader.close();
    }
  });

  it("does not take this process's own stall for the node's silence", async () => {
    const raw = new RawValueReader({ client, timeoutMs: 200 });
    const reader = new RawHashReader({ client, timeoutMs: 200 });
    try {
      await raw.get('v:{0}', (b) => b?.length); // connected
      const gets = keysOf('v', VALUES).map((k) => raw.get(k, (b) => b?.length));
      const hashes = reader.read(keysOf('h', HASHES), valueBytes());
      // The replies arrive while this process is busy for 4 × the limit: its timers run first
      // when it wakes, before it reads them.
      await new Promise((resolve) => setImmediate(resolve));
      stall(800);
      expect(await Promise.all(gets)).toEqual(new Array(VALUES).fill(VALUE_BYTES));
      expect(await hashes).toEqual(new Array(HASHES).fill(10 * FIELD_BYTES));
    } finally {
      raw.close();
      reader.close();
    }
  });

  it("does not take the node's silence for want of commands this process has not sent yet", async () => {
    const reader = new RawHashReader({ client, timeoutMs: 200 });
    // 100,000 HGETALLs of 120-byte keys (12 MB of commands): more than the socket takes at once,
    // so the rest leave only as the event loop turns.
    const keys = Array.from({ length: 100_000 }, (_, i) => `absent:{${i}}:${'k'.repeat(100)}`);
    try {
      await reader.read(['absent:{x}'], valueBytes()); // connected
      const parts = reader.readParts(keys, valueBytes(), 1_000);
      await parts[0];
      // Busy for 4 × the limit: the node answers what it was sent, then waits for the rest.
      stall(800);
      const got = (await Promise.all(parts)).flat();
      expect(got).toHaveLength(100_000);
      expect(got.every((n) => n === 0)).toBe(true);
    } finally {
      reader.close();
    }
  });

  it('waits for a node busy for less than the limit, fails on one busy for longer, then reads again', async () => {
    const patient = new RawHashReader({ client, timeoutMs: 1_500 });
    const impatient = new RawHashReader({ client, timeoutMs: 300 });
    const keys = keysOf('h', HASHES);
    try {
      await Promise.all([patient.read(keys, valueBytes()), impatient.read(keys, valueBytes())]); // connected
      // The node sleeps 0.8 s; the read is written 50 ms into it.
      const busy = async (seconds: number) => {
        const done = admin.call('DEBUG', 'SLEEP', String(seconds));
        await new Promise((resolve) => setTimeout(resolve, 50));
        return done;
      };
      let sleeping = busy(0.8);
      await new Promise((resolve) => setTimeout(resolve, 50));
      const t0 = performance.now();
      expect(await patient.read(keys, valueBytes())).toEqual(new Array(HASHES).fill(10 * FIELD_BYTES));
      expect(performance.now() - t0).toBeGreaterThan(600);
      await sleeping;
      sleeping = busy(0.8);
      await new Promise((resolve) => setTimeout(resolve, 50));
      const error = await impatient.read(keys, valueBytes()).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(error).toBeInstanceOf(RawReadTimeoutError);
      expect(error?.message).toMatch(/sent nothing for 300 ms during a read of 200 hash\(es\)/);
      await sleeping;
      // The dropped connection is replaced.
      expect(await impatient.read(keys, valueBytes())).toEqual(new Array(HASHES).fill(10 * FIELD_BYTES));
    } finally {
      patient.close();
      impatient.close();
    }
  });
});
