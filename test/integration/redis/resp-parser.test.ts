/**
 * The raw layer's one RESP parser (shared/redis/resp/parser.ts) and its folds, fed the bytes a real
 * redis-server sends: every reply type (status, error, integer, bulk, nil, array, nil array, nested
 * arrays with nils and errors inside, big bulk strings alone and inside arrays), split at every
 * byte boundary, a byte at a time and in reads of assorted sizes, must parse to what the same bytes
 * give in one piece — and that must be what ioredis makes of the same commands. Bytes that are not
 * RESP stop the parser with a message. End to end, the readers and the script caller over a
 * 3-node cluster return what ioredis returns for values around the read buffer's size.
 */
import net from 'node:net';
import type { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningRedis, startRedis } from '../../../local/emulators/redis.js';
import { connectRedis, parseNodes, type RedisClient } from '../../../shared/redis/connect.js';
import { bulk } from '../../../shared/redis/resp/connection.js';
import { errorLineOf, foldHash, type HashVisitor, replyValue } from '../../../shared/redis/resp/folds.js';
import { RawHashReader } from '../../../shared/redis/resp/hash-reader.js';
import { RespParser } from '../../../shared/redis/resp/parser.js';
import { RawScriptCaller, rawScript } from '../../../shared/redis/resp/script-caller.js';
import { RawValueReader } from '../../../shared/redis/resp/value-reader.js';
import { useRedis } from '../../support/redis.js';

/** A reply as the tests compare it: its value, or `{ error }` for an error reply. */
type Parsed = unknown;

/** Feeds `chunks` to a fresh parser; every reply as {@link Parsed}. */
function parseChunks(chunks: readonly Buffer[], maxReusedBytes?: number): Parsed[] {
  const out: Parsed[] = [];
  const parser = new RespParser({
    reply: (buf, t) => {
      const line = errorLineOf(buf, t);
      out.push(line === null ? replyValue(buf, t) : { error: line });
    },
    invalid: (what) => out.push({ invalid: what }),
    ...(maxReusedBytes === undefined ? {} : { maxReusedBytes }),
  });
  for (const c of chunks) parser.feed(Buffer.from(c)); // a copy: the parser may not keep it
  return out;
}

/** `bytes` cut into pieces of `size` (the last shorter). */
function pieces(bytes: Buffer, size: number): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += size) out.push(bytes.subarray(i, i + size));
  return out;
}

/** The RESP of a command. */
const command = (...args: string[]) => `*${args.length}\r\n${args.map(bulk).join('')}`;

/** The exact bytes redis-server answers `commands` with (read until an ECHO marker after them). */
async function replyBytes(port: number, commands: readonly string[][]): Promise<Buffer> {
  const marker = `end-${Math.random()}`;
  const tail = Buffer.from(`$${marker.length}\r\n${marker}\r\n`);
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const got: Buffer[] = [];
    let length = 0;
    socket.on('data', (chunk: Buffer) => {
      got.push(chunk);
      length += chunk.length;
      const all = Buffer.concat(got, length);
      if (all.length >= tail.length && all.subarray(all.length - tail.length).equals(tail)) {
        socket.destroy();
        resolve(all.subarray(0, all.length - tail.length));
      }
    });
    socket.on('error', reject);
    socket.write(commands.map((c) => command(...c)).join('') + command('ECHO', marker));
  });
}

let server: RunningRedis;
let client: RedisClient;
let port: number;

const BIG = 3 * 1024 * 1024 + 17;
const NESTED = "return {1, {2, {'a', false, {}}}, {}, redis.error_reply('E inner'), 'é'}";

