/**
 * Fenced publishing of a shard's pacing parameters: two typed Lua scripts over the shard's keys
 * (shared/redis/scripts/pacing-claim.lua, pacing-publish.lua), which all share the hash tag
 * `{pp:<shard>}` (one slot, so each script is atomic in cluster mode too).
 *
 * - `ppClaim` — claims tick t for the shard with fence (g, o, e): accepted iff the fence is ≥ the
 *   stored one (lexicographically) and t > the stored tick. At most one publisher per
 *   (shard, tick); after a higher fence has claimed, a lower one can never claim again.
 * - `ppPublish` — writes a batch of campaign hashes plus the plans' controller state and
 *   forecast, accepted only while the stored claim is exactly the caller's (fence, t, publisher).
 *   A paused or partitioned ex-leader that resumes after a newer claim has every write rejected.
 *   The publish's last batch records the completed publish in the claim hash (`pt`, `pat`, `rp`):
 *   readers' freshness under contract v2 (docs/pacing.md).
 *
 * Both append their outcome (accepted or rejected, and why) to the shard's audit stream, capped
 * at `logMaxLen` entries: the server's own, ordered record of who wrote which tick.
 */
import type { Result } from 'ioredis';
import type { RedisClient } from '../redis/connect.js';
import { defineScripts } from '../redis/scripts/registry.js';
import { type Fence, parseFence } from './fence.js';
import { type ShardKeys, shardKeys } from './keys.js';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /**
     * KEYS: claim, log. ARGV: g, o, e, tick, publisher, nowMs, logMaxLen.
     * Reply: [accepted 1|0, reason ok|fence|tick, previous g, o, e, tick, publisher] ('' = none).
     */
    ppClaim(
      claim: string,
      log: string,
      g: number,
      o: number,
      e: number,
      tick: number,
      publisher: string,
      nowMs: number,
      logMaxLen: number,
    ): Result<[number, string, string, string, string, string, string], Context>;
    /**
     * KEYS: claim, state, forecast, budgets snapshot, log, written campaign keys…
     * ARGV: g, o, e, tick, publisher, nowMs, logMaxLen, keepMs, replace-snapshot (1|0),
     * complete (1|0: the publish's last batch — records `pt`, `pat`, `rp` in the claim hash),
     * republishMs, written count, then per written campaign one argument: mode (F replace | X
     * write + expiry | P write) and its field/value pairs, joined by the unit separator (0x1f);
     * then for state, forecast and snapshot one argument each: field/value pairs joined by 0x1f
     * ('' = none); then for each one argument: fields to delete joined by 0x1f ('' = none).
     * Reply: [accepted 1|0, claim g, o, e, tick, publisher] ('' = none).
     */
    ppPublish(
      numKeys: number,
      ...keysAndArgs: (string | number)[]
    ): Result<[number, string, string, string, string, string], Context>;
  }
}

/** Registers the pacing scripts on a client (idempotent). */
export function definePacingCommands(redis: RedisClient): void {
  defineScripts(redis, 'ppClaim', 'ppPublish');
}

/** A shard's claim as stored. */
export interface StoredClaim {
  readonly fence: Fence;
  readonly tick: number;
  readonly publisher: string;
}

/** Result of {@link ShardPublisher.claim}. */
export interface ClaimOutcome {
  readonly accepted: boolean;
  /** `ok`, `fence` (a higher fence holds the shard) or `tick` (the tick is already claimed). */
  readonly reason: 'ok' | 'fence' | 'tick';
  /** The claim stored before this call; undefined when the shard was never claimed. */
  readonly previous: StoredClaim | undefined;
}

/**
 * One campaign hash to write: `F` replaces the hash (first publish by this publisher, or the set
 * of plans changed), `X` writes the fields and the whole header and refreshes the key's expiry,
 * `P` writes the fields and the tick and published-at only — for a publisher continuing its own
 * publishes, whose version, fence and publisher id are already in the hash.
 */
export interface CampaignWrite {
  readonly campaignId: string;
  readonly mode: 'F' | 'X' | 'P';
  /** field, value, field, value, … (the header fields v, t, at, f, by are added by the script). */
  readonly fields: readonly string[];
}

