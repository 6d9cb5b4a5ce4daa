/**
 * `GET` of large string values over raw RESP connections, handed to a synchronous consumer while
 * the bytes are still in the socket's chunk: the cap check reads a user's packed event log (tens of
 * KB) and folds it into a few counts, so the copy ioredis makes of every reply (and its per-command
 * objects and promises) was most of the check's cost (docs/counting.md, "Reads").
 *
 * - One connection per node (shared/redis/resp/connection.ts: TLS and AUTH as the client has them,
 *   one write per event-loop turn, the layer's progress timeout), answered in order.
 * - A reply whole in one TCP chunk is passed as a view of that chunk (no copy); one split across
 *   chunks is gathered by the parser in a buffer reused from reply to reply. Either way the
 *   consumer must not keep the buffer.
 * - A `MOVED` / `ASK` reply (resharding, failover), a key whose slot has no known owner and a client
 *   that is not ready yet go through ioredis, which follows redirects.
 * - A node silent for `timeoutMs` while reads wait fails them with `RawReadTimeoutError`; a lost
 *   connection fails the reads waiting on it; the next read opens a new connection.
 */
import type { RedisClient } from '../connect.js';
import { bulk, type RespRequest } from './connection.js';
import { type RawRedisError, RawReplyError } from './errors.js';
import { bulkOf, errorLineOf } from './folds.js';
import { nodeOfKey } from './ioredis-adapter.js';
import { RespNodes } from './nodes.js';
import { BULK_ARRAY } from './parser.js';
import { timeoutMsOption } from './timeout.js';

/** Options of {@link RawValueReader}. */
export interface RawValueReaderOptions {
  /** The application's client: its options give host, port, TLS and AUTH; its slot table routes keys. */
  readonly client: RedisClient;
  /** Largest split reply gathered in the reused buffer; larger ones get their own. @default 4 MiB */
  readonly maxReusedBytes?: number;
  /**
   * Longest silence of the node while reads wait before they fail with `RawReadTimeoutError`.
   * Far above a healthy read (a cap check's P99 is ~1 ms) and below an ad request's patience for
   * a dead node. @default 1000
   */
  readonly timeoutMs?: number;
}

/** `GET` with a synchronous consumer of the value (`null`: no such key). */
export interface ValueReader {
  get<T>(key: string, consume: (value: Buffer | null) => T): Promise<T>;
  /**
   * `GETRANGE key start end` (inclusive byte offsets) with a synchronous consumer: the bytes
   * there are, empty for no such key.
   */
  getRange<T>(key: string, start: number, end: number, consume: (value: Buffer) => T): Promise<T>;
}

/** The same contract through ioredis (`getBuffer`): the reference the raw reader is tested against. */
export function clientValueReader(client: RedisClient): ValueReader {
  return {
    get: async (key, consume) => consume(await client.getBuffer(key)),
    getRange: async (key, start, end, consume) => consume(await client.getrangeBuffer(key, start, end)),
  };
}

/** Resolves with `consume(value)`; the consumer's error fails this read only. */
function settle<V, T>(
  consume: (value: V) => T,
  value: V,
  resolve: (result: T) => void,
  reject: (error: Error) => void,
): void {
  let result: T;
  try {
    result = consume(value);
  } catch (error) {
    reject(error as Error);
    return;
  }
  resolve(result);
}

/** One `GET` (or `GETRANGE`: `range` set) waiting for its reply. */
class GetRequest implements RespRequest {
  constructor(
    private readonly key: string,
    private readonly range: readonly [number, number] | undefined,
    private readonly consume: (value: Buffer | null) => unknown,
    private readonly resolve: (value: unknown) => void,
    private readonly reject: (error: Error) => void,
    private readonly viaClient: ValueReader,
  ) {}

