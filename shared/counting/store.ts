/**
 * Redis (ElastiCache) adapter of the action-counting store.
 *
 * Key schema v2 (docs/counting.md is the contract other languages read), per user, one slot
 * thanks to the `{userId}` hash tag:
 *   `act:v2:{<userId>}`     sorted set of the user's counted occurrences, score = timestamp (ms):
 *                           the latest occurrence of an event identity is stored as the identity
 *                           (member without timestamp), earlier ones as their full member — the
 *                           writer's structure (dedup by identity within the window, retention);
 *   `act:v2:{<userId>}:log` string; the counted members back to back — what readers GET: a
 *                           whole ad request's counts or cap check is one GET of one value.
 *
 * Dedup (Aperture's rule, DESIGN.md requirement 7): an event's identity is its member without the
 * timestamp; an arrival whose identity has a counted occurrence less than the dedup window away
 * (either side) is a duplicate, whatever its timestamp, so the first occurrence seen is the one
 * counted; identical bytes are always a duplicate. Retention is enforced from the injected clock:
 * reads ignore events older than now − retention whether or not a write has trimmed them yet;
 * writes keep dedup state for retention + window, trim and compact; TTLs only reclaim idle users'
 * memory.
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
import { actionEventSchema, checkEventTime, type DecodedRecord, type EventSchema } from './schema.js';
import { parseCountQuery } from './sql.js';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /**
     * Adds one user's arrivals (dedup by identity within the window), repairs a partially lost
     * key group, imports the user's v1 keys on first touch, trims past retention + window,
     * compacts the log, refreshes the TTLs. KEYS: set, log, v1 set, v1 log. ARGV: trimBeforeMs,
     * windowMs, ttlMs, layout lengths (`v:len,…`), import v1 (`1`/`0`), then timestamp/member
     * pairs. Returns [counted, re-stamped duplicates, key group repaired (0/1), v1 imported (0/1)].
     */
    countingIngest(
      setKey: string,
      logKey: string,
      v1SetKey: string,
      v1LogKey: string,
      trimBeforeMs: string,
      windowMs: string,
      ttlMs: string,
      layoutLengths: string,
      importV1: '0' | '1',
      ...timestampMembers: (number | Buffer)[]
    ): Result<[number, number, number, number], Context>;
  }
}

/**
 * One script per user and batch, so a reader never sees the set and the log disagree and the
 * whole update costs one round trip. The hot path of an arrival is ZADD NX of its identity (new
 * identity: counted) + APPEND; only an identity already present costs a ZSCORE (and, when the
 * arrival is a window or more *before* the latest occurrence, a ZRANGEBYSCORE of the occurrences
 * near it).
 *
 * Invariants of the key group (checked on every call; docs/counting.md):
 *  I1 every member of the set is one counted occurrence: per identity at most one identity-form
 *     member (the latest occurrence, score = its timestamp) and earlier occurrences as full
 *     members (score = their timestamp); two occurrences of an identity are ≥ window apart;
 *  I2 the log is the full members of exactly those occurrences, each once (plus members older
 *     than the trim point until the next compaction), so STRLEN(log) ≥ ZCARD × member length;
 *  I3 both keys exist or neither does (same TTL, written together). Redis loses whole keys
 *     (eviction, expiry, a stray DEL), never parts of one, so I3 is what a fault breaks: a
 *     missing key is rebuilt from the other before anything is counted — a lost set would
 *     otherwise make every redelivery count again, a lost log would under-count.
 * Expired members stay in the log until it is compacted (readers skip them by timestamp): a
 * rewrite when ≥ 25 % of it is garbage keeps compaction amortised O(1) per event.
 */