/** Fields to set (field, value, …) and to delete in one of the shard's side hashes. */
export interface HashChanges {
  readonly set: readonly string[];
  readonly del?: readonly string[];
}

/** What to publish in one tick. */
export interface PublishBatchInput {
  readonly fence: Fence;
  readonly tick: number;
  readonly nowMs: number;
  /**
   * The campaign hashes; a function is called after the side hashes' batches are sent, so the
   * caller's work of building the writes (or of reading what it needs to build them: a promise)
   * overlaps Redis running those scripts.
   */
  readonly campaigns:
    | readonly CampaignWrite[]
    | (() => readonly CampaignWrite[] | Promise<readonly CampaignWrite[]>);
  /** Controller state per plan field (only changed ones). */
  readonly state?: HashChanges;
  /** Forecast per plan field (only changed ones). */
  readonly forecast?: HashChanges;
  /** The shard's budgets snapshot (only changed items, unless `replaceBudgets`). */
  readonly budgets?: HashChanges;
  /** Rewrite the budgets snapshot whole (its first batch deletes the old one). @default false */
  readonly replaceBudgets?: boolean;
  /**
   * The bound readers may assume on the age of a paced campaign's hash (`rp` in the claim hash,
   * contract v2): the publisher rewrites every paced campaign at least this often. @default 0
   */
  readonly republishMs?: number;
}

/** Result of {@link ShardPublisher.publish}. */
export interface PublishOutcome {
  readonly batches: number;
  readonly acceptedBatches: number;
  /** Batches refused because the stored claim was not the caller's (fenced writes rejected). */
  readonly rejectedBatches: number;
  readonly campaignsWritten: number;
  /** The claim that refused the first rejected batch. */
  readonly heldBy?: StoredClaim;
}

/** Options of {@link ShardPublisher}. */
export interface ShardPublisherOptions {
  readonly redis: RedisClient;
  readonly shard: number;
  /** Unique per process: `<instance id>/<nonce>` (two processes of one instance must differ). */
  readonly publisherId: string;
  /** Audit stream length (approximate cap). @default 10_000 */
  readonly logMaxLen?: number;
  /** Expiry refreshed on campaign hashes (memory only; readers check `at`). @default 2 days */
  readonly keepMs?: number;
  /** Script arguments per batch (a batch is one atomic script run). @default 4_000 */
  readonly maxArgsPerBatch?: number;
}

function claimFrom(parts: readonly string[]): StoredClaim | undefined {
  const [g, o, e, t, p] = parts;
  const fence = parseFence(`${g}.${o}.${e}`);
  const tick = Number(t);
  if (!fence || t === '' || !Number.isSafeInteger(tick)) return undefined;
  return { fence, tick, publisher: p ?? '' };
}

/** Claims ticks and publishes parameters of one shard, fenced. */
export class ShardPublisher {
  readonly keys: ShardKeys;
  private readonly logMaxLen: number;
  private readonly keepMs: number;
  private readonly maxArgs: number;

  constructor(private readonly options: ShardPublisherOptions) {
    this.keys = shardKeys(options.shard);
    this.logMaxLen = options.logMaxLen ?? 10_000;
    this.keepMs = options.keepMs ?? 2 * 86_400_000;
    this.maxArgs = options.maxArgsPerBatch ?? 4_000;
    definePacingCommands(options.redis);
  }

  get publisherId(): string {
    return this.options.publisherId;
  }

  /** Claims `tick` with `fence` (one atomic script). */
  async claim(fence: Fence, tick: number, nowMs: number): Promise<ClaimOutcome> {
    const [ok, why, ...prev] = await this.options.redis.ppClaim(
      this.keys.claim,
      this.keys.log,
      fence.g,
      fence.o,
      fence.e,
      tick,
      this.options.publisherId,
      nowMs,
      this.logMaxLen,
    );
    return { accepted: ok === 1, reason: why as ClaimOutcome['reason'], previous: claimFrom(prev) };
  }

