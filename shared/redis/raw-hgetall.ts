/**
 * Bulk HGETALL over raw RESP connections, for readers that fold each hash into a few numbers
 * (the pacer reads 100k+ live-spend hashes per tick). ioredis builds a JavaScript string for every
 * field and value and an object per reply — ~40k HGETALL/s from one process here; walking the
 * reply bytes once and handing field/value byte ranges to a visitor is several times faster.
 *
 * - One socket per Redis node (TLS and AUTH as the client has them: shared/redis/raw-connection.ts),
 *   opened lazily and reused across reads.
 *   Cluster routing uses the ioredis client's slot table; a key whose reply is an error (MOVED /
 *   ASK during a resharding, a wrong type) is re-read through ioredis, which follows redirects.
 * - Replies are parsed only when complete (a reply split across TCP chunks waits for the rest).
 * - A read that fails (connection lost) rejects; the next read reconnects.
 */
import { Cluster } from 'ioredis';
import { type RedisClient, slotOf, slotsReady } from './connect.js';
import { openRawConnection, type RawConnection, standaloneNode } from './raw-connection.js';

/** Receives one hash's fields as byte ranges of `buf` (valid only during the call). */
export interface HashVisitor<T> {
  /** A new hash begins (`exists` false for a missing key: HGETALL's empty reply). */
  begin(exists: boolean): void;
  field(buf: Buffer, fieldStart: number, fieldEnd: number, valueStart: number, valueEnd: number): void;
  /** The hash is complete: the folded result. */
  end(): T;
  /** A hash read through ioredis instead (fallback after an error reply). */
  fromObject(hash: Readonly<Record<string, string>>): T;
}

const CRLF = 0x0d;

/** Parses a decimal integer (optionally negative) from `buf[start, end)`; NaN when not one. */
export function parseIntBytes(buf: Buffer, start: number, end: number): number {
  let i = start;
  let negative = false;
  if (buf[i] === 0x2d) {
    negative = true;
    i++;
  }
  if (i >= end) return Number.NaN;
  let n = 0;
  for (; i < end; i++) {
    const d = (buf[i] as number) - 0x30;
    if (d < 0 || d > 9) return Number.NaN;
    n = n * 10 + d;
  }
  return negative ? -n : n;
}

/** Reads `<int>\r\n` at `pos`; returns [value, position after CRLF] or undefined when incomplete. */
function readLine(buf: Buffer, pos: number): [number, number] | undefined {
  const cr = buf.indexOf(CRLF, pos);
  if (cr < 0 || cr + 1 >= buf.length) return undefined;
  return [parseIntBytes(buf, pos, cr), cr + 2];
}

/**
 * Parses one reply at `pos`, feeding the visitor. Returns the position after it, `-1` when the
 * buffer does not hold the whole reply yet (nothing is fed), or `-2 - end` for an error reply
 * (`-...` line or a non-array).
 */
function parseReply<T>(buf: Buffer, pos: number, visitor: HashVisitor<T>, out: { value?: T }): number {
  if (pos >= buf.length) return -1;
  const type = buf[pos];
  if (type !== 0x2a /* * */) {
    const cr = buf.indexOf(CRLF, pos);
    if (cr < 0 || cr + 1 >= buf.length) return -1;
    return -2 - (cr + 2);
  }
  const head = readLine(buf, pos + 1);
  if (!head) return -1;
  const [count, afterHead] = head;
  // First make sure the whole reply is here, so the visitor sees each hash once, whole.
  const ranges: number[] = [];
  let p = afterHead;
  for (let i = 0; i < count; i++) {
    if (p >= buf.length || buf[p] !== 0x24 /* $ */) return p >= buf.length ? -1 : -2 - p;
    const len = readLine(buf, p + 1);
    if (!len) return -1;
    const [n, start] = len;
    if (start + n + 2 > buf.length) return -1;
    ranges.push(start, start + n);
    p = start + n + 2;
  }
  visitor.begin(count > 0);
  for (let i = 0; i + 3 < ranges.length; i += 4) {
    visitor.field(
      buf,
      ranges[i] as number,
      ranges[i + 1] as number,
      ranges[i + 2] as number,
      ranges[i + 3] as number,
    );
  }
  out.value = visitor.end();
  return p;
}

interface Connection extends RawConnection {
  /** Serialises reads on this connection (replies come back in order). */
  queue: Promise<unknown>;
}

