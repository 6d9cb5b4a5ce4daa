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

/** Arguments of the ingest script: keys, the trim point, the settings, timestamp/member pairs. */
type CountingIngestArgs = [
  setKey: string,
  logKey: string,
  trimBeforeMs: string,
  settings: string,
  ...timestampMembers: (number | Buffer)[],
];
/** The same with the user's v1 keys: the first call of the day for a user (maintenance). */
type CountingMaintainArgs = [
  setKey: string,
  logKey: string,
  v1SetKey: string,
  v1LogKey: string,
  trimBeforeMs: string,
  settings: string,
  ...timestampMembers: (number | Buffer)[],
];

/**
 * The script's outcome packed in one integer: counted + 2^20 × re-stamped duplicates + 2^40 ×
 * key group repaired (0/1) + 2^41 × v1 imported (0/1).
 */
type IngestReply = number;
/** One user's script call: a plain one, or the day's first (maintenance, with the v1 keys). */
type IngestCall =
  | { readonly maintain: false; readonly args: CountingIngestArgs }
  | { readonly maintain: true; readonly args: CountingMaintainArgs };

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /**
     * Adds one user's arrivals (dedup by identity within the window) and repairs a partially
     * lost key group. KEYS: set, log. ARGV: trimBeforeMs, settings (`<ttlMs> <windowMs>
     * <importV1 0|1> <version:memberLength,…>`), then timestamp/member pairs. Returns the outcome
     * packed in one integer ({@link IngestReply}).
     */
    countingIngest(...args: CountingIngestArgs): Result<IngestReply, Context>;
    /**
     * {@link countingIngest} that also maintains the group (trims past retention + window,
     * compacts the log, refreshes the TTLs) and imports the user's v1 keys into a new group.
     * KEYS: set, log, v1 set, v1 log. The same script: the first call of the day for a user.
     */
    countingIngestMaintain(...args: CountingMaintainArgs): Result<IngestReply, Context>;
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
-- Helpers of the rare paths (a repair, a v1 import, a compaction, an arrival a window or more
-- from its identity's latest occurrence). Built only when one is taken: a function created on
-- every call, with upvalues, cost more than the whole hot path (an arrival whose identity is
-- new: ZADD NX + APPEND). This one captures nothing, so defining it is cheap.
local function helpers(set, log, settings)
  local h = {}
  -- settings: "<ttlMs> <windowMs> <importV1 0|1> <version:memberLength,…>"
  local window = tonumber(string.match(settings, '^%d+ (%d+) '))
  local near = window > 0 and window - 1 or 0
  local lengths = {}
  for version, n in string.gmatch(string.match(settings, ' ([%d:,]*)$'), '(%d+):(%d+)') do
    lengths[tonumber(version)] = tonumber(n)
    if not h.shortest or tonumber(n) < h.shortest then h.shortest = tonumber(n) end
  end
  -- Timestamp of a full member: u64 at bytes 2..9; wider than 48 bits is never valid (-1).
  local function tsOf(m)
    local a, b, c, d, e, f, g, i = string.byte(m, 2, 9)
    if a ~= 0 or b ~= 0 then return -1 end
    return ((((c * 256 + d) * 256 + e) * 256 + f) * 256 + g) * 256 + i
  end
  local function identityOf(m) return string.sub(m, 1, 1) .. string.sub(m, 10) end
  local function isFull(x) return #x == lengths[string.byte(x, 1)] end
  local function fullOf(id, ts)
    local b = {0, 0, 0, 0, 0, 0, 0, 0}
    for i = 8, 3, -1 do b[i] = ts % 256; ts = (ts - b[i]) / 256 end
    return string.sub(id, 1, 1) .. string.char(unpack(b)) .. string.sub(id, 2)
  end
  h.tsOf, h.isFull, h.fullOf = tsOf, isFull, fullOf
  -- Calls fn(member, ts) for each member of a packed log; false at a layout it does not know.
  function h.walk(buf, fn)
    local p, n = 1, #buf
    while p <= n do
      local len = lengths[string.byte(buf, p)]
      if not len then return false end
      local m = string.sub(buf, p, p + len - 1)
      fn(m, tsOf(m))
      p = p + len
    end
    return true
  end
  -- An arrival a window or more from its identity's latest occurrence s.
  function h.beyond(m, id, ts, s)
    if ts > s then
      -- The new latest: the previous one becomes a full member.
      redis.call('ZADD', set, s, fullOf(id, s))
      redis.call('ZADD', set, ts, id)
      return 0
    end
    -- Earlier: compare with the earlier occurrences less than a window from it.
    for _, x in ipairs(redis.call('ZRANGEBYSCORE', set, ts - near, ts + near)) do
      if isFull(x) and identityOf(x) == id then
        if x == m then return 1 end
        return 2
      end
    end
    redis.call('ZADD', set, ts, m)
    return 0
  end
  -- An arrival: 0 = counted (recorded in the set), 1 = the same bytes again, 2 = the same
  -- identity less than a window from a counted occurrence (re-stamped).
  function h.arrive(m, ts)
    local id = identityOf(m)
    if redis.call('ZADD', set, 'NX', ts, id) == 1 then return 0 end
    local s = tonumber(redis.call('ZSCORE', set, id))
    if ts == s then return 1 end
    if math.abs(ts - s) < window then return 2 end
    return h.beyond(m, id, ts, s)
  end
  -- Records an occurrence already known to be counted (rebuilding the set from the log).
  function h.record(m, ts)
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
  return h
end

-- KEYS: the user's set and log, and — in the first call of the day for the user (the client
-- keeps count) — the user's v1 set and log: that call also maintains the group (trim, compact,
-- TTL) and imports v1 keys into a new group.
local set, log, oldSet, oldLog = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local maintain = oldLog ~= nil
-- Trim point: now − retention − window.
local trim = tonumber(ARGV[1])
local H, window