  /**
   * Publishes campaign hashes, state and forecasts in batches (each an atomic script that checks
   * the claim first), sent to the shard's node as they are built, side hashes first. Batches after
   * a lost claim are all rejected: the outcome counts them.
   */
  async publish(input: PublishBatchInput): Promise<PublishOutcome> {
    const k = this.keys;
    const head = (replaceBudgets: boolean): (string | number)[] => [
      input.fence.g,
      input.fence.o,
      input.fence.e,
      input.tick,
      this.options.publisherId,
      input.nowMs,
      this.logMaxLen,
      this.keepMs,
      replaceBudgets ? '1' : '0',
      '0',
      input.republishMs ?? 0,
    ];
    const batches = new PublishBatches(
      this.options.redis,
      [k.claim, k.state, k.forecast, k.budgets, k.log],
      head,
      input.replaceBudgets === true,
    );
    // Side hashes (state, forecast, snapshot) first: one packed argument per slice, same claim
    // check. Every value is checked before anything is sent.
    const sides = [input.state, input.forecast, input.budgets];
    checkSeparators(sides);
    pushSides(batches, sides, this.maxArgs * 4);
    // Campaign hashes, in batches of about maxArgs script arguments' worth of fields.
    const built = typeof input.campaigns === 'function' ? input.campaigns() : input.campaigns;
    // Awaited only when it is a promise: a synchronous build keeps the batches in one turn.
    const campaigns = built instanceof Promise ? await built : built;
    pushCampaigns(batches, campaigns, k, this.maxArgs);
    batches.finish();
    return batches.outcome();
  }

  /** The shard's stored claim (operator view, continuity checks). */
  async storedClaim(): Promise<(StoredClaim & { atMs: number }) | undefined> {
    const h = await this.options.redis.hgetall(this.keys.claim);
    const c = claimFrom([h.g ?? '', h.o ?? '', h.e ?? '', h.t ?? '', h.p ?? '']);
    return c ? { ...c, atMs: Number(h.at) } : undefined;
  }
}

/** One entry of a shard's audit stream. */
export interface AuditEntry {
  /** Stream id: server order. */
  readonly id: string;
  readonly kind: 'claim' | 'publish';
  readonly accepted: boolean;
  /** `ok`; for claims `fence` or `tick`; for publishes `claim` (the stored claim was not the caller's). */
  readonly reason: string;
  readonly publisher: string;
  readonly fence: string;
  readonly tick: number;
  readonly atMs: number;
  /** Campaigns in the batch (publish). */
  readonly campaigns?: number;
}

/** Reads a shard's audit stream, oldest first (tests, operators). */
export async function readAuditLog(
  redis: RedisClient,
  shard: number,
  count = 100_000,
): Promise<AuditEntry[]> {
  const entries = (await redis.xrange(shardKeys(shard).log, '-', '+', 'COUNT', count)) as [
    string,
    string[],
  ][];
  return entries.map(([id, flat]) => {
    const f: Record<string, string> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) f[flat[i] as string] = flat[i + 1] as string;
    return {
      id,
      kind: f.k as 'claim' | 'publish',
      accepted: f.ok === '1',
      reason: f.why ?? '',
      publisher: f.by ?? '',
      fence: f.f ?? '',
      tick: Number(f.t),
      atMs: Number(f.at),
      ...(f.n === undefined ? {} : { campaigns: Number(f.n) }),
    };
  });
}

type Batch = { keys: string[]; args: (string | number)[]; campaigns: number };

/** A side hash's or campaign batch's empty slot: nothing to set or delete. */
const NO_CHANGES: readonly string[] = ['', '', ''];

/**
 * The batches of one publish. Each batch is sent as soon as the next one is built, so Redis runs
 * the scripts while the caller builds the rest (the shard's keys share one slot: one connection,
 * run in order). The last is held back until it is known to be the last, which records the
 * completed publish.
 */
class PublishBatches {
  private readonly sent: Promise<[Error | null, unknown]>[] = [];
  private readonly campaignsPerBatch: number[] = [];
  private held: Batch | undefined;

  constructor(
    private readonly redis: RedisClient,
    private readonly fixedKeys: readonly string[],
    /** The script's fixed arguments, with the replace-snapshot flag; `complete` at index 9. */
    private readonly head: (replaceBudgets: boolean) => (string | number)[],
    /** The next batch clears the old snapshot (only the first batch does). */
    private replace: boolean,
  ) {}

