/**
 * `PublishedReads`: how a {@link PacingReader} fetches and decodes published campaign hashes, and
 * where several readers of one process share that work.
 *
 * - **Decoding**: a campaign hash (contract v2) is decoded once per read with its shard's claim
 *   (`effectivePublish`), curves parsed only when their `e:` text changed (a two-generation cache),
 *   field names and unchanged values interned from the reply bytes.
 * - **Batch reads coalesced**: the batch reads (refresh-ahead, prefetch) that readers sharing one
 *   `PublishedReads` issue in the same turn of the event loop are merged into one read of the
 *   union of their keys, each hash read and decoded once, each reader handed the result for its
 *   own keys in its own order. A process hosting several ad-server instances (the simulator's two
 *   ad servers and its scorer) refreshes them all at the same tick boundary: without this, Redis
 *   served and the process decoded every hash once per reader. A lone reader gains nothing (its
 *   batch waits one microtask). Each reader keeps its own
 *   cache, lookups and idle drops; only the fetch is shared. The readers then hold the same
 *   decoded objects, which are read-only.
 * - **Single reads** (a miss, the guard's `refresh`) are never merged: they go through the client
 *   at once, in order with the caller's other commands.
 */
import { pipelineByNode, type RedisClient } from '../redis/connect.js';
import { InternedStrings } from '../redis/interned-strings.js';
import { type HashVisitor, RawHashReader } from '../redis/resp/hash-reader.js';
import {
  decodeCampaignHash,
  decodeCurve,
  decodeShardPublish,
  effectivePublish,
  type PublishedCampaign,
  type ShardPublish,
} from './codec.js';
import type { CurvePoints } from './types.js';

/** Options of {@link PublishedReads}. */
export interface PublishedReadsOptions {
  /** The application's client (every reader sharing this instance uses the same one). */
  readonly redis: RedisClient;
  /**
   * Batch reads over raw RESP sockets of their own, one per node (as the pacer reads spend);
   * false: through the client as pipelined HGETALLs. @default true
   */
  readonly rawReads?: boolean;
  /**
   * A raw read during which Redis sends nothing for this long fails (RawHashReader's `timeoutMs`).
   * The simulator raises it: on its simulated clock a slow machine is not a hung node.
   * @default RawHashReader's
   */
  readonly readTimeoutMs?: number;
}

/** One campaign hash to read: its key and its shard's claim key (same slot). */
export interface PublishedKey {
  readonly key: string;
  readonly claim: string;
}

/** A hash that is present but cannot be decoded (served as missing, counted by the reader). */
export const UNDECODABLE: unique symbol = Symbol('undecodable');

/** What a read gives per key: the effective publish, nothing published, or undecodable. */
export type PublishedRead = PublishedCampaign | undefined | typeof UNDECODABLE;

/** Batch reads gathered in one turn of the event loop, read together. */
interface Pending {
  /** Position of each key in `keys` (a key asked by several readers is read once). */
  readonly index: Map<string, number>;
  readonly keys: PublishedKey[];
  /** The read, started in a microtask: after the synchronous code that joins the batch. */
  readonly done: Promise<PublishedRead[]>;
}

/** Counters (monotonic) of a {@link PublishedReads}. */
export interface PublishedReadsMetrics {
  /** Reads sent (a merged batch or a single read). */
  reads: number;
  /** Campaign hashes read (a key asked by several readers in one batch counts once). */
  hashesRead: number;
}

/** Reads and decodes published campaign hashes for one or more {@link PacingReader}s. */
export class PublishedReads {
  readonly metrics: PublishedReadsMetrics = { reads: 0, hashesRead: 0 };
  private rawReader: RawHashReader | undefined;
  /** Folds the raw replies (it keeps the interned strings). */
  private readonly records = new HashRecord();
  /**
   * Decoded curves by `e:` text, of this batch round and the last: a hash is rewritten whenever its
   * throttle or multiplier moves (most ticks), its curve only when the forecast changes, and parsing
   * the curves was most of a refresh's decoding. Two generations bound the memory to what is live.
   */
  private curves = new Map<string, CurvePoints>();
  private lastCurves = new Map<string, CurvePoints>();
  private readonly curveOf = (raw: string): CurvePoints | undefined => {
    let curve = this.curves.get(raw);
    if (curve) return curve;
    curve = this.lastCurves.get(raw) ?? decodeCurve(raw);
    if (curve) this.curves.set(raw, curve);
    return curve;
  };
  private pending: Pending | undefined;

  constructor(private readonly options: PublishedReadsOptions) {}

  /**
   * Batch read: joins the batch of this turn of the event loop (started by the first caller, sent
   * once the current synchronous code has run); results in the order of `items`.
   */
  batch(items: readonly PublishedKey[]): Promise<PublishedRead[]> {
    let p = this.pending;
    if (p === undefined) {
      const keys: PublishedKey[] = [];
      const done = Promise.resolve().then(() => {
        this.pending = undefined;
        return this.read(keys, true);
      });
      p = { index: new Map(), keys, done };
      this.pending = p;
    }
    const at = new Array<number>(items.length);
    for (let i = 0; i < items.length; i++) {
      const item = items[i] as PublishedKey;
      let k = p.index.get(item.key);
      if (k === undefined) {
        k = p.keys.length;
        p.index.set(item.key, k);
        p.keys.push(item);
      }
      at[i] = k;
    }
    return p.done.then((results) => at.map((k) => results[k] as PublishedRead));
  }