/** Commands answered with every reply type. */
const SMALL: string[][] = [
  ['SET', 's', 'hello'],
  ['GET', 's'],
  ['GET', 'missing'],
  ['GET', 'empty'],
  ['SET', 'n', '0'],
  ['INCRBY', 'n', '-42'],
  ['HGETALL', 'h'],
  ['HGETALL', 'missing'],
  ['HMGET', 'h', 'f1', 'nope', 'f2'],
  ['EVAL', NESTED, '0'],
  ['EVAL', "return redis.status_reply('FINE')", '0'],
  ['GET', 'h'], // WRONGTYPE: an error reply
  ['BLPOP', 'missing-list', '0.01'], // a nil array
  ['EVAL', "return {1, 'x'", '0'], // a Lua syntax error
];

beforeAll(async () => {
  server = await startRedis({ mode: 'standalone' });
  port = Number(server.nodes[0]?.split(':')[1]);
  client = connectRedis({ mode: 'standalone', nodes: parseNodes(server.nodes.join(',')), tls: false });
  await client.set('empty', '');
  await client.set('big', 'b'.repeat(BIG));
  await client.hset('h', 'f1', 'v1', 'f2', '', 'f3', 'ü'.repeat(100));
  await client.hset('hb', 'big', 'x'.repeat(BIG), 'small', 's');
}, 60_000);

afterAll(async () => {
  client?.disconnect();
  await server?.stop();
});

describe('the RESP parser on real reply bytes', () => {
  it('parses every reply type to what ioredis makes of the same commands', async () => {
    const bytes = await replyBytes(port, SMALL);
    const whole = parseChunks([bytes]);
    expect(whole).toHaveLength(SMALL.length);
    // What ioredis answers, error replies as their message.
    const reference: unknown[] = [];
    for (const c of SMALL) {
      reference.push(
        await client.call(c[0] as string, ...c.slice(1)).catch((e: Error) => ({ error: e.message })),
      );
    }
    // ioredis turns an error inside an array into an Error object; the parser keeps its line.
    const nested = reference[9] as unknown[];
    nested[3] = (nested[3] as Error).message;
    expect(whole).toEqual(reference);
    expect(whole[9]).toEqual([1, [2, ['a', null, []]], [], 'E inner', 'é']);
    expect(whole[12]).toBeNull();
    expect(whole[11]).toEqual({ error: expect.stringMatching(/^WRONGTYPE/) });
  });

  it('gives the same replies whatever byte boundary the reads split them at', async () => {
    const bytes = await replyBytes(port, SMALL);
    const whole = parseChunks([bytes]);
    for (let i = 1; i < bytes.length; i++) {
      const split = parseChunks([bytes.subarray(0, i), bytes.subarray(i)]);
      if (JSON.stringify(split) !== JSON.stringify(whole))
        expect({ splitAt: i, split }).toEqual({ splitAt: i, split: whole });
    }
    expect(parseChunks(pieces(bytes, 1))).toEqual(whole);
    for (const size of [2, 3, 5, 7, 13, 64]) expect(parseChunks(pieces(bytes, size))).toEqual(whole);
  });

  it('gathers big bulk strings, alone and inside arrays, from reads of any size', async () => {
    const bytes = await replyBytes(port, [
      ['GET', 'big'],
      ['GET', 's'],
      ['HMGET', 'hb', 'small', 'big', 'nope'],
      ['GET', 'big'],
    ]);
    const expected = ['b'.repeat(BIG), 'hello', ['s', 'x'.repeat(BIG), null], 'b'.repeat(BIG)];
    // Headers a byte at a time too: the first reads of each size are single bytes.
    const head = (size: number) => [...pieces(bytes.subarray(0, 24), 1), ...pieces(bytes.subarray(24), size)];
    for (const size of [997, 4096, 65_536, 262_151, bytes.length]) {
      expect(parseChunks(pieces(bytes, size))).toEqual(expected);
      expect(parseChunks(head(size))).toEqual(expected);
      // Beyond the reused buffer's size: a buffer of their own, and the reused one after them.
      expect(parseChunks(pieces(bytes, size), 1024)).toEqual(expected);
    }
  });

  it('folds a hash from byte ranges, and says a reply that is not one is not', async () => {
    const bytes = await replyBytes(port, [
      ['HGETALL', 'h'],
      ['HGETALL', 'missing'],
      ['GET', 's'],
    ]);
    const visitor: HashVisitor<Record<string, string> | null> = {
      fields: {} as Record<string, string>,
      exists: false,
      begin(exists: boolean) {
        this.exists = exists;
        this.fields = {};
      },
      field(buf: Buffer, fs: number, fe: number, vs: number, ve: number) {
        this.fields[buf.toString('utf8', fs, fe)] = buf.toString('utf8', vs, ve);
      },
      end() {
        return this.exists ? this.fields : null;
      },
      fromObject: () => null,
    } as HashVisitor<Record<string, string> | null> & { fields: Record<string, string>; exists: boolean };
    const folded: unknown[] = [];
    for (const size of [1, 3, bytes.length]) {
      folded.length = 0;
      const parser = new RespParser({
        reply: (buf, t, count) => {
          const v = foldHash(buf, t, count, visitor, 0);
          folded.push(typeof v === 'symbol' ? 'not a hash' : v);
        },
        invalid: (what) => folded.push(what),
      });
      for (const p of pieces(bytes, size)) parser.feed(p);
      expect(folded).toEqual([await client.hgetall('h'), null, 'not a hash']);
    }
  });

  it('stops at bytes that are not RESP, saying what they were', () => {
    expect(parseChunks([Buffer.from('+OK\r\n?what\r\n:1\r\n')])).toEqual([
      'OK',
      { invalid: "an unexpected reply type '?' (byte 63)" },
    ]);
    expect(parseChunks([Buffer.from('$abc\r\n')])).toEqual([{ invalid: 'a bulk length of abc' }]);
    expect(parseChunks([Buffer.from('*2\r\n:1\r\n'), Buffer.from('*x\r\n')])).toEqual([
      { invalid: 'an array length of x' },
    ]);
  });
});

