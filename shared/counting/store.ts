/**
 * Redis (ElastiCache) adapter of the action-counting store.
 *
 * Key schema v1 (docs/counting.md is the contract other languages read), per user, one slot
 * thanks to the `{userId}` hash tag:
 *   `act:v1:{<userId>}`     sorted set; member = stored event bytes (wire record minus user id),
 *                           score = event timestamp (epoch ms) — dedup and retention order;
 *   `act:v1:{<userId>}:log` string; the distinct members back to back — what readers GET: a
 *                           whole ad request's counts or cap check is one GET of one value.
 *
 * Dedup is exact on the full event bytes (ZADD of an existing member adds nothing, and only new
 * members are appended to the log). Retention is enforced from the injected clock: reads ignore
 * events older than now − retention whether or not a write has trimmed them yet; writes trim
 * and compact; the key TTL only reclaims idle users' memory.
 */
import { Cluster, type Result } from 'ioredis';
import { pipelineByNode, type RedisClient } from '../redis/connect.js';
import { type Clock, DAY_MS, MINUTE_MS } from '../time/clock.js';
import {
  type CapCandidate,
  type CapCheckResult,
  type CountQuery,
  checkRange,
  countMembers,
  evaluateCaps,
  type RangeCount,
  spanOf,
} from './query.js';
import { ActionEventError, actionEventSchema, type DecodedRecord, type EventSchema } from './schema.js';
import { parseCountQuery } from './sql.js';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /**
     * Adds events to one user's set and packed log, trims past retention, compacts the log when
     * a quarter of it has expired, refreshes the TTLs. KEYS: set, log. ARGV: cutoffMs, ttlMs,
     * memberLength, then score/member pairs. Returns how many members were new.
     */
    countingIngest(
      setKey: string,
      logKey: string,
      cutoffMs: number,
      ttlMs: number,
      memberLength: number,
      ...scoreMembers: (number | Buffer)[]
    ): Result<number, Context>;
    /**
     * Rebuilds a user's set (and log) from members read out of the surviving log, unless the set
     * exists again. KEYS: set, log. ARGV: cutoffMs, ttlMs, then score/member pairs. Returns 1 when
     * it rebuilt, 0 when someone else did.
     */
    countingRepair(
      setKey: string,
      logKey: string,
      cutoffMs: number,
      ttlMs: number,
      ...scoreMembers: (number | Buffer)[]
    ): Result<number, Context>;
  }
}

/**
 * One script so a reader never sees the set and the log disagree, and so add + trim + compact +
 * TTL cost one round trip. ZADD's reply says whether the member is new: only new members are
 * appended to the log, so the log holds each distinct event once (exact dedup on the full bytes).
 * Expired members stay in the log until it is compacted (readers skip them by timestamp): a
 * rewrite when ≥ 25 % of it is garbage keeps compaction amortised O(1) per event (a log shorter
 * than the set says, e.g. after an eviction, is rebuilt at the same point).
 */
const INGEST_LUA = `
local set, log = KEYS[1], KEYS[2]
-- The set and the log are one group: with one of them gone (evicted, deleted by hand) the
-- dedup would be void and redeliveries counted twice. Set gone: the caller rebuilds it from the
-- log first (reply -1, nothing written). Log gone: rebuilt here from the set (the dedup truth).
local hasSet, hasLog = redis.call('EXISTS', set), redis.call('EXISTS', log)
if hasSet == 0 and hasLog == 1 then return -1 end
if hasSet == 1 and hasLog == 0 then
  redis.call('SET', log, table.concat(redis.call('ZRANGE', set, 0, -1)))
  local pttl = redis.call('PTTL', set)
  if pttl > 0 then redis.call('PEXPIRE', log, pttl) end
end
local added = 0
for i = 4, #ARGV, 2 do
  if redis.call('ZADD', set, ARGV[i], ARGV[i + 1]) == 1 then
    redis.call('APPEND', log, ARGV[i + 1])
    added = added + 1
  end
end
local removed = redis.call('ZREMRANGEBYSCORE', set, '-inf', '(' .. ARGV[1])
if removed > 0 then
  local card = redis.call('ZCARD', set)
  if card == 0 then
    redis.call('DEL', set, log)
    return added
  end
  local len = redis.call('STRLEN', log)
  local live = card * tonumber(ARGV[3])
  if (len - live) * 4 > len or len < live then
    redis.call('SET', log, table.concat(redis.call('ZRANGE', set, 0, -1)))
    redis.call('PEXPIRE', log, ARGV[2])
  end
end
-- A pure redelivery changes nothing, so it need not extend the TTLs either.
if added > 0 then
  redis.call('PEXPIRE', set, ARGV[2])
  redis.call('PEXPIRE', log, ARGV[2])
end
return added
`;