  reply(buf: Buffer, tokens: Int32Array): boolean {
    const value = bulkOf(buf, tokens);
    if (value === undefined) {
      const line = errorLineOf(buf, tokens);
      if (line !== null && (line.startsWith('MOVED ') || line.startsWith('ASK '))) {
        const again =
          this.range === undefined
            ? this.viaClient.get(this.key, this.consume)
            : this.viaClient.getRange(this.key, this.range[0], this.range[1], this.consume);
        again.then(this.resolve, this.reject);
      } else
        this.reject(
          new RawReplyError(`Redis refused ${this.what()}: ${line ?? 'a reply that is not a string'}`),
        );
      return true;
    }
    settle(this.consume, value, this.resolve, this.reject);
    return true;
  }

  fail(error: RawRedisError): void {
    this.reject(error);
  }

  waiting(): string {
    return `while ${this.what()} waited`;
  }

  private what(): string {
    return this.range === undefined ? `GET ${this.key}` : `GETRANGE ${this.key} ${this.range.join(' ')}`;
  }
}

/** Runs `commands` in one MULTI/EXEC through ioredis (redirects, a client not ready). */
export function atomicViaClient<T>(
  client: RedisClient,
  commands: readonly (readonly string[])[],
  consume: (parts: readonly (Buffer | null)[]) => T,
): Promise<T> {
  const multi = client.multi();
  for (const [name, ...args] of commands) multi.callBuffer(name as string, ...args);
  return multi.exec().then((replies) => {
    const parts = (replies ?? []).map(([error, value]) => {
      if (error) throw error;
      return value as Buffer | null;
    });
    return consume(parts);
  });
}

/** Commands in one MULTI/EXEC whose replies are bulk strings (see {@link RawValueReader.atomic}). */
class AtomicRequest<T> implements RespRequest {
  /** Replies still due before EXEC's (MULTI's OK and one QUEUED per command). */
  private pending: number;
  private refused: string | undefined;

  constructor(
    private readonly commands: readonly (readonly string[])[],
    private readonly consume: (parts: readonly (Buffer | null)[]) => T,
    private readonly resolve: (value: T) => void,
    private readonly reject: (error: Error) => void,
    private readonly client: RedisClient,
  ) {
    this.pending = commands.length + 1;
  }

  reply(buf: Buffer, t: Int32Array): boolean {
    if (this.pending > 0) {
      this.pending--;
      this.refused ??= errorLineOf(buf, t) ?? undefined;
      return false;
    }
    const line = this.refused ?? errorLineOf(buf, t);
    if (line !== null) {
      // A command refused (MOVED or ASK while resharding: the transaction was discarded).
      if (line.startsWith('MOVED ') || line.startsWith('ASK ') || line.startsWith('EXECABORT'))
        atomicViaClient(this.client, this.commands, this.consume).then(this.resolve, this.reject);
      else this.reject(new RawReplyError(`Redis refused ${this.what()}: ${line}`));
      return true;
    }
    if (t[0] !== BULK_ARRAY || t[1] !== this.commands.length) {
      this.reject(
        new RawReplyError(
          `Redis answered ${this.what()} with a reply that is not ${this.commands.length} strings`,
        ),
      );
      return true;
    }
    const parts: (Buffer | null)[] = new Array(this.commands.length);
    for (let i = 0; i < parts.length; i++) {
      const start = t[3 * i + 4] as number;
      parts[i] = start < 0 ? null : buf.subarray(start, t[3 * i + 5] as number);
    }
    settle(this.consume, parts, this.resolve, this.reject);
    return true;
  }

  fail(error: RawRedisError): void {
    this.reject(error);
  }

  waiting(): string {
    return `while ${this.what()} waited`;
  }

  private what(): string {
    return `MULTI ${this.commands.map((c) => c.join(' ')).join('; ')} EXEC`;
  }
}

/** One reader per client for {@link RawValueReader.of}. */
const sharedReaders = new WeakMap<RedisClient, RawValueReader>();