/** Options of {@link RawHashReader}. */
export interface RawHashReaderOptions {
  /** The application's client: its options give host, port and TLS; its slot table routes keys. */
  readonly client: RedisClient;
  /** Commands written per socket write. @default 2_000 */
  readonly chunk?: number;
}

/** Bulk HGETALL with per-hash folding (see the module comment). */
export class RawHashReader {
  private readonly connections = new Map<string, Connection>();
  private readonly chunk: number;

  constructor(private readonly options: RawHashReaderOptions) {
    this.chunk = options.chunk ?? 2_000;
  }

  /** Reads every key, folding each hash with the visitor; results in key order. */
  async read<T>(keys: readonly string[], visitor: HashVisitor<T>): Promise<T[]> {
    const out: T[] = new Array(keys.length);
    const groups = new Map<string, number[]>();
    const client = this.options.client;
    await slotsReady(client);
    if (client instanceof Cluster) {
      for (let i = 0; i < keys.length; i++) {
        const node = client.slots[slotOf(keys[i] as string)]?.[0] ?? 'unknown';
        const g = groups.get(node);
        if (g) g.push(i);
        else groups.set(node, [i]);
      }
    } else {
      groups.set(
        standaloneNode(client),
        keys.map((_, i) => i),
      );
    }
    const retry: number[] = [];
    await Promise.all(
      [...groups].map(([node, indexes]) =>
        node === 'unknown'
          ? Promise.resolve(retry.push(...indexes))
          : this.readFromNode(node, keys, indexes, visitor, out, retry),
      ),
    );
    // Error replies (a moved slot, a wrong type) and unknown slots: through ioredis.
    for (const i of retry) {
      const hash = await client.hgetall(keys[i] as string);
      out[i] = visitor.fromObject(hash);
    }
    return out;
  }

  private connection(node: string): Connection {
    const existing = this.connections.get(node);
    if (existing && !existing.broken) return existing;
    // TLS and AUTH (the IAM token, under ElastiCache IAM auth) as the application's client has them.
    const c: Connection = Object.assign(openRawConnection(this.options.client, node), {
      queue: Promise.resolve() as Promise<unknown>,
    });
    this.connections.set(node, c);
    return c;
  }

  private readFromNode<T>(
    node: string,
    keys: readonly string[],
    indexes: readonly number[],
    visitor: HashVisitor<T>,
    out: T[],
    retry: number[],
  ): Promise<void> {
    const c = this.connection(node);
    const run = c.queue.then(async () => {
      await c.ready;
      await new Promise<void>((resolve, reject) => {
        let pending: Buffer = Buffer.alloc(0);
        let next = 0;
        const result: { value?: T } = {};
        const onData = (chunk: Buffer) => {
          const buf = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
          let pos = 0;
          while (next < indexes.length) {
            const end = parseReply(buf, pos, visitor, result);
            if (end === -1) break;
            const i = indexes[next++] as number;
            if (end < -1) {
              retry.push(i);
              pos = -2 - end;
            } else {
              out[i] = result.value as T;
              pos = end;
            }
          }
          pending = pos < buf.length ? buf.subarray(pos) : Buffer.alloc(0);
          if (next === indexes.length) finish();
        };
        const onError = (error: Error) => {
          cleanup();
          reject(error);
        };
        const onClose = () => onError(new Error(`Redis connection to ${node} closed during a bulk read`));
        const cleanup = () => {
          c.socket.off('data', onData);
          c.socket.off('error', onError);
          c.socket.off('close', onClose);
        };
        const finish = () => {
          cleanup();
          resolve();
        };
        c.socket.on('data', onData);
        c.socket.once('error', onError);
        c.socket.once('close', onClose);
        if (indexes.length === 0) return finish();
        for (let from = 0; from < indexes.length; from += this.chunk) {
          const parts: string[] = [];
          for (let j = from; j < Math.min(indexes.length, from + this.chunk); j++) {
            const key = keys[indexes[j] as number] as string;
            parts.push(`*2\r\n$7\r\nHGETALL\r\n$${Buffer.byteLength(key)}\r\n${key}\r\n`);
          }
          c.socket.write(parts.join(''));
        }
      });
    });
    c.queue = run.catch(() => {});
    return run;
  }

  /** Closes the sockets. */
  close(): void {
    for (const c of this.connections.values()) c.socket.destroy();
    this.connections.clear();
  }
}