/** Rebuild of a lost set from the surviving log (members parsed by the caller, who knows the layouts). */
const REPAIR_LUA = `
local set, log = KEYS[1], KEYS[2]
if redis.call('EXISTS', set) == 1 then return 0 end
for i = 3, #ARGV, 2 do redis.call('ZADD', set, ARGV[i], ARGV[i + 1]) end
redis.call('ZREMRANGEBYSCORE', set, '-inf', '(' .. ARGV[1])
if redis.call('ZCARD', set) == 0 then
  redis.call('DEL', set, log)
  return 1
end
redis.call('SET', log, table.concat(redis.call('ZRANGE', set, 0, -1)))
redis.call('PEXPIRE', set, ARGV[2])
redis.call('PEXPIRE', log, ARGV[2])
return 1
`;

/** Smallest believable event time (2001-09-09, 10^12 ms): below it the producer sent seconds. */
const MIN_PLAUSIBLE_MS = 1e12;

/** Version of the key schema; part of every key. */
export const KEY_SCHEMA_VERSION = 1;

/** The Redis key of a user's event set (dedup, retention order). */
export function userKey(userId: string, prefix = 'act'): string {
  return `${prefix}:v${KEY_SCHEMA_VERSION}:{${userId}}`;
}

/** The Redis key of a user's packed event log (what readers GET). Same slot as {@link userKey}. */
export function userLogKey(userId: string, prefix = 'act'): string {
  return `${prefix}:v${KEY_SCHEMA_VERSION}:{${userId}}:log`;
}

/** Options of {@link ActionStore}. */
export interface ActionStoreOptions {
  readonly redis: RedisClient;
  readonly clock: Clock;
  /** Days of events kept and counted (1–90). @default 30 */
  readonly retentionDays?: number;
  /** How far ahead of the clock an event's timestamp may be before it is rejected. @default 900000 (15 min) */
  readonly maxFutureSkewMs?: number;
  /** Key prefix. @default 'act' */
  readonly keyPrefix?: string;
  /** @default actionEventSchema */
  readonly schema?: EventSchema;
}

/** Outcome of {@link ActionStore.add}. */
export interface AddResult {
  /** Events stored for the first time. */
  readonly added: number;
  /** Events already stored (exact duplicates: redeliveries, double logging). */
  readonly duplicates: number;
  /** Events older than the retention: not stored, they could never be counted. */
  readonly expired: number;
}

/** Frequency-cap check request: one user, all candidates of one ad request. */
export interface CapCheckRequest {
  readonly userId: string;
  readonly candidates: readonly CapCandidate[];
}

/** Redis-backed store and query API of user-action events. */
export class ActionStore {
  readonly retentionMs: number;
  readonly maxFutureSkewMs: number;
  private readonly redis: RedisClient;
  private readonly clock: Clock;
  private readonly prefix: string;
  private readonly schema: EventSchema;

  constructor(options: ActionStoreOptions) {
    const days = options.retentionDays ?? 30;
    if (!Number.isInteger(days) || days < 1 || days > 90) {
      throw new RangeError(`retentionDays is ${days}: give an integer from 1 to 90 (default 30).`);
    }
    this.retentionMs = days * DAY_MS;
    this.maxFutureSkewMs = options.maxFutureSkewMs ?? 15 * MINUTE_MS;
    this.redis = options.redis;
    this.clock = options.clock;
    this.prefix = options.keyPrefix ?? 'act';
    this.schema = options.schema ?? actionEventSchema;
    // Redefining is harmless (same script): several stores may share one client.
    this.redis.defineCommand('countingIngest', { numberOfKeys: 2, lua: INGEST_LUA });
    this.redis.defineCommand('countingRepair', { numberOfKeys: 2, lua: REPAIR_LUA });
  }