  /** Single read through the client now (not merged), in order with the caller's commands. */
  direct(items: readonly PublishedKey[]): Promise<PublishedRead[]> {
    return this.read(items, false);
  }

  /** Closes the raw sockets (the next batch read opens them again). */
  close(): void {
    this.rawReader?.close();
    this.rawReader = undefined;
  }

  private async read(items: readonly PublishedKey[], batch: boolean): Promise<PublishedRead[]> {
    // Contract v2: each shard's last completed publish (claim hash, same slot as its campaign
    // hashes), read before the campaign hashes on the same connection, so the freshness it vouches
    // for is never later than what the campaign hashes hold.
    const claims = [...new Set(items.map((i) => i.claim))];
    const raw = batch && (this.options.rawReads ?? true);
    // Per claim: its pt / pat / rp; per campaign: the HGETALL record.
    const claimFields: Readonly<Record<string, string | null | undefined>>[] = [];
    const hashes: Readonly<Record<string, string>>[] = [];
    if (batch) {
      // A new generation of decoded curves: what this round does not use is dropped after the next.
      this.lastCurves = this.curves;
      this.curves = new Map();
    }
    if (raw) {
      this.rawReader ??= new RawHashReader({
        client: this.options.redis,
        ...(this.options.readTimeoutMs === undefined ? {} : { timeoutMs: this.options.readTimeoutMs }),
      });
      this.records.rotate();
      const replies = await this.rawReader.read([...claims, ...items.map((i) => i.key)], this.records);
      for (let i = 0; i < claims.length; i++) claimFields.push(replies[i] as Record<string, string>);
      for (let i = claims.length; i < replies.length; i++) hashes.push(replies[i] as Record<string, string>);
    } else {
      const reads: { key: string; claim: boolean }[] = [
        ...claims.map((key) => ({ key, claim: true })),
        ...items.map((i) => ({ key: i.key, claim: false })),
      ];
      const results = await pipelineByNode(
        this.options.redis,
        reads,
        (r) => r.key,
        (pipeline, r) => {
          if (r.claim) pipeline.hmget(r.key, 'pt', 'pat', 'rp');
          else pipeline.hgetall(r.key);
        },
      );
      for (let i = 0; i < results.length; i++) {
        const [error, reply] = results[i] as [Error | null, unknown];
        if (error) throw error;
        if (i < claims.length) {
          const [pt, pat, rp] = reply as (string | null)[];
          claimFields.push({ pt, pat, rp });
        } else hashes.push(reply as Record<string, string>);
      }
    }
    const shardPublish = new Map<string, ShardPublish | undefined>();
    for (let i = 0; i < claims.length; i++) {
      shardPublish.set(claims[i] as string, decodeShardPublish(claimFields[i] as Record<string, string>));
    }
    this.metrics.reads++;
    this.metrics.hashesRead += items.length;
    const out = new Array<PublishedRead>(items.length);
    for (let i = 0; i < items.length; i++) {
      try {
        const own = decodeCampaignHash(hashes[i] as Readonly<Record<string, string>>, this.curveOf);
        out[i] = own && effectivePublish(own, shardPublish.get((items[i] as PublishedKey).claim));
      } catch {
        out[i] = UNDECODABLE;
      }
    }
    return out;
  }
}

/**
 * Folds a hash reply into its record (what ioredis' HGETALL returns), straight from the bytes.
 * Field names, and the values of fields that repeat from tick to tick (curves, header fields other
 * than `t` / `at`), are {@link InternedStrings}: a refresh allocates no copy of an unchanged
 * curve's text (most of a hash's bytes), and the curve cache finds it by identity.
 */
class HashRecord implements HashVisitor<Record<string, string>> {
  private out: Record<string, string> = HashRecord.empty();
  private readonly strings = new InternedStrings();

  /** Null prototype: field names are data. */
  private static empty(): Record<string, string> {
    return Object.create(null) as Record<string, string>;
  }

  /** A new generation of interned strings (once per batch read). */
  rotate(): void {
    this.strings.rotate();
  }

  begin(): void {
    this.out = HashRecord.empty();
  }

  field(buf: Buffer, fs: number, fe: number, vs: number, ve: number): void {
    const name = this.strings.get(buf, fs, fe);
    // `p:` values and the write's `t` / `at` change every tick: interning them would only churn.
    const changing =
      (name.charCodeAt(0) === 0x70 /* p */ && name.charCodeAt(1) === 0x3a) || name === 't' || name === 'at';
    this.out[name] = changing ? buf.toString('utf8', vs, ve) : this.strings.get(buf, vs, ve);
  }

  end(): Record<string, string> {
    return this.out;
  }

  fromObject(hash: Readonly<Record<string, string>>): Record<string, string> {
    return { ...hash };
  }
}