const INGEST_LUA = `
local set, log, oldSet, oldLog = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local trim = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local near = window > 0 and window - 1 or 0
-- Member length by layout version, parsed only when needed (the common path never needs it).
local lengths, shortest = nil, nil
local function lengthOf(v)
  if not lengths then
    lengths = {}
    for version, n in string.gmatch(ARGV[4], '(%d+):(%d+)') do
      lengths[tonumber(version)] = tonumber(n)
      if not shortest or tonumber(n) < shortest then shortest = tonumber(n) end
    end
  end
  return v and lengths[v]
end

-- Timestamp of a full member: u64 at bytes 2..9; wider than 48 bits is never valid (-1).
local function tsOf(m)
  local a, b, c, d, e, f, g, h = string.byte(m, 2, 9)
  if a ~= 0 or b ~= 0 then return -1 end
  return ((((c * 256 + d) * 256 + e) * 256 + f) * 256 + g) * 256 + h
end
local function identityOf(m) return string.sub(m, 1, 1) .. string.sub(m, 10) end
local function isFull(x) return #x == lengthOf(string.byte(x, 1)) end
local function fullOf(id, ts)
  local b = {0, 0, 0, 0, 0, 0, 0, 0}
  for i = 8, 3, -1 do b[i] = ts % 256; ts = (ts - b[i]) / 256 end
  return string.sub(id, 1, 1) .. string.char(unpack(b)) .. string.sub(id, 2)
end
-- Calls fn(member, ts) for each member of a packed log; false at a layout it does not know.
local function walk(buf, fn)
  local p, n = 1, #buf
  while p <= n do
    local len = lengthOf(string.byte(buf, p))
    if not len then return false end
    local m = string.sub(buf, p, p + len - 1)
    fn(m, tsOf(m))
    p = p + len
  end
  return true
end

-- An arrival: 0 = counted (recorded in the set), 1 = the same bytes again, 2 = the same
-- identity less than a window from a counted occurrence (re-stamped).
local function arrive(m, ts)
  local id = identityOf(m)
  if redis.call('ZADD', set, 'NX', ts, id) == 1 then return 0 end
  local s = tonumber(redis.call('ZSCORE', set, id))
  if ts == s then return 1 end
  if ts >= s + window then
    redis.call('ZADD', set, s, fullOf(id, s))
    redis.call('ZADD', set, ts, id)
    return 0
  end
  if ts > s - window then return 2 end
  for _, x in ipairs(redis.call('ZRANGEBYSCORE', set, ts - near, ts + near)) do
    if isFull(x) and identityOf(x) == id then
      if x == m then return 1 end
      return 2
    end
  end
  redis.call('ZADD', set, ts, m)
  return 0
end

-- Records an occurrence already known to be counted (rebuilding the set from the log).
local function record(m, ts)
  local id = identityOf(m)
  if redis.call('ZADD', set, 'NX', ts, id) == 1 then return end
  local s = tonumber(redis.call('ZSCORE', set, id))
  if ts > s then
    redis.call('ZADD', set, s, fullOf(id, s))
    redis.call('ZADD', set, ts, id)
  elseif ts < s then
    redis.call('ZADD', set, ts, m)
  end
end

local added, restamped, repaired, migrated, touched = 0, 0, 0, 0, false
local present = redis.call('EXISTS', set, log)
if present == 1 then
  repaired, touched = 1, true
  if redis.call('EXISTS', set) == 1 then
    local parts, all = {}, redis.call('ZRANGE', set, 0, -1, 'WITHSCORES')
    for i = 1, #all, 2 do
      local x = all[i]
      parts[#parts + 1] = isFull(x) and x or fullOf(x, tonumber(all[i + 1]))
    end
    redis.call('SET', log, table.concat(parts))
  else
    walk(redis.call('GET', log), function(m, ts) if ts >= trim then record(m, ts) end end)
  end
elseif present == 0 and ARGV[5] == '1' and redis.call('EXISTS', oldSet, oldLog) > 0 then
  -- First v2 write for a user with v1 keys: replay them through the v2 rule, then drop them.
  migrated, touched = 1, true
  local function take(m, ts)
    if ts >= trim and arrive(m, ts) == 0 then redis.call('APPEND', log, m) end
  end
  if redis.call('EXISTS', oldLog) == 1 then
    walk(redis.call('GET', oldLog), take)
  else
    for _, m in ipairs(redis.call('ZRANGE', oldSet, 0, -1)) do take(m, tsOf(m)) end
  end
  redis.call('UNLINK', oldSet, oldLog)
end

for i = 6, #ARGV, 2 do
  local m = ARGV[i + 1]
  local r = arrive(m, tonumber(ARGV[i]))
  if r == 0 then
    redis.call('APPEND', log, m)
    added = added + 1
  elseif r == 2 then
    restamped = restamped + 1
  end
end

local removed = redis.call('ZREMRANGEBYSCORE', set, '-inf', '(' .. ARGV[1])
if removed > 0 then
  local card = redis.call('ZCARD', set)
  if card == 0 then
    redis.call('DEL', set, log)
    return {added, restamped, repaired, migrated}
  end
  local len = redis.call('STRLEN', log)
  lengthOf(nil)
  if (len - card * shortest) * 4 > len then
    local kept = {}
    if walk(redis.call('GET', log), function(m, ts) if ts >= trim then kept[#kept + 1] = m end end) then
      redis.call('SET', log, table.concat(kept))
      touched = true
    end
  end
end
-- A pure redelivery changes nothing, so it need not extend the TTLs either. (SET drops a TTL.)
if added > 0 or touched then
  redis.call('PEXPIRE', set, ARGV[3])
  redis.call('PEXPIRE', log, ARGV[3])
end
return {added, restamped, repaired, migrated}
`;

