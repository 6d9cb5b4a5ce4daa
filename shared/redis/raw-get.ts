/**
 * `GET` of large string values over raw RESP connections, handed to a synchronous consumer while
 * the bytes are still in the socket's chunk: the cap check reads a user's packed event log (tens of
 * KB) and folds it into a few counts, so the copy ioredis makes of every reply (and its per-command
 * objects and promises) was most of the check's cost (docs/counting.md, "Reads").
 *
 * - One socket per Redis node, opened lazily with the client's TLS and AUTH settings
 *   (shared/redis/raw-connection.ts); requests are written in batches (one write per event-loop
 *   turn) and answered in order.
 * - A reply that sits whole in one TCP chunk is passed as a view of that chunk (no copy); one split
 *   across chunks is gathered in a per-connection buffer reused from reply to reply (replies larger
 *   than `maxReusedBytes` get their own). Either way the consumer must not keep the buffer.
 * - Cluster routing uses the client's slot table. A `MOVED` / `ASK` reply (resharding, failover)
 *   and a key whose slot has no known owner are re-read through ioredis, which follows redirects.
 *   Until the client itself is ready (first connect; with IAM auth, the first token) reads go
 *   through ioredis too.
 * - A node that sends nothing for `timeoutMs` while reads wait (a paused, hung or overloaded node)
 *   fails them with {@link RawReadTimeoutError}, and the connection is dropped (replies that come
 *   later could no longer be matched to reads); the next read opens a new one. The limit is on
 *   silence, not on a read's age: a long queue answered steadily never times out, and this
 *   process's own stalls do not count ({@link SilenceWatchdog}).
 *   Without it a node that stopped answering held every cap check, and the ad requests waiting on
 *   them, for as long as the TCP connection lived.
 * - A lost connection fails the reads waiting on it; the next read opens a new one. A socket is
 *   referenced only while reads wait on it, so an idle reader never keeps a process alive; the
 *   reader closes when the client ends.
 */

import { Cluster } from 'ioredis';
import { PacelineError } from '../errors.js';
import { type RedisClient, slotOf } from './connect.js';
import {
  bulk,
  openRequestConnection,
  type RawConnection,
  RawReadTimeoutError,
  type RequestQueue,
  readTimedOut,
  readTimeoutMs,
  SilenceWatchdog,
  standaloneNode,
} from './raw-connection.js';
import { parseIntBytes } from './raw-hgetall.js';

export { RawReadTimeoutError };

/** A reply-level error of a raw read (the node's error line, e.g. `WRONGTYPE …`). */
export class RawReplyError extends PacelineError {
  override readonly name = 'RawReplyError';
  override readonly code = 'redis.reply';
}

/** Options of {@link RawValueReader}. */
export interface RawValueReaderOptions {
  /** The application's client: its options give host, port, TLS and AUTH; its slot table routes keys. */
  readonly client: RedisClient;
  /** Largest split reply gathered in the reused buffer; larger ones get their own. @default 4 MiB */
  readonly maxReusedBytes?: number;
  /**
   * Longest silence of the node while reads wait before they (every read waiting on the
   * connection) fail with {@link RawReadTimeoutError}. Far above a healthy read (a cap check's P99
   * is ~1 ms) and below an ad request's budget of patience for a dead node. Checked every
   * `timeoutMs / 4`. @default 1000
   */
  readonly timeoutMs?: number;
}

interface Pending {
  consume: (value: Buffer | null) => unknown;
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
  /** The key, for the ioredis retry of a redirected read. */
  key: string;
}

/** Per-node state: the connection, the reads waiting for replies, and the reply being parsed. */
class NodeReader {
  readonly connection: RawConnection;
  private readonly queue: RequestQueue<Pending>;
  /** Partial reply header carried over to the next chunk. */
  private partialHeader: Buffer | null = null;
  /** The split bulk reply being gathered: its length, bytes still to come (incl. CRLF), target. */
  private bulkLength = -1;
  private bulkRemaining = 0;
  private bulkFilled = 0;
  private bulkTarget: Buffer = Buffer.alloc(0);
  private reused: Buffer = Buffer.alloc(0);
  /** The connection's progress timeout (one timer per connection, unreferenced). */
  private readonly watchdog: SilenceWatchdog;