/** Raw `GET` with a synchronous consumer (see the module comment). */
export class RawValueReader implements ValueReader {
  /** The reader shared by everything that reads through `client` (one socket per node). */
  static of(client: RedisClient): RawValueReader {
    let reader = sharedReaders.get(client);
    if (reader === undefined) {
      reader = new RawValueReader({ client });
      sharedReaders.set(client, reader);
    }
    return reader;
  }

  private readonly nodes: RespNodes;
  private readonly client: RedisClient;
  /** Redirects, unknown slots, a client not ready yet, a closed reader: read through ioredis. */
  private readonly viaClient: ValueReader;

  constructor(options: RawValueReaderOptions) {
    this.client = options.client;
    this.viaClient = clientValueReader(this.client);
    this.nodes = new RespNodes(this.client, {
      timeoutMs: timeoutMsOption('RawValueReader', options.timeoutMs),
      ...(options.maxReusedBytes === undefined ? {} : { maxReusedBytes: options.maxReusedBytes }),
    });
  }

  /**
   * Reads `key` and returns `consume(value)` (`null`: no such key). `consume` runs synchronously
   * with a buffer that is valid only during the call: copy what must outlive it. Its error
   * fails this read only.
   */
  get<T>(key: string, consume: (value: Buffer | null) => T): Promise<T> {
    // Not async: each promise layer on this path was garbage per cap check. A failure to route
    // or connect is still a rejection, never a synchronous throw.
    try {
      const node = this.nodes.isClosed ? undefined : nodeOfKey(this.client, key);
      if (node === undefined) return this.viaClient.get(key, consume);
      const connection = this.nodes.connection(node);
      return new Promise<T>((resolve, reject) => {
        connection.push(
          new GetRequest(key, undefined, consume, resolve as (v: unknown) => void, reject, this.viaClient),
          `*2\r\n$3\r\nGET\r\n$${Buffer.byteLength(key)}\r\n${key}\r\n`,
        );
      });
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * `GETRANGE key start end` as {@link get} reads a value: `consume` gets a view valid only
   * during the call (empty for no such key).
   */
  getRange<T>(key: string, start: number, end: number, consume: (value: Buffer) => T): Promise<T> {
    try {
      const node = this.nodes.isClosed ? undefined : nodeOfKey(this.client, key);
      if (node === undefined) return this.viaClient.getRange(key, start, end, consume);
      const connection = this.nodes.connection(node);
      const read = consume as (value: Buffer | null) => T;
      return new Promise<T>((resolve, reject) => {
        connection.push(
          new GetRequest(key, [start, end], read, resolve as (v: unknown) => void, reject, this.viaClient),
          `*4\r\n$8\r\nGETRANGE\r\n${bulk(key)}${bulk(String(start))}${bulk(String(end))}`,
        );
      });
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Runs `commands` (each a bulk-string reply, keys in one hash slot) in one MULTI/EXEC — a
   * consistent snapshot — and returns `consume(replies)`, called synchronously with views valid
   * only during the call (`null`: a nil), as {@link get}'s.
   */
  atomic<T>(
    commands: readonly (readonly string[])[],
    consume: (parts: readonly (Buffer | null)[]) => T,
  ): Promise<T> {
    try {
      const key = (commands[0] as readonly string[])[1] as string;
      const node = this.nodes.isClosed ? undefined : nodeOfKey(this.client, key);
      if (node === undefined) return atomicViaClient(this.client, commands, consume);
      const connection = this.nodes.connection(node);
      const resp = ['*1\r\n$5\r\nMULTI\r\n'];
      for (const c of commands) {
        let text = `*${c.length}\r\n`;
        for (const part of c) text += bulk(part);
        resp.push(text);
      }
      resp.push('*1\r\n$4\r\nEXEC\r\n');
      return new Promise<T>((resolve, reject) => {
        connection.push(
          new AtomicRequest(commands, consume, resolve, reject, this.client),
          resp[0] as string,
          resp.slice(1),
        );
      });
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Closes the raw sockets (reads after this go through the client). */
  close(): void {
    this.nodes.close();
  }
}