local added, restamped, repaired, migrated, touched = 0, 0, 0, 0, false
-- One integer (an array reply costs the client more to parse): counted + 2^20 × re-stamped +
-- 2^40 × repaired + 2^41 × migrated (a call carries far fewer than 2^20 arrivals).
local function outcome()
  return added + restamped * 1048576 + repaired * 1099511627776 + migrated * 2199023255552
end
local present = redis.call('EXISTS', set, log)
if present == 1 then
  -- I3 broken: rebuild the missing key from the other before judging any arrival.
  H = helpers(set, log, ARGV[2])
  repaired, touched = 1, true
  if redis.call('EXISTS', set) == 1 then
    local parts, all = {}, redis.call('ZRANGE', set, 0, -1, 'WITHSCORES')
    for i = 1, #all, 2 do
      local x = all[i]
      parts[#parts + 1] = H.isFull(x) and x or H.fullOf(x, tonumber(all[i + 1]))
    end
    redis.call('SET', log, table.concat(parts))
  else
    H.walk(redis.call('GET', log), function(m, ts) if ts >= trim then H.record(m, ts) end end)
  end
elseif present == 0 and maintain and string.match(ARGV[2], '^%d+ %d+ 1 ')
    and redis.call('EXISTS', oldSet, oldLog) > 0 then
  -- First v2 write for a user with v1 keys: replay them through the v2 rule, then drop them.
  H = helpers(set, log, ARGV[2])
  migrated, touched = 1, true
  local function take(m, ts)
    if ts >= trim and H.arrive(m, ts) == 0 then redis.call('APPEND', log, m) end
  end
  if redis.call('EXISTS', oldLog) == 1 then
    H.walk(redis.call('GET', oldLog), take)
  else
    for _, m in ipairs(redis.call('ZRANGE', oldSet, 0, -1)) do take(m, H.tsOf(m)) end
  end
  redis.call('UNLINK', oldSet, oldLog)
end

for i = 3, #ARGV, 2 do
  local m = ARGV[i + 1]
  local id = string.sub(m, 1, 1) .. string.sub(m, 10)
  local r = 0
  -- The hot path: a new identity is counted (ZADD NX of the identity, APPEND of the member).
  if redis.call('ZADD', set, 'NX', ARGV[i], id) == 0 then
    local ts, s = tonumber(ARGV[i]), tonumber(redis.call('ZSCORE', set, id))
    window = window or tonumber(string.match(ARGV[2], '^%d+ (%d+) '))
    if ts == s then
      r = 1
    elseif math.abs(ts - s) < window then
      r = 2
    else
      H = H or helpers(set, log, ARGV[2])
      r = H.beyond(m, id, ts, s)
    end
  end
  if r == 0 then
    redis.call('APPEND', log, m)
    added = added + 1
  elseif r == 2 then
    restamped = restamped + 1
  end
end

-- Outside maintenance a pure redelivery changes nothing.
if added == 0 and not touched and not maintain then return outcome() end
-- Trimming only reclaims memory (readers and the dedup rule ignore what is past the trim point),
-- so once a day per user is enough.
if maintain and redis.call('ZREMRANGEBYSCORE', set, '-inf', '(' .. trim) > 0 then
  local card = redis.call('ZCARD', set)
  if card == 0 then
    redis.call('DEL', set, log)
    return outcome()
  end
  H = H or helpers(set, log, ARGV[2])
  local len = redis.call('STRLEN', log)
  if (len - card * H.shortest) * 4 > len then
    local kept = {}
    if H.walk(redis.call('GET', log), function(m, ts) if ts >= trim then kept[#kept + 1] = m end end) then
      redis.call('SET', log, table.concat(kept))
      touched = true
    end
  end
end
-- Both keys get the TTL together (I3): at maintenance, and whenever a key is new, rebuilt or
-- rewritten (SET drops a TTL). The TTL has a day of slack over what it must cover, and the
-- client maintains each user it writes at least once a day.
if maintain or touched or present ~= 2 then
  local ttl = string.match(ARGV[2], '^%d+')
  redis.call('PEXPIRE', set, ttl)
  redis.call('PEXPIRE', log, ttl)
end
return outcome()
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

/** Users remembered as maintained today, per store; beyond it the memory is cleared (re-maintains). */
const MAINTAINED_USERS_MAX = 200_000;

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
  /** The script's settings argument (never changes: built once, not per call). */
  private readonly settingsArg: string;
  /**
   * Users this store maintained (trim, compaction, TTL refresh, v1 import) on `maintainedDay`
   * of the injected clock: each user written is maintained at least once a (clock) day per
   * process, which is what the TTL's day of slack relies on.
   */
  private readonly maintained = new Set<string>();
  private maintainedDay = Number.NaN;

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
    // The TTL outlives every stored event's dedup state by a day: the slack between two daily
    // maintenances of a user. It never decides a count.
    const ttl = this.retentionMs + window + this.maxFutureSkewMs + DAY_MS;
    const layouts = [...this.schema.layouts.values()].map((l) => `${l.version}:${l.memberLength}`).join(',');
    this.settingsArg = `${ttl} ${window} ${this.legacyV1Keys ? 1 : 0} ${layouts}`;
    // Redefining is harmless (same script): several stores may share one client.
    this.redis.defineCommand('countingIngest', { numberOfKeys: 2, lua: INGEST_LUA });
    this.redis.defineCommand('countingIngestMaintain', { numberOfKeys: 4, lua: INGEST_LUA });
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
    const day = Math.floor(now / DAY_MS);
    if (day !== this.maintainedDay || this.maintained.size >= MAINTAINED_USERS_MAX) {
      this.maintained.clear();
      this.maintainedDay = day;
    }
    // Per user, the script's whole argument list, built once (the client's CPU is the
    // bottleneck); the first call of the day for a user carries its v1 keys and maintains it.
    const byUser = new Map<string, IngestCall>();
    let expired = 0;
    let total = 0;
    for (const r of records) {
      this.checkTimestamp(r, now);
      if (r.timestamp < cutoff) {
        expired++;
        continue;
      }
      total++;
      let call = byUser.get(r.userId);
      if (!call) {
        const tag = `${this.prefix}:v${KEY_SCHEMA_VERSION}:{${r.userId}}`;
        if (this.maintained.has(r.userId)) {
          call = { maintain: false, args: [tag, `${tag}:log`, trimBefore, this.settingsArg] };
        } else {
          const v1 = `${this.prefix}:v1:{${r.userId}}`;
          call = { maintain: true, args: [tag, `${tag}:log`, v1, `${v1}:log`, trimBefore, this.settingsArg] };
        }
        byUser.set(r.userId, call);
      }
      call.args.push(r.timestamp, r.member);
    }
    const result = { added: 0, duplicates: 0, restamped: 0, expired, repaired: 0, migrated: 0 };
    if (byUser.size === 0) return result;
    const tally = (userId: string, call: IngestCall, reply: IngestReply) => {
      result.added += reply % 2 ** 20;
      result.restamped += Math.floor(reply / 2 ** 20) % 2 ** 20;
      result.repaired += Math.floor(reply / 2 ** 40) % 2;
      result.migrated += Math.floor(reply / 2 ** 41) % 2;
      // Maintained once the call that maintains it succeeded.
      if (call.maintain) this.maintained.add(userId);
    };
    if (byUser.size === 1) {
      const [entry] = byUser;
      const [userId, call] = entry as [string, IngestCall];
      const reply = call.maintain
        ? await this.redis.countingIngestMaintain(...call.args)
        : await this.redis.countingIngest(...call.args);
      tally(userId, call, reply);
    } else {
      await this.ready();
      const users = [...byUser];
      const results = await pipelineByNode(
        this.redis,
        users,
        ([, call]) => call.args[0],
        (p, [, call]) => {
          if (call.maintain) p.countingIngestMaintain(...call.args);
          else p.countingIngest(...call.args);
        },
      );
      let failure: Error | undefined;
      results.forEach(([error, value], i) => {
        const [userId, call] = users[i] as [string, IngestCall];
        if (error) failure ??= error;
        else tally(userId, call, value as IngestReply);
      });
      if (failure) throw failure;
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
