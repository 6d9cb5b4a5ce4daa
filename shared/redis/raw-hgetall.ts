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
 * - A read during which the node sends nothing for `timeoutMs` (paused, hung, overloaded) rejects
 *   with {@link RawReadTimeoutError} and drops the connection: without it a hung node held the
 *   pacer's tick (and the ad servers' refresh-ahead) for as long as TCP kept the connection. The
 *   limit is on silence, not on the read's duration, and this process's own stalls do not count
 *   ({@link SilenceWatchdog}).
 */
import { Cluster } from 'ioredis';
import { type RedisClient, slotOf, slotsReady } from './connect.js';
import {
  bulk,
  openRawConnection,
  type RawConnection,
  readTimedOut,
  readTimeoutMs,
  SilenceWatchdog,
  standaloneNode,
} from './raw-connection.js';

/** Receives one hash's fields as byte ranges of `buf` (valid only during the call). */
export interface HashVisitor<T> {
  /**
   * A new hash begins (`exists` false for a missing key: HGETALL's empty reply); `index` is the
   * key's position in the read (a visitor whose commands differ per key knows which reply this is).
   */
  begin(exists: boolean, index: number): void;
  field(buf: Buffer, fieldStart: number, fieldEnd: number, valueStart: number, valueEnd: number): void;
  /**
   * With a {@link RawReadCommand} other than HGETALL (an HMGET of fixed fields): each element of
   * the reply in order instead of field/value pairs, `start` −1 for a nil. When present, `field`
   * is not called.
   */
  item?(index: number, buf: Buffer, start: number, end: number): void;
  /** The hash is complete: the folded result. */
  end(): T;
  /** A hash read through ioredis instead (fallback after an error reply: its whole HGETALL). */
  fromObject(hash: Readonly<Record<string, string>>, index: number): T;
}

/**
 * The command a bulk read sends for one key, as RESP text (HGETALL by default); `index` is the
 * key's position in the read (an HMGET of other fields per key).
 */
export type RawReadCommand = (key: string, index: number) => string;

/** `HGETALL key` in RESP. */
export const hgetallCommand: RawReadCommand = (key) => `*2\r\n$7\r\nHGETALL\r\n${bulk(key)}`;

/**
 * `HMGET key <fields…>` in RESP, the fields' part built once: for visitors with
 * {@link HashVisitor.item}, which then see each field's value (or a nil) in this order.
 */