describe('the raw readers and script caller across a 3-node cluster', () => {
  const r = useRedis('cluster');

  it('return what ioredis returns for values around the read buffer and carry sizes', async () => {
    const cluster = r.redis as Cluster;
    const sizes = [0, 1, 4095, 4096, 65_535, 65_536, 262_143, 262_144, 262_145, 600_000, 5_000_000];
    for (const [i, n] of sizes.entries()) {
      await cluster.set(`p:{${i}}`, 'v'.repeat(n));
      await cluster.hset(`ph:{${i}}`, 'a', 'w'.repeat(n), 'b', String(n));
    }
    const values = new RawValueReader({ client: cluster });
    const hashes = new RawHashReader({ client: cluster });
    const scripts = new RawScriptCaller(cluster);
    const echo = rawScript('echo', "return {redis.call('GET', KEYS[1]), #redis.call('GET', KEYS[1])}", 1);
    try {
      const read = await Promise.all(sizes.map((_, i) => values.get(`p:{${i}}`, (b) => b?.toString())));
      expect(read).toEqual(await Promise.all(sizes.map((_, i) => cluster.get(`p:{${i}}`))));
      const folded = await hashes.read(
        sizes.map((_, i) => `ph:{${i}}`),
        {
          n: 0,
          begin() {
            this.n = 0;
          },
          field(_b: Buffer, _fs: number, _fe: number, vs: number, ve: number) {
            this.n += ve - vs;
          },
          end() {
            return this.n;
          },
          fromObject: () => -1,
        } as HashVisitor<number> & { n: number },
      );
      expect(folded).toEqual(sizes.map((n) => n + String(n).length));
      const called = await Promise.all(sizes.map((_, i) => scripts.call(echo, [`p:{${i}}`], [])));
      expect(called).toEqual(sizes.map((n) => ['v'.repeat(n), n]));
    } finally {
      values.close();
      hashes.close();
      scripts.close();
    }
  }, 60_000);
});
