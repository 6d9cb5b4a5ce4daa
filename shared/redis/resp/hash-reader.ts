/**
 * Bulk HGETALL (or HMGET) over raw RESP connections, for readers that fold each hash into a few
 * numbers (the pacer reads 100k+ live-spend hashes per tick). ioredis builds a JavaScript string
 * for every field and value and an object per reply — ~40k HGETALL/s from one process here;
 * walking the reply bytes once and handing field/value byte ranges to a visitor
 * (shared/redis/resp/folds.ts, `foldHash`) is several times faster.
 *
 * - One connection per node (shared/redis/resp/connection.ts: TLS and AUTH as the client has them,
 *   the layer's progress timeout). A read writes every key's command at once, in batches, and folds
 *   the replies as they arrive; reads on one connection are answered in turn.
 * - Cluster routing uses the client's slot table (shared/redis/resp/ioredis-adapter.ts); a key
 *   whose reply is an error (MOVED / ASK during a resharding, a wrong type) or whose slot has no
 *   known owner is re-read through ioredis, which follows redirects.
 * - A read during which the node sends nothing for `timeoutMs` rejects with `RawReadTimeoutError`
 *   and drops the connection: the limit is on silence, not on the read's duration (a tick's read of
 *   150,000 hashes streams for seconds), and this process's own stalls do not count.
 */
import { Cluster } from 'ioredis';
import { type RedisClient, slotsReady } from '../connect.js';
import { bulk, type RespRequest } from './connection.js';
import type { RawRedisError } from './errors.js';
import { foldHash, type HashVisitor, NOT_A_HASH } from './folds.js';
import { nodeOfKey, standaloneNode } from './ioredis-adapter.js';
import { RespNodes } from './nodes.js';
import { timeoutMsOption } from './timeout.js';

export type { HashVisitor } from './folds.js';

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

/** Options of {@link RawHashReader}. */
export interface RawHashReaderOptions {
  /** The application's client: its options give host, port and TLS; its slot table routes keys. */
  readonly client: RedisClient;
  /** Commands per socket write. @default 2_000 */
  readonly chunk?: number;
  /**
   * Longest silence of the node while a read waits for replies (not the read's duration); past it
   * the read rejects with `RawReadTimeoutError` and the connection is dropped. The pacer passes its
   * `PACER_REDIS_SILENCE_MS`. @default 1000
   */
  readonly timeoutMs?: number;
}

/** The replies one read expects from one node: its keys' indexes, folded into `out`. */
class NodeRead<T> implements RespRequest {
  private next = 0;
  constructor(
    private readonly indexes: readonly number[],
    private readonly visitor: HashVisitor<T>,
    private readonly out: T[],
    private readonly settled: (i: number, retry: boolean) => void,
    readonly done: { resolve: () => void; reject: (error: Error) => void },
  ) {}

  reply(buf: Buffer, tokens: Int32Array, count: number): boolean {
    const i = this.indexes[this.next++] as number;
    const value = foldHash(buf, tokens, count, this.visitor, i);
    if (value === NOT_A_HASH) this.settled(i, true);
    else {
      this.out[i] = value;
      this.settled(i, false);
    }
    if (this.next < this.indexes.length) return false;
    this.done.resolve();
    return true;
  }

  fail(error: RawRedisError): void {
    this.done.reject(error);
  }

  waiting(): string {
    return `during a read of ${this.indexes.length} hash(es) (${this.next} answered)`;
  }
}

/** Bulk HGETALL with per-hash folding (see the module comment). */
export class RawHashReader {
  private readonly nodes: RespNodes;
  private readonly chunk: number;

  constructor(private readonly options: RawHashReaderOptions) {
    this.chunk = options.chunk ?? 2_000;
    this.nodes = new RespNodes(options.client, {
      timeoutMs: timeoutMsOption('RawHashReader', options.timeoutMs),
    });
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
    return (await this.readParts(keys, visitor, keys.length, command)[0]) ?? [];
  }

  /**
   * The same read, delivered in parts of `partSize` keys in key order: part k's promise resolves as
   * soon as its hashes are in, while later parts are still being read, so a caller computes on
   * early parts while Redis serves the rest (the pacer steps its controller this way). A failed
   * read (connection lost, timed out) rejects every part not yet resolved; a key whose re-read
   * through ioredis fails (a wrong type) rejects its part only.
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
    const failPart = (k: number, error: Error) => {
      const s = settle[k] as (typeof settle)[number];
      if (!s.done) {
        s.done = true;
        s.reject(error);
      }
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
      // A part's own retry error is that part's (later parts' replies may still be on their way).
      if (--(remaining[k] as number) === 0) finish(k).catch((error: Error) => failPart(k, error));
    }).catch((error: Error) => {
      for (let k = 0; k < count; k++) failPart(k, error);
    });
    // Handled here too: a caller that stops at a failed part never awaits the later ones.
    for (const part of parts) part.catch(() => {});
    return parts;
  }

  /** Sends every key's command and fills `out`; `settled(i, retry)` as each reply is folded. */
  private async readInto<T>(
    keys: readonly string[],
    visitor: HashVisitor<T>,
    command: RawReadCommand,
    out: T[],
    settled: (i: number, retry: boolean) => void,
  ): Promise<void> {
    const client = this.options.client;
    await slotsReady(client);
    const groups = new Map<string, number[]>();
    if (client instanceof Cluster) {
      for (let i = 0; i < keys.length; i++) {
        const node = nodeOfKey(client, keys[i] as string) ?? 'unknown';
        const g = groups.get(node);
        if (g) g.push(i);
        else groups.set(node, [i]);
      }
    } else if (keys.length > 0) {
      groups.set(
        standaloneNode(client),
        keys.map((_, i) => i),
      );
    }
    await Promise.all(
      [...groups].map(([node, indexes]) => {
        if (node === 'unknown') {
          for (const i of indexes) settled(i, true);
          return Promise.resolve();
        }
        return new Promise<void>((resolve, reject) => {
          const commands: string[] = [];
          for (let from = 0; from < indexes.length; from += this.chunk) {
            let batch = '';
            for (let j = from; j < Math.min(indexes.length, from + this.chunk); j++) {
              const i = indexes[j] as number;
              batch += command(keys[i] as string, i);
            }
            commands.push(batch);
          }
          const read = new NodeRead(indexes, visitor, out, settled, { resolve, reject });
          this.nodes.connection(node).push(read, commands[0] as string, commands.slice(1));
        });
      }),
    );
  }

  /** Closes the sockets (a later read opens new ones). */
  close(): void {
    this.nodes.reconnect();
  }
}