  constructor(
    client: RedisClient,
    node: string,
    private readonly maxReusedBytes: number,
    private readonly timeoutMs: number,
    /** Where a redirected (`MOVED` / `ASK`) read is retried: through ioredis. */
    private readonly redirect: ValueReader,
  ) {
    // The connection reuses one read buffer: the parser copies what it keeps (a split header, a
    // split reply) and hands the consumer a view only during its synchronous call.
    ({ connection: this.connection, queue: this.queue } = openRequestConnection<Pending>(client, node, {
      onData: (chunk) => this.onData(chunk),
      fail: (error) => this.failAll(error),
      closed: (waiting) => `Redis connection to ${node} closed with ${waiting} read(s) waiting`,
    }));
    // A timer per connection rather than per read: the read path only stamps times.
    this.watchdog = new SilenceWatchdog(timeoutMs, () => this.timedOut(), this.connection.socket);
  }

  private timedOut(): void {
    const oldest = this.queue.oldest();
    const error = readTimedOut(
      `Redis at ${this.connection.node} sent nothing for ${this.timeoutMs} ms while GET ${oldest?.key ?? '?'} ` +
        `waited (${this.pendingCount()} read(s) waiting)`,
    );
    this.connection.broken = true;
    this.connection.socket.destroy();
    this.failAll(error);
  }

  pendingCount(): number {
    return this.queue.count;
  }

  /** Reads `key`; a redirected read is retried through the client (settling this promise). */
  get<T>(key: string, consume: (value: Buffer | null) => T): Promise<T> {
    return new Promise((resolve, reject) => {
      this.watchdog.expect();
      this.queue.push(
        { key, consume, resolve: resolve as (v: unknown) => void, reject },
        `*2\r\n$3\r\nGET\r\n${bulk(key)}`,
      );
    });
  }

  /** Hands a value to the next waiting read; its consumer's error fails that read only. */
  private deliver(value: Buffer | null): void {
    const p = this.queue.next();
    let result: unknown;
    try {
      result = p.consume(value);
    } catch (error) {
      p.reject(error as Error);
      return;
    }
    p.resolve(result);
  }

  private onData(input: Buffer): void {
    this.watchdog.heard();
    this.parse(input);
    if (this.pendingCount() === 0) this.watchdog.idle();
  }

  private parse(input: Buffer): void {
    let chunk = input;
    let pos = 0;
    if (this.partialHeader) {
      chunk = Buffer.concat([this.partialHeader, input]);
      this.partialHeader = null;
    }
    while (pos < chunk.length) {
      if (this.bulkLength >= 0) {
        // Gathering a split bulk reply.
        const take = Math.min(this.bulkRemaining, chunk.length - pos);
        const data = Math.min(take, this.bulkLength - this.bulkFilled);
        if (data > 0) {
          chunk.copy(this.bulkTarget, this.bulkFilled, pos, pos + data);
          this.bulkFilled += data;
        }
        pos += take;
        this.bulkRemaining -= take;
        if (this.bulkRemaining > 0) return;
        const length = this.bulkLength;
        this.bulkLength = -1;
        this.deliver(this.bulkTarget.subarray(0, length));
        continue;
      }
      if (this.pendingCount() === 0) {
        this.protocolError(`a reply nobody waits for (byte ${chunk[pos]})`);
        return;
      }
      const cr = chunk.indexOf(0x0d, pos);
      if (cr < 0 || cr + 1 >= chunk.length) {
        this.partialHeader = Buffer.from(chunk.subarray(pos));
        return;
      }
      const type = chunk[pos];
      if (type === 0x24 /* $ */) {
        const length = parseIntBytes(chunk, pos + 1, cr);
        const start = cr + 2;
        if (length < 0) {
          pos = start;
          this.deliver(null);
          continue;
        }
        if (!Number.isSafeInteger(length)) {
          this.protocolError(`a bulk length of ${chunk.toString('latin1', pos + 1, cr)}`);
          return;
        }
        if (start + length + 2 <= chunk.length) {
          pos = start + length + 2;
          this.deliver(chunk.subarray(start, start + length));
          continue;
        }
        if (length <= this.maxReusedBytes) {
          if (this.reused.length < length)
            this.reused = Buffer.allocUnsafe(Math.min(this.maxReusedBytes, length * 2));
          this.bulkTarget = this.reused;
        } else this.bulkTarget = Buffer.allocUnsafe(length);
        this.bulkLength = length;
        this.bulkRemaining = length + 2;
        this.bulkFilled = 0;
        pos = start;
        continue;
      }
      if (type === 0x2d /* - */) {
        const line = chunk.toString('latin1', pos + 1, cr);
        pos = cr + 2;
        const p = this.queue.next();
        if (line.startsWith('MOVED ') || line.startsWith('ASK ')) {
          this.redirect.get(p.key, p.consume).then(p.resolve, p.reject);
        } else p.reject(new RawReplyError(`Redis refused GET ${p.key}: ${line}`));
        continue;
      }
      this.protocolError(`an unexpected reply type '${String.fromCharCode(type as number)}'`);
      return;
    }
  }