  push(campaignKeys: string[], body: string[], sets: readonly string[], dels: readonly string[]): void {
    const args: (string | number)[] = [
      ...this.head(this.replace),
      campaignKeys.length,
      ...body,
      ...sets,
      ...dels,
    ];
    if (this.held) this.send(this.held);
    this.held = { keys: [...this.fixedKeys, ...campaignKeys], args, campaigns: campaignKeys.length };
    this.replace = false;
  }

  /** Sends the last batch, marked complete (an empty one if need be). */
  finish(): void {
    if (this.replace || this.held === undefined) this.push([], [], NO_CHANGES, NO_CHANGES);
    const last = this.held as unknown as Batch;
    last.args[9] = '1';
    this.send(last);
  }

  /** The batches' replies, counted (the first failure to send is thrown). */
  async outcome(): Promise<PublishOutcome> {
    const results = await Promise.all(this.sent);
    let accepted = 0;
    let rejected = 0;
    let written = 0;
    let heldBy: StoredClaim | undefined;
    for (let i = 0; i < results.length; i++) {
      const [error, reply] = results[i] as [Error | null, unknown];
      if (error) throw error;
      const [ok, ...claim] = reply as [number, ...string[]];
      if (ok === 1) {
        accepted++;
        written += this.campaignsPerBatch[i] as number;
      } else {
        rejected++;
        heldBy ??= claimFrom(claim);
      }
    }
    return {
      batches: this.sent.length,
      acceptedBatches: accepted,
      rejectedBatches: rejected,
      campaignsWritten: written,
      ...(heldBy ? { heldBy } : {}),
    };
  }

  private send(b: Batch): void {
    this.campaignsPerBatch.push(b.campaigns);
    this.sent.push(
      this.redis.ppPublish(b.keys.length, ...b.keys, ...b.args).then(
        (reply): [Error | null, unknown] => [null, reply],
        (error: Error): [Error | null, unknown] => [error, null],
      ),
    );
  }
}

/** Refuses a side-hash field or value holding the unit separator the script splits on. */
function checkSeparators(sides: readonly (HashChanges | undefined)[]): void {
  for (const changes of sides) {
    for (const list of [changes?.set ?? [], changes?.del ?? []]) {
      for (const x of list) {
        if (x.includes('\x1f'))
          throw new RangeError(
            `publish: ${JSON.stringify(x)} holds the unit separator 0x1f, which the script splits on`,
          );
      }
    }
  }
}

/** The side hashes' changes (state, forecast, snapshot), `slice` values per packed argument. */
function pushSides(
  batches: PublishBatches,
  sides: readonly (HashChanges | undefined)[],
  slice: number,
): void {
  for (let h = 0; h < 3; h++) {
    const changes = sides[h];
    if (!changes) continue;
    for (const [list, isDel] of [
      [changes.set, false],
      [changes.del ?? [], true],
    ] as const) {
      for (let i = 0; i < list.length; i += slice) {
        const packed = ['', '', ''];
        packed[h] = list.slice(i, i + slice).join('\x1f');
        batches.push([], [], isDel ? NO_CHANGES : packed, isDel ? packed : NO_CHANGES);
      }
    }
  }
}

/** The campaign hashes, in batches of about `maxArgs` script arguments' worth of fields. */
function pushCampaigns(
  batches: PublishBatches,
  campaigns: Iterable<CampaignWrite>,
  k: ShardKeys,
  maxArgs: number,
): void {
  let keys: string[] = [];
  let body: string[] = [];
  let size = 0;
  for (const c of campaigns) {
    keys.push(k.campaign(c.campaignId));
    // One packed argument per campaign: a script argument costs the client far more than its
    // bytes, and the script splits it cheaply. Field names and encoded values never hold 0x1f.
    body.push(c.fields.length === 0 ? c.mode : `${c.mode}\x1f${c.fields.join('\x1f')}`);
    size += 2 + (c.fields.length >> 2);
    if (size >= maxArgs) {
      batches.push(keys, body, NO_CHANGES, NO_CHANGES);
      keys = [];
      body = [];
      size = 0;
    }
  }
  if (keys.length > 0) batches.push(keys, body, NO_CHANGES, NO_CHANGES);
}