  /** The user's event-set key. */
  key(userId: string): string {
    return userKey(userId, this.prefix);
  }

  /** The user's packed-log key. */
  logKey(userId: string): string {
    return userLogKey(userId, this.prefix);
  }

  /** Oldest timestamp that still counts at `now`. */
  horizon(now = this.clock.now()): number {
    return now - this.retentionMs;
  }

  /**
   * Rejects an event whose timestamp is too far in the future (a producer clock bug: it would
   * count in windows that have not happened yet). Throws {@link ActionEventError} (quarantined).
   */
  checkTimestamp(record: DecodedRecord, now = this.clock.now()): void {
    // Epoch *seconds* (or a zero-padded or truncated value) read as milliseconds land before
    // 2001-09-09: such an event would be skipped as "expired" and silently lost. No real event of
    // this system is that old, so it is a producer bug: quarantine it with its reason.
    if (record.timestamp < MIN_PLAUSIBLE_MS) {
      throw new ActionEventError(
        'counting.timestamp-not-ms',
        'timestamp',
        `Action event field "timestamp" is ${record.timestamp} (${new Date(record.timestamp).toISOString()}), ` +
          'before 2001-09-09: expected epoch milliseconds — seconds × 1000? Fix the producer and replay the dead letter.',
      );
    }
    if (record.timestamp > now + this.maxFutureSkewMs) {
      throw new ActionEventError(
        'counting.timestamp-in-future',
        'timestamp',
        `Action event field "timestamp" is ${new Date(record.timestamp).toISOString()}, more than ` +
          `${this.maxFutureSkewMs} ms after the consumer's clock (${new Date(now).toISOString()}): ` +
          "fix the producer's clock and replay the dead letter.",
      );
    }
  }

  /**
   * Stores decoded events (idempotent: storing an event again changes nothing). One script call
   * per user, pipelined per cluster node. Errors (Redis down) propagate: the caller retries.
   */
  async add(records: readonly DecodedRecord[]): Promise<AddResult> {
    const now = this.clock.now();
    const cutoff = this.horizon(now);
    // The TTL outlives every stored event's retention by a day; it never decides a count.
    const ttl = this.retentionMs + this.maxFutureSkewMs + DAY_MS;
    const byUser = new Map<string, (number | Buffer)[]>();
    let expired = 0;
    let total = 0;
    for (const r of records) {
      this.checkTimestamp(r, now);
      if (r.timestamp < cutoff) {
        expired++;
        continue;
      }
      total++;
      let args = byUser.get(r.userId);
      if (!args) {
        args = [];
        byUser.set(r.userId, args);
      }
      args.push(r.timestamp, r.member);
    }
    if (byUser.size === 0) return { added: 0, duplicates: 0, expired };
    let added = 0;
    const memberLength = this.schema.current.memberLength;
    const ingest = (userId: string, args: (number | Buffer)[]) =>
      this.redis.countingIngest(this.key(userId), this.logKey(userId), cutoff, ttl, memberLength, ...args);
    const lostSets: [string, (number | Buffer)[]][] = [];
    if (byUser.size === 1) {
      const [[userId, args]] = [...byUser] as [[string, (number | Buffer)[]]];
      const n = await ingest(userId, args);
      if (n === -1) lostSets.push([userId, args]);
      else added = n;
    } else {
      await this.ready();
      const users = [...byUser];
      const results = await pipelineByNode(
        this.redis,
        users,
        ([userId]) => this.key(userId),
        (p, [userId, args]) =>
          p.countingIngest(this.key(userId), this.logKey(userId), cutoff, ttl, memberLength, ...args),
      );
      results.forEach(([error, value], i) => {
        if (error) throw error;
        if (value === -1) lostSets.push(users[i] as [string, (number | Buffer)[]]);
        else added += value as number;
      });
    }
    // Rare: a user's set was lost while its log survived. Rebuild, then add as usual.
    for (const [userId, args] of lostSets) {
      await this.repairSet(userId, cutoff, ttl);
      const n = await ingest(userId, args);
      if (n === -1) throw new Error(`Event set of user ${userId} is still missing after its repair.`);
      added += n;
    }
    return { added, duplicates: total - added, expired };
  }