/** Version of the key schema; part of every key. v1 deduplicated on the full bytes only. */
export const KEY_SCHEMA_VERSION = 2;

/** The Redis key of a user's occurrence set (dedup, retention order). */
export function userKey(userId: string, prefix = 'act', version = KEY_SCHEMA_VERSION): string {
  return `${prefix}:v${version}:{${userId}}`;
}

/** The Redis key of a user's packed event log (what readers GET). Same slot as {@link userKey}. */
export function userLogKey(userId: string, prefix = 'act', version = KEY_SCHEMA_VERSION): string {
  return `${prefix}:v${version}:{${userId}}:log`;
}

/** Options of {@link ActionStore}. */
export interface ActionStoreOptions {
  readonly redis: RedisClient;
  readonly clock: Clock;
  /** Days of events kept and counted (1–90). @default 30 */
  readonly retentionDays?: number;
  /**
   * Dedup window, ms: an event whose identity (everything but the timestamp) was counted less
   * than this far from its timestamp, either side, is a duplicate. 0 keeps only exact-bytes
   * dedup. At most the retention. Only the writer (ingest) uses it. @default 86400000 (1 day)
   */
  readonly dedupWindowMs?: number;
  /** How far ahead of the clock an event's timestamp may be before it is rejected. @default 900000 (15 min) */
  readonly maxFutureSkewMs?: number;
  /** Key prefix. @default 'act' */
  readonly keyPrefix?: string;
  /** @default actionEventSchema */
  readonly schema?: EventSchema;
  /**
   * Upgrade from key schema v1: writes import a user's v1 keys on the user's first v2 write,
   * reads fall back to the v1 log while a user has no v2 log. Turn off once no v1 key can exist
   * any more (retention + 1 day + skew after the upgrade: v1 keys expire by then).
   * @default true
   */
  readonly legacyV1Keys?: boolean;
}

/** Outcome of {@link ActionStore.add}. */
export interface AddResult {
  /** Events counted for the first time. */
  readonly added: number;
  /** Duplicates: the same bytes again, or the same identity within the dedup window. */
  readonly duplicates: number;
  /** Of the duplicates, those with another timestamp than the counted occurrence (re-stamped). */
  readonly restamped: number;
  /** Events older than the retention: not stored, they could never be counted. */
  readonly expired: number;
  /** Users whose key group was partially lost (one key gone) and rebuilt before counting. */
  readonly repaired: number;
  /** Users whose v1 keys were imported into v2 keys by this call. */
  readonly migrated: number;
}

/** Frequency-cap check request: one user, all candidates of one ad request. */
export interface CapCheckRequest {
  readonly userId: string;
  readonly candidates: readonly CapCandidate[];
}

const EMPTY = Buffer.alloc(0);

/** Redis-backed store and query API of user-action events. */
export class ActionStore {
  readonly retentionMs: number;
  readonly dedupWindowMs: number;
  readonly maxFutureSkewMs: number;
  private readonly redis: RedisClient;
  private readonly clock: Clock;
  private readonly prefix: string;
  private readonly schema: EventSchema;
  private readonly legacyV1Keys: boolean;
  /** `version:memberLength,…` of every known layout, for the script's log walks. */
  private readonly layoutLengths: string;
  /** Script arguments that never change, as the strings sent (not converted per call). */
  private readonly windowArg: string;
  private readonly ttlArg: string;

