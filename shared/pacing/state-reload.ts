/**
 * The takeover's reads of what the previous publisher stored: controller state (`st`) and
 * forecasts (`fc`) of the shard's plans, by field, in parts — an `HMGET` of each hash per part of
 * the tick's plan list, all written at once on a raw connection of their own and folded as they
 * arrive (shared/redis/resp/hash-reader.ts), so the pacer steps a part as soon as its spend and its
 * stored state are in, while Redis serves the rest. No read of a whole hash: a shard's state hash
 * holds 150,000 fields at 100,000 campaigns, and reading it whole (HSCAN pages through the client)
 * made the takeover tick wait for all of it before stepping a single plan.
 *
 * Fields of plans that no longer exist (deleted campaigns and arms) are found apart, and only when
 * a hash holds more fields than the reads found ({@link StateReloader.counts}): a sweep of the
 * hash's field names ({@link StateReloader.unknownFields}), which the pacer runs after its publish.
 */
import type { RedisClient } from '../redis/connect.js';
import { bulk } from '../redis/resp/connection.js';
import { type HashVisitor, RawHashReader } from '../redis/resp/hash-reader.js';
import type { ShardKeys } from './keys.js';

/** The stored texts of one part's plans, aligned with its fields (undefined: none stored). */
export interface StoredTexts {
  readonly state: (string | undefined)[];
  readonly forecast: (string | undefined)[];
}

/** Options of {@link StateReloader}. */
export interface StateReloaderOptions {
  readonly redis: RedisClient;
  readonly keys: Pick<ShardKeys, 'state' | 'forecast'>;
  /** Longest silence of the node while replies are due, ms (RawHashReader's). @default 1000 */
  readonly timeoutMs?: number;
}

/** One HMGET reply as the texts of its fields (the fields are the command's, by index). */
class TextsVisitor implements HashVisitor<(string | undefined)[]> {
  private out: (string | undefined)[] = [];

  constructor(private readonly fieldsOf: (index: number) => readonly string[]) {}

  begin(_exists: boolean, index: number): void {
    this.out = new Array(this.fieldsOf(index).length);
  }

  field(): void {
    // HMGET replies come through `item`.
  }

  item(i: number, buf: Buffer, start: number, end: number): void {
    // The same text ioredis would give (UTF-8); the encodings are ASCII.
    if (start >= 0) this.out[i] = buf.toString('utf8', start, end);
  }

  end(): (string | undefined)[] {
    return this.out;
  }

  fromObject(hash: Readonly<Record<string, string>>, index: number): (string | undefined)[] {
    return this.fieldsOf(index).map((f) => hash[f]);
  }
}

/** Reads a shard's stored state and forecasts by plan field (see the module comment). */
export class StateReloader {
  private readonly reader: RawHashReader;

  constructor(private readonly options: StateReloaderOptions) {
    this.reader = new RawHashReader({
      client: options.redis,
      ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    });
  }

  /**
   * The stored texts of `fields`, in parts of `partSize` fields (part k: fields [k·size, …)), in
   * order: every command is written at once, and part k resolves as soon as its two replies are in.
   * A failed read (connection lost, the node silent too long) rejects every part not yet resolved.
   */
  read(fields: readonly string[], partSize: number): Promise<StoredTexts>[] {
    const size = Math.max(1, Math.floor(partSize));
    const count = Math.ceil(fields.length / size);
    const { state, forecast } = this.options.keys;
    // Command 2k reads part k from `st`, 2k + 1 from `fc` (same slot: one node, in order).
    const keys: string[] = [];
    const partFields: (readonly string[])[] = [];
    for (let k = 0; k < count; k++) {
      const f = fields.slice(k * size, (k + 1) * size);
      partFields.push(f, f);
      keys.push(state, forecast);
    }
    return this.hmget(keys, (i) => partFields[i] as readonly string[], 2).map((part) => {
      const texts = part.then(([s, f]) => ({
        state: s as (string | undefined)[],
        forecast: f as (string | undefined)[],
      }));
      texts.catch(() => {});
      return texts;
    });
  }

  /**
   * `HMGET key fields…` for every key (its fields by index), in parts of `partSize` keys, in order:
   * the takeover reads what its predecessor published in each campaign hash this way (a field
   * that holds what this publish computes is not written again). Rejections as {@link read}'s.
   */
  hmget(
    keys: readonly string[],
    fieldsOf: (index: number) => readonly string[],
    partSize: number,
  ): Promise<(string | undefined)[][]>[] {
    const args = new Map<readonly string[], string>();
    const command = (key: string, index: number) => {
      const fields = fieldsOf(index);
      let tail = args.get(fields);
      if (tail === undefined) {
        tail = fields.map(bulk).join('');
        args.set(fields, tail);
      }
      return `*${fields.length + 2}\r\n$5\r\nHMGET\r\n${bulk(key)}${tail}`;
    };
    const parts = this.reader.readParts(keys, new TextsVisitor(fieldsOf), partSize, command);
    // Handled here too: a caller that stops at a failed part never awaits the later ones.
    for (const part of parts) part.catch(() => {});
    return parts;
  }

  /** How many fields each hash holds (HLEN), to tell whether fields of unknown plans remain. */
  async counts(): Promise<{ readonly state: number; readonly forecast: number }> {
    const { state, forecast } = this.options.keys;
    const [s, f] = await Promise.all([this.options.redis.hlen(state), this.options.redis.hlen(forecast)]);
    return { state: s, forecast: f };
  }

  /**
   * The fields of the `which` hash that `known` does not claim (plans deleted since they were
   * stored), by HSCAN pages of `count` fields: a sweep the pacer runs only when {@link counts}
   * exceed what its reads found, and off its tick's path.
   */
  async unknownFields(
    which: 'state' | 'forecast',
    known: (field: string) => boolean,
    count = 10_000,
  ): Promise<string[]> {
    const key = this.options.keys[which];
    const out: string[] = [];
    let cursor = '0';
    do {
      const [next, flat] = await this.options.redis.hscan(key, cursor, 'COUNT', count);
      for (let i = 0; i + 1 < flat.length; i += 2) {
        const field = flat[i] as string;
        if (!known(field)) out.push(field);
      }
      cursor = next;
    } while (cursor !== '0');
    return out;
  }

  /** Closes the raw connection (it also closes with the client). */
  close(): void {
    this.reader.close();
  }
}