  private protocolError(what: string): void {
    const error = new Error(`Raw GET from ${this.connection.node}: ${what}; the connection is dropped`);
    this.connection.broken = true;
    this.connection.socket.destroy();
    this.failAll(error);
  }

  private failAll(error: Error): void {
    // A broken connection is replaced by a new reader: this one's watchdog has nothing left to do.
    this.watchdog.close();
    this.connection.broken = true;
    this.queue.failAll((p) => p.reject(error));
  }

  close(): void {
    this.watchdog.close();
    this.connection.broken = true;
    this.connection.socket.destroy();
  }
}

/** `GET` with a synchronous consumer of the value (`null`: no such key). */
export interface ValueReader {
  get<T>(key: string, consume: (value: Buffer | null) => T): Promise<T>;
}

/** The same contract through ioredis (`getBuffer`): the reference the raw reader is tested against. */
export function clientValueReader(client: RedisClient): ValueReader {
  return { get: async (key, consume) => consume(await client.getBuffer(key)) };
}

/** One reader per client for {@link RawValueReader.of}. */
const sharedReaders = new WeakMap<RedisClient, RawValueReader>();

/** Raw `GET` with a synchronous consumer (see the module comment). */
export class RawValueReader implements ValueReader {
  /**
   * The reader shared by everything that reads through `client` (one socket per node and one
   * `end` listener per client, however many stores are built on it).
   */
  static of(client: RedisClient): RawValueReader {
    let reader = sharedReaders.get(client);
    if (reader === undefined) {
      reader = new RawValueReader({ client });
      sharedReaders.set(client, reader);
    }
    return reader;
  }

  private readonly nodes = new Map<string, NodeReader>();
  private readonly client: RedisClient;
  private readonly maxReusedBytes: number;
  private readonly timeoutMs: number;
  private closed = false;
  /** Redirects, unknown slots, a client not ready yet, a closed reader: read through ioredis. */
  private readonly viaClient: ValueReader;

  constructor(options: RawValueReaderOptions) {
    this.client = options.client;
    this.maxReusedBytes = options.maxReusedBytes ?? 4 * 1024 * 1024;
    this.timeoutMs = readTimeoutMs('RawValueReader', options.timeoutMs);
    this.viaClient = clientValueReader(this.client);
    this.client.once('end', () => this.close());
  }

  /**
   * Reads `key` and returns `consume(value)` (`null`: no such key). `consume` runs synchronously
   * with a buffer that is valid only during the call: copy what must outlive it. Its error
   * fails this read only.
   */
  get<T>(key: string, consume: (value: Buffer | null) => T): Promise<T> {
    // Not async, and the redirect is retried by the node reader: each promise layer on this path
    // was garbage per cap check, and garbage sets how often the request path pauses for GC. A
    // failure to route or connect is still a rejection, never a synchronous throw.
    try {
      const client = this.client;
      if (this.closed || client.status !== 'ready') return this.viaClient.get(key, consume);
      let node: string;
      if (client instanceof Cluster) {
        const owner = client.slots[slotOf(key)]?.[0];
        if (owner === undefined) return this.viaClient.get(key, consume);
        node = owner;
      } else node = standaloneNode(client);
      let reader = this.nodes.get(node);
      if (reader === undefined || reader.connection.broken) {
        reader = new NodeReader(client, node, this.maxReusedBytes, this.timeoutMs, this.viaClient);
        this.nodes.set(node, reader);
      }
      return reader.get(key, consume);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Closes the raw sockets (reads after this go through the client). */
  close(): void {
    this.closed = true;
    for (const reader of this.nodes.values()) reader.close();
    this.nodes.clear();
  }
}