  /**
   * Rebuilds a user's event set from the packed log (after the set alone was evicted or
   * deleted). The log holds each distinct event once, so it restores the dedup exactly.
   * Bytes that do not parse as a known layout end the scan: what follows cannot be trusted.
   */
  private async repairSet(userId: string, cutoff: number, ttl: number): Promise<void> {
    const log = await this.eventLog(userId);
    const pairs: (number | Buffer)[] = [];
    for (let at = 0; at < log.length; ) {
      const layout = this.schema.layouts.get(log[at] as number);
      if (!layout || at + layout.memberLength > log.length) break;
      const member = log.subarray(at, at + layout.memberLength);
      // The u64 timestamp at offset 1; its top two bytes are zero (≤ 2^53 − 1, validated on ingest).
      pairs.push(member.readUIntBE(3, 6), member);
      at += layout.memberLength;
    }
    await this.redis.countingRepair(this.key(userId), this.logKey(userId), cutoff, ttl, ...pairs);
  }

  /**
   * The user's packed event log: stored members back to back (each self-delimiting by its
   * version byte), in arrival order, possibly including expired members not yet compacted away.
   * One GET; callers filter by timestamp.
   */
  async eventLog(userId: string): Promise<Buffer> {
    return (await this.redis.getBuffer(this.logKey(userId))) ?? Buffer.alloc(0);
  }

  /**
   * Answers several count queries (each with several ranges, filters, group-by) for one user
   * with one Redis command.
   */
  async count(userId: string, queries: readonly CountQuery[]): Promise<RangeCount[][]> {
    const now = this.clock.now();
    for (const [i, q] of queries.entries()) {
      for (const [j, r] of q.ranges.entries()) checkRange(r, `count query ${i} range ${j}`);
    }
    const span = spanOf(queries);
    if (!Number.isFinite(span.from) || span.to <= this.horizon(now)) {
      return countMembers(Buffer.alloc(0), queries, this.horizon(now), this.schema);
    }
    return countMembers(await this.eventLog(userId), queries, this.horizon(now), this.schema);
  }

  /**
   * Answers the SQL-like text form (see shared/counting/sql.ts), e.g.
   * `SELECT COUNT(*) FROM actions WHERE user = 42 AND action = 'click' AND time > now() - 7d GROUP BY campaign`.
   */
  async countText(text: string): Promise<RangeCount> {
    const { userId, query } = parseCountQuery(text, this.clock.now(), this.schema);
    const [[result]] = (await this.count(userId, [query])) as [[RangeCount]];
    return result;
  }

  /**
   * Frequency-cap check of all candidates of an ad request: one ZRANGEBYSCORE for the user, the
   * rest in process. The strictest cap wins; rejected candidates say which cap hit.
   */
  async checkFrequencyCaps(request: CapCheckRequest): Promise<CapCheckResult> {
    const now = this.clock.now();
    const log = request.candidates.length > 0 ? await this.eventLog(request.userId) : Buffer.alloc(0);
    return evaluateCaps(log, request.candidates, now, this.horizon(now), this.schema);
  }

  /** Waits for a cluster client's slot map (pipelineByNode groups by it). */
  private async ready(): Promise<void> {
    const redis = this.redis;
    if (!(redis instanceof Cluster) || redis.status === 'ready') return;
    await new Promise<void>((resolve, reject) => {
      const onReady = () => {
        redis.off('error', onError);
        resolve();
      };
      const onError = (error: Error) => {
        redis.off('ready', onReady);
        reject(error);
      };
      redis.once('ready', onReady);
      redis.once('error', onError);
    });
  }
}