  constructor(options: ActionStoreOptions) {
    const days = options.retentionDays ?? 30;
    if (!Number.isInteger(days) || days < 1 || days > 90) {
      throw new RangeError(`retentionDays is ${days}: give an integer from 1 to 90 (default 30).`);
    }
    this.retentionMs = days * DAY_MS;
    const window = options.dedupWindowMs ?? DAY_MS;
    if (!Number.isSafeInteger(window) || window < 0 || window > this.retentionMs) {
      throw new RangeError(
        `dedupWindowMs is ${window}: give an integer number of ms from 0 (exact-bytes dedup only) ` +
          `to the retention (${this.retentionMs}); default ${DAY_MS} (one day).`,
      );
    }
    this.dedupWindowMs = window;
    this.maxFutureSkewMs = options.maxFutureSkewMs ?? 15 * MINUTE_MS;
    this.redis = options.redis;
    this.clock = options.clock;
    this.prefix = options.keyPrefix ?? 'act';
    this.schema = options.schema ?? actionEventSchema;
    this.legacyV1Keys = options.legacyV1Keys ?? true;
    this.layoutLengths = [...this.schema.layouts.values()]
      .map((l) => `${l.version}:${l.memberLength}`)
      .join(',');
    this.windowArg = String(window);
    // The TTL outlives every stored event's dedup state by a day; it never decides a count.
    this.ttlArg = String(this.retentionMs + window + this.maxFutureSkewMs + DAY_MS);
    // Redefining is harmless (same script): several stores may share one client.
    this.redis.defineCommand('countingIngest', { numberOfKeys: 4, lua: INGEST_LUA });
  }

  /** The user's occurrence-set key. */
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
    checkEventTime(record.timestamp, now, this.maxFutureSkewMs);
  }

  /**
   * Stores decoded events (idempotent: storing an event again changes nothing). One script call
   * per user, pipelined per cluster node; a user's events are applied in the order given (the
   * first occurrence of an identity is the one counted). Errors (Redis down) propagate: the
   * caller retries.
   */
  async add(records: readonly DecodedRecord[]): Promise<AddResult> {
    const now = this.clock.now();
    const cutoff = this.horizon(now);
    // Dedup state outlives the counting horizon by a window: an arrival inside the retention
    // can be a duplicate of an occurrence up to a window older than the horizon.
    const trimBefore = String(cutoff - this.dedupWindowMs);
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
    const result = { added: 0, duplicates: 0, restamped: 0, expired, repaired: 0, migrated: 0 };
    if (byUser.size === 0) return result;
    const importV1 = this.legacyV1Keys ? '1' : '0';
    const call = (userId: string, args: (number | Buffer)[]) =>
      [
        this.key(userId),
        this.logKey(userId),
        userKey(userId, this.prefix, 1),
        userLogKey(userId, this.prefix, 1),
        trimBefore,
        this.windowArg,
        this.ttlArg,
        this.layoutLengths,
        importV1,
        ...args,
      ] as const;
    const tally = ([added, restamped, repaired, migrated]: [number, number, number, number]) => {
      result.added += added;
      result.restamped += restamped;
      result.repaired += repaired;
      result.migrated += migrated;
    };
    if (byUser.size === 1) {
      const [[userId, args]] = [...byUser] as [[string, (number | Buffer)[]]];
      tally(await this.redis.countingIngest(...call(userId, args)));
    } else {
      await this.ready();
      const results = await pipelineByNode(
        this.redis,
        [...byUser],
        ([userId]) => this.key(userId),
        (p, [userId, args]) => p.countingIngest(...call(userId, args)),
      );
      for (const [error, value] of results) {
        if (error) throw error;
        tally(value as [number, number, number, number]);
      }
    }
    result.duplicates = total - result.added;
    return result;
  }

  /**
   * The user's packed event log: stored members back to back (each self-delimiting by its
   * version byte), in arrival order, possibly including expired members not yet compacted away.
   * One GET; callers filter by timestamp.
   */
  async eventLog(userId: string): Promise<Buffer> {
    const log = await this.redis.getBuffer(this.logKey(userId));
    if (log !== null || !this.legacyV1Keys) return log ?? EMPTY;
    // Not written since the upgrade: its v1 log (if any) is still the user's history.
    return (await this.redis.getBuffer(userLogKey(userId, this.prefix, 1))) ?? EMPTY;
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
      return countMembers(EMPTY, queries, this.horizon(now), this.schema);
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
   * Frequency-cap check of all candidates of an ad request: one GET of the user's log, the rest
   * in process. The strictest cap wins; rejected candidates say which cap hit.
   */
  async checkFrequencyCaps(request: CapCheckRequest): Promise<CapCheckResult> {
    const now = this.clock.now();
    const log = request.candidates.length > 0 ? await this.eventLog(request.userId) : EMPTY;
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