export function hmgetCommand(fields: readonly string[]): RawReadCommand {
  const head = `*${fields.length + 2}\r\n$5\r\nHMGET\r\n`;
  const tail = fields.map(bulk).join('');
  return (key) => `${head}${bulk(key)}${tail}`;
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

/**
 * Where {@link readInt} stopped: the position after the line's CRLF, or −1 when the line is not
 * complete in the buffer. A module variable rather than a returned pair: the spend read parses
 * ~5 M lines per tick, and a tuple per line was most of the tick's garbage.
 */
let lineEnd = -1;

/** Reads `<int>\r\n` at `pos` (NaN when not an integer); sets {@link lineEnd}. */
function readInt(buf: Buffer, pos: number): number {
  // The lines are a few bytes: a JavaScript scan beats the native indexOf call.
  const n = buf.length;
  let cr = pos;
  while (cr < n && buf[cr] !== CRLF) cr++;
  if (cr + 1 >= n) {
    lineEnd = -1;
    return 0;
  }
  lineEnd = cr + 2;
  return parseIntBytes(buf, pos, cr);
}

/** Byte ranges of the reply being parsed (start, end per element), reused from reply to reply. */
let ranges = new Int32Array(256);

/**
 * Parses one reply at `pos`, feeding the visitor. Returns the position after it, `-1` when the
 * buffer does not hold the whole reply yet (nothing is fed), or `-2 - end` for an error reply
 * (`-...` line or a non-array). Allocates nothing.
 */
function parseReply<T>(
  buf: Buffer,
  pos: number,
  visitor: HashVisitor<T>,
  out: { value?: T },
  index: number,
): number {
  if (pos >= buf.length) return -1;
  const type = buf[pos];
  if (type !== 0x2a /* * */) {
    const cr = buf.indexOf(CRLF, pos);
    if (cr < 0 || cr + 1 >= buf.length) return -1;
    return -2 - (cr + 2);
  }
  const head = readInt(buf, pos + 1);
  if (lineEnd < 0) return -1;
  if (Number.isNaN(head)) return -2 - lineEnd;
  // `*-1` (a null array) reads as an empty hash, as HGETALL's `*0`.
  const count = Math.max(0, head);
  // First make sure the whole reply is here, so the visitor sees each hash once, whole.
  if (ranges.length < count * 2) ranges = new Int32Array(count * 2);
  const r = ranges;
  let p = lineEnd;
  for (let i = 0; i < count; i++) {
    if (p >= buf.length) return -1;
    if (buf[p] !== 0x24 /* $ */) return -2 - p;
    const n = readInt(buf, p + 1);
    if (lineEnd < 0) return -1;
    const start = lineEnd;
    if (n === -1) {
      // A nil (HMGET of a field the hash does not hold).
      r[2 * i] = -1;
      r[2 * i + 1] = -1;
      p = start;
      continue;
    }
    if (start + n + 2 > buf.length) return -1;
    r[2 * i] = start;
    r[2 * i + 1] = start + n;
    p = start + n + 2;
  }
  visitor.begin(count > 0, index);
  if (visitor.item) {
    for (let i = 0; i < count; i++) visitor.item(i, buf, r[2 * i] as number, r[2 * i + 1] as number);
  } else {
    for (let i = 0; i + 3 < 2 * count; i += 4) {
      visitor.field(buf, r[i] as number, r[i + 1] as number, r[i + 2] as number, r[i + 3] as number);
    }
  }
  out.value = visitor.end();
  return p;
}

interface Connection extends RawConnection {
  /** Serialises reads on this connection (replies come back in order). */
  queue: Promise<unknown>;
}

const EMPTY = Buffer.alloc(0);

/** Options of {@link RawHashReader}. */
export interface RawHashReaderOptions {
  /** The application's client: its options give host, port and TLS; its slot table routes keys. */
  readonly client: RedisClient;
  /** Commands written per socket write. @default 2_000 */
  readonly chunk?: number;
  /**
   * Longest silence of the node while a read waits for replies (not the read's whole duration: a
   * tick's read of 150,000 hashes streams for 0.5 s to several seconds, never silent when
   * healthy); past it the read rejects with {@link RawReadTimeoutError} and the connection is
   * dropped ({@link SilenceWatchdog}). The pacer passes its `PACER_REDIS_SILENCE_MS`.
   * @default 1000
   */
  readonly timeoutMs?: number;
}

/** Bulk HGETALL with per-hash folding (see the module comment). */
export class RawHashReader {
  private readonly connections = new Map<string, Connection>();
  private readonly chunk: number;
  /** Closes the sockets with the client; registered while sockets are open. */
  private readonly onClientEnd = () => this.close();
  private listening = false;

  private readonly timeoutMs: number;

  constructor(private readonly options: RawHashReaderOptions) {
    this.chunk = options.chunk ?? 2_000;
    this.timeoutMs = readTimeoutMs('RawHashReader', options.timeoutMs);
  }

  /**
   * Reads every key, folding each hash with the visitor; results in key order. Error replies (a
   * moved slot, a wrong type) and keys of unknown slots are re-read through ioredis.
   */
  async read<T>(
    keys: readonly string[],
    visitor: HashVisitor<T>,
    command: RawReadCommand = hgetallCommand,
  ): Promise<T[]> {
    // One part holding every key.
    return (await this.readParts(keys, visitor, keys.length, command)[0]) ?? [];
  }

  /**
   * The same read (every command sent at once), delivered in parts of `partSize` keys in key
   * order: part k's promise resolves as soon as its hashes are in, while later parts are still
   * being read, so a caller computes on early parts while Redis serves the rest (the pacer steps
   * its controller this way). A failed read (connection lost, timed out) rejects every part not
   * yet resolved; a key whose re-read through ioredis fails (a wrong type) rejects its part only.
   */
  readParts<T>(
    keys: readonly string[],
    visitor: HashVisitor<T>,
    partSize: number,
    command: RawReadCommand = hgetallCommand,
  ): Promise<T[]>[] {
    const size = Math.max(1, Math.floor(partSize));
    const count = Math.ceil(keys.length / size);
    const out: T[] = new Array(keys.length);
    const again = new Uint8Array(keys.length);
    const remaining = Array.from({ length: count }, (_, k) => Math.min(size, keys.length - k * size));
    const settle: { resolve: (v: T[]) => void; reject: (e: Error) => void; done: boolean }[] = [];
    const parts = Array.from(
      { length: count },
      (_, k) =>
        new Promise<T[]>((resolve, reject) => {
          settle[k] = { resolve, reject, done: false };
        }),
    );
    /** Rejects part k unless it is settled already. */
    const failPart = (k: number, error: Error) => {
      const s = settle[k] as (typeof settle)[number];
      if (!s.done) {
        s.done = true;
        s.reject(error);
      }
    };
    /** The read itself failed: every part not yet resolved. */
    const fail = (error: Error) => {
      for (let k = 0; k < count; k++) failPart(k, error);
    };
    const finish = async (k: number) => {
      const from = k * size;
      const to = Math.min(keys.length, from + size);
      // Error replies and unknown slots of this part: through ioredis.
      for (let i = from; i < to; i++) {
        if (again[i] === 1)
          out[i] = visitor.fromObject(await this.options.client.hgetall(keys[i] as string), i);
      }
      const s = settle[k] as (typeof settle)[number];
      if (!s.done) {
        s.done = true;
        s.resolve(out.slice(from, to));
      }
    };
    this.readInto(keys, visitor, command, out, (i, retry) => {
      if (retry) again[i] = 1;
      const k = Math.floor(i / size);
      // A part's own retry error is that part's (the later parts' replies may still be on their
      // way: rejecting them too made the outcome depend on which came first).
      if (--(remaining[k] as number) === 0) finish(k).catch((error: Error) => failPart(k, error));
    }).catch(fail);
    // Handled here too: a caller that stops at a failed part never awaits the later ones.
    for (const part of parts) part.catch(() => {});
    return parts;
  }

  /** Sends every key's HGETALL and fills `out`; `settled(i, retry)` as each reply is parsed. */
  private async readInto<T>(
    keys: readonly string[],
    visitor: HashVisitor<T>,
    command: RawReadCommand,
    out: T[],
    settled: (i: number, retry: boolean) => void,
  ): Promise<void> {
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
    await Promise.all(
      [...groups].map(([node, indexes]) => {
        if (node !== 'unknown') return this.readFromNode(node, keys, indexes, visitor, command, out, settled);
        for (const i of indexes) settled(i, true);
        return Promise.resolve();
      }),
    );
  }

  private connection(node: string): Connection {
    const existing = this.connections.get(node);
    if (existing && !existing.broken) return existing;
    // TLS and AUTH (the IAM token, under ElastiCache IAM auth) as the application's client has
    // them; one reused read buffer, so `onData` copies the unfinished tail it keeps.
    const c: Connection = Object.assign(openRawConnection(this.options.client, node), {
      queue: Promise.resolve() as Promise<unknown>,
    });
    c.socket.unref();
    // The sockets live as long as the application's client (and never keep a process alive
    // between reads: referenced only while a read runs). The listener goes with them on close, so
    // short-lived readers (a pacer process per takeover in the simulator) do not pile up on it.
    if (!this.listening) {
      this.options.client.once('end', this.onClientEnd);
      this.listening = true;
    }
    this.connections.set(node, c);
    return c;
  }

  private readFromNode<T>(
    node: string,
    keys: readonly string[],
    indexes: readonly number[],
    visitor: HashVisitor<T>,
    command: RawReadCommand,
    out: T[],
    settled: (i: number, retry: boolean) => void,
  ): Promise<void> {
    const c = this.connection(node);
    const run = c.queue.then(async () => {
      c.socket.ref();
      try {
        await c.ready;
        await this.readReplies(c, node, keys, indexes, visitor, command, out, settled);
      } finally {
        c.socket.unref();
      }
    });
    c.queue = run.catch(() => {});
    return run;
  }

  /** Writes the commands of `indexes` on `c` and folds their replies as they come. */
  private readReplies<T>(
    c: Connection,
    node: string,
    keys: readonly string[],
    indexes: readonly number[],
    visitor: HashVisitor<T>,
    command: RawReadCommand,
    out: T[],
    settled: (i: number, retry: boolean) => void,
  ): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let pending: Buffer = EMPTY;
      let next = 0;
      const result: { value?: T } = {};
      // Progress, not duration: fails only when the node sends nothing for timeoutMs.
      const watchdog = new SilenceWatchdog(
        this.timeoutMs,
        () => {
          c.broken = true;
          c.socket.destroy();
          onError(
            readTimedOut(
              `Redis at ${node} sent nothing for ${this.timeoutMs} ms during a read of ${indexes.length} hash(es) (${next} answered)`,
            ),
          );
        },
        c.socket,
      );
      watchdog.expect();
      const onData = (chunk: Buffer) => {
        watchdog.heard();
        const buf = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
        let pos = 0;
        while (next < indexes.length) {
          const end = parseReply(buf, pos, visitor, result, indexes[next] as number);
          if (end === -1) break;
          const i = indexes[next++] as number;
          if (end < -1) {
            pos = -2 - end;
            settled(i, true);
          } else {
            out[i] = result.value as T;
            pos = end;
            settled(i, false);
          }
        }
        // A copy: `chunk` is the connection's reused read buffer.
        pending = pos < buf.length ? Buffer.from(buf.subarray(pos)) : EMPTY;
        if (next === indexes.length) finish();
      };
      const onError = (error: Error) => {
        cleanup();
        reject(error);
      };
      const onClose = () => onError(new Error(`Redis connection to ${node} closed during a bulk read`));
      const cleanup = () => {
        watchdog.close();
        c.receive = null;
        c.socket.off('error', onError);
        c.socket.off('close', onClose);
      };
      const finish = () => {
        cleanup();
        resolve();
      };
      c.receive = onData;
      c.socket.once('error', onError);
      c.socket.once('close', onClose);
      if (indexes.length === 0) return finish();
      for (let from = 0; from < indexes.length; from += this.chunk) {
        const parts: string[] = [];
        for (let j = from; j < Math.min(indexes.length, from + this.chunk); j++) {
          const i = indexes[j] as number;
          parts.push(command(keys[i] as string, i));
        }
        c.socket.write(parts.join(''));
      }
    });
  }

  /** Closes the sockets. */
  close(): void {
    for (const c of this.connections.values()) c.socket.destroy();
    this.connections.clear();
    if (this.listening) {
      this.options.client.off('end', this.onClientEnd);
      this.listening = false;
    }
  }
}
