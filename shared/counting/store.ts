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
import { type RedisClient, slotOf, slotsReady } from '../redis/connect.js';
import { clientValueReader, RawValueReader, type ValueReader } from '../redis/raw-get.js';
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

/** Arguments of the ingest script: the first user's keys (routing), then the call's data. */
type CountingIngestArgs = [
  setKey: string,
  logKey: string,
  trimBeforeMs: string,
  settings: string,
  keyPrefix: string,
  arrivals: Buffer,
];

/** The script's totals over the call's users: counted, re-stamped, repaired, migrated from v1. */
type IngestReply = [added: number, restamped: number, repaired: number, migrated: number];

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /**
     * Adds the arrivals of one or more users (dedup by identity within the window), repairs a
     * partially lost key group, and maintains (trim, compaction, TTL, v1 import) the users
     * flagged for it. KEYS: the first user's set and log (they route the call). ARGV:
     * trimBeforeMs, settings (`<ttlMs> <windowMs> <importV1 0|1> <version:memberLength,…>`), the
     * key prefix, and the packed arrivals ({@link packArrivals}). Every user's keys must live on
     * the node that receives the call: the script checks them all before writing anything.
     */
    countingIngest(...args: CountingIngestArgs): Result<IngestReply, Context>;
  }
}

/**
 * One script call per batch of users (per cluster node), not per user: a call's fixed cost
 * (ioredis builds a command, five promises and a buffer per call; Redis looks the script up and
 * sets up Lua per call) was most of an event's cost, because a batch rarely holds two events of
 * one user. All of a call's data is one packed argument: an argument costs the client far more
 * than its bytes. The hot path of an arrival is ZADD NX of its identity (new identity: counted)
 * + APPEND; only an identity already present costs a ZSCORE (and, when the arrival is a window
 * or more *before* the latest occurrence, a ZRANGEBYSCORE of the occurrences near it).
 *
 * Keys of several users in one call (several hash slots) need Redis ≥ 7.0 and the script flag
 * `allow-cross-slot-keys`; in a cluster they must all be on the receiving node. The script first
 * runs `EXISTS set log` for every user (the I3 check below): a key another node owns fails that
 * command, so a call routed with a stale slot map fails before it writes anything, and the store
 * retries its users one call each (each routed, and redirected, by its own keys).
 *
 * Invariants of a user's key group (checked on every call; docs/counting.md):
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
 *
 * Exported for tests and tools that call the script on one node directly; the store defines it
 * as `countingIngest`.
 */
export const INGEST_LUA = `#!lua flags=allow-cross-slot-keys
-- Helpers of the rare paths (a repair, a v1 import, a compaction, an arrival a window or more
-- from its identity's latest occurrence), built per user only when one is taken.
local function helpers(set, log, window, lengths)
  local h = {}
  local near = window > 0 and window - 1 or 0
  for _, n in pairs(lengths) do
    if not h.shortest or n < h.shortest then h.shortest = n end
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

-- ARGV: trim point (now − retention − window), settings, key prefix, packed arrivals: per user
-- [flags u8: 1 = maintain][user id length u8][user id][arrival count u32 BE][members back to
-- back, each delimited by its version's length]. A user flagged for maintenance (the first call
-- of the day for it; the client keeps count) is also trimmed, compacted, given its TTLs, and on
-- its first v2 write its v1 keys are imported.
local trim, settings, prefix, packed = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
local ttl, window, importV1 = string.match(settings, '^(%d+) (%d+) ([01]) ')
window = tonumber(window)
local lengths = {}
for version, n in string.gmatch(string.match(settings, ' ([%d:,]*)$'), '(%d+):(%d+)') do
  lengths[tonumber(version)] = tonumber(n)
end

-- Pass 1, before any write: parse the users and check every key group (EXISTS set log). In a
-- cluster a key this node does not own fails here, so a misrouted call writes nothing.
local users, pos, size = {}, 1, #packed
while pos <= size do
  local flags, idLength = string.byte(packed, pos, pos + 1)
  local uid = string.sub(packed, pos + 2, pos + 1 + idLength)
  local c1, c2, c3, c4 = string.byte(packed, pos + 2 + idLength, pos + 5 + idLength)
  if not c4 or idLength == 0 then return redis.error_reply('ERR countingIngest: malformed arrivals argument') end
  local count = ((c1 * 256 + c2) * 256 + c3) * 256 + c4
  pos = pos + 6 + idLength
  local first = pos
  for _ = 1, count do
    local len = lengths[string.byte(packed, pos) or -1]
    if not len then return redis.error_reply('ERR countingIngest: unknown layout version in arrivals') end
    pos = pos + len
  end
  if pos > size + 1 then return redis.error_reply('ERR countingIngest: truncated arrivals argument') end
  local tag = prefix .. ':v2:{' .. uid .. '}'
  local set, log = tag, tag .. ':log'
  users[#users + 1] = {set, log, flags, uid, first, count, redis.call('EXISTS', set, log)}
end
if #users == 0 or users[1][1] ~= KEYS[1] or users[1][2] ~= KEYS[2] then
  return redis.error_reply('ERR countingIngest: KEYS must be the first user\\'s set and log')
end

local added, restamped, repaired, migrated = 0, 0, 0, 0
for ui = 1, #users do
  local u = users[ui]
  local set, log, maintain, present, p = u[1], u[2], u[3] % 2 == 1, u[7], u[5]
  local H
  local touched, counted = false, {}
  if present == 1 then
    -- I3 broken: rebuild the missing key from the other before judging any arrival.
    H = helpers(set, log, window, lengths)
    repaired, touched = repaired + 1, true
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
  elseif present == 0 and maintain and importV1 == '1' then
    -- First v2 write for a user with v1 keys: replay them through the v2 rule, then drop them.
    local oldTag = prefix .. ':v1:{' .. u[4] .. '}'
    local oldSet, oldLog = oldTag, oldTag .. ':log'
    if redis.call('EXISTS', oldSet, oldLog) > 0 then
      H = helpers(set, log, window, lengths)
      migrated, touched = migrated + 1, true
      local function take(m, ts)
        if ts >= trim and H.arrive(m, ts) == 0 then counted[#counted + 1] = m end
      end
      if redis.call('EXISTS', oldLog) == 1 then
        H.walk(redis.call('GET', oldLog), take)
      else
        for _, m in ipairs(redis.call('ZRANGE', oldSet, 0, -1)) do take(m, H.tsOf(m)) end
      end
      redis.call('UNLINK', oldSet, oldLog)
    end
  end

  local imported = #counted
  for _ = 1, u[6] do
    local len = lengths[string.byte(packed, p)]
    local m = string.sub(packed, p, p + len - 1)
    local t1, t2, t3, t4, t5, t6 = string.byte(packed, p + 3, p + 8)
    local ts = ((((t1 * 256 + t2) * 256 + t3) * 256 + t4) * 256 + t5) * 256 + t6
    p = p + len
    local id = string.sub(m, 1, 1) .. string.sub(m, 10)
    local r = 0
    -- The hot path: a new identity is counted (ZADD NX of the identity, APPEND of the member).
    -- The score as an integer string: a Lua number would be formatted as a float (%.17g), a
    -- measurable share of Redis's time per event.
    if redis.call('ZADD', set, 'NX', string.format('%d', ts), id) == 0 then
      local s = tonumber(redis.call('ZSCORE', set, id))
      if ts == s then
        r = 1
      elseif math.abs(ts - s) < window then
        r = 2
      else
        H = H or helpers(set, log, window, lengths)
        r = H.beyond(m, id, ts, s)
      end
    end
    if r == 0 then
      counted[#counted + 1] = m
    elseif r == 2 then
      restamped = restamped + 1
    end
  end
  added = added + #counted - imported
  -- One APPEND per user: the log order is the arrival order all the same.
  if #counted > 0 then redis.call('APPEND', log, table.concat(counted)) end

  -- Trimming only reclaims memory (readers and the dedup rule ignore what is past the trim
  -- point), so once a day per user is enough; a group this call created holds nothing to trim
  -- (arrivals and imported v1 members are past the trim point). Outside maintenance a pure
  -- redelivery changes nothing.
  local gone = false
  if maintain and present ~= 0 and redis.call('ZREMRANGEBYSCORE', set, '-inf', '(' .. string.format('%d', trim)) > 0 then
    local card = redis.call('ZCARD', set)
    if card == 0 then
      redis.call('DEL', set, log)
      gone = true
    else
      H = H or helpers(set, log, window, lengths)
      local len = redis.call('STRLEN', log)
      if (len - card * H.shortest) * 4 > len then
        local kept = {}
        if H.walk(redis.call('GET', log), function(m, ts) if ts >= trim then kept[#kept + 1] = m end end) then
          redis.call('SET', log, table.concat(kept))
          touched = true
        end
      end
    end
  end
  -- Both keys get the TTL together (I3): at maintenance, and whenever a key is new, rebuilt or
  -- rewritten (SET drops a TTL). The TTL has a day of slack over what it must cover, and the
  -- client maintains each user it writes at least once a day.
  if not gone and (maintain or touched or (present ~= 2 and #counted > 0)) then
    redis.call('PEXPIRE', set, ttl)
    redis.call('PEXPIRE', log, ttl)
  end
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
  /**
   * Read logs over raw RESP connections handed straight to the counting code
   * (shared/redis/raw-get.ts), instead of through ioredis, which copies each reply and builds
   * objects per command: about half a cap check's client time (docs/counting.md, "Reads").
   * @default true
   */
  readonly rawReads?: boolean;
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

/** A read of a user's v2 log found no key (and v1 keys may still hold the history). */
const NO_LOG: unique symbol = Symbol('no v2 log');

/** Users remembered as maintained today, per store; beyond it the memory is cleared (re-maintains). */
const MAINTAINED_USERS_MAX = 200_000;

/**
 * Most arrivals one ingest script call carries (a user with more goes alone): a script blocks
 * Redis while it runs, and cap checks wait behind it — 256 arrivals are ≈ 1 ms of Redis time on
 * a slow host, while the per-call cost is already amortised to a fraction of a µs per event.
 */
export const MAX_ARRIVALS_PER_CALL = 256;

/** Longest user id (UTF-8 bytes) the packed arrivals argument carries (ids are decimal u64s). */
export const MAX_USER_ID_BYTES = 255;

/** One user's arrivals in one ingest call, in arrival order. */
export interface UserArrivals {
  readonly userId: string;
  /** Maintain the user's key group in this call (trim, compaction, TTL, v1 import). */
  readonly maintain: boolean;
  /** Stored members (wire records without the user id). */
  readonly members: readonly Buffer[];
}

/**
 * Packs users' arrivals into the ingest script's one data argument: per user
 * `[flags u8: 1 = maintain][user id length u8][user id, UTF-8][arrival count u32 BE]` then the
 * members back to back (each delimited by its layout version's length, as in the log). Length
 * prefixes, not separators: any byte may appear in an id or a member. Throws RangeError for an
 * empty or too long user id, or a member whose length is not its layout version's.
 */
export function packArrivals(
  users: readonly UserArrivals[],
  schema: EventSchema = actionEventSchema,
): Buffer {
  const lengths: number[] = [];
  for (const layout of schema.layouts.values()) lengths[layout.version] = layout.memberLength;
  const idLengths: number[] = new Array(users.length);
  let size = 0;
  for (let i = 0; i < users.length; i++) {
    const u = users[i] as UserArrivals;
    const idLength = Buffer.byteLength(u.userId);
    if (idLength === 0 || idLength > MAX_USER_ID_BYTES) {
      throw new RangeError(
        `User id ${JSON.stringify(u.userId)} is ${idLength} bytes: give 1 to ${MAX_USER_ID_BYTES} bytes ` +
          '(decodeRecord gives the decimal u64).',
      );
    }
    idLengths[i] = idLength;
    size += 6 + idLength;
    for (const m of u.members) {
      const expected = lengths[m[0] as number];
      if (expected === undefined || m.length !== expected) {
        throw new RangeError(
          `Action event member of user ${u.userId} has layout version ${m[0]} and ${m.length} bytes: ` +
            (expected === undefined
              ? `this store knows versions ${[...schema.layouts.keys()].join(', ')}.`
              : `that version's members are ${expected} bytes.`) +
            ' Build records with decodeRecord.',
        );
      }
      size += expected;
    }
  }
  const out = Buffer.allocUnsafe(size);
  let pos = 0;
  for (let i = 0; i < users.length; i++) {
    const u = users[i] as UserArrivals;
    const idLength = idLengths[i] as number;
    out[pos] = u.maintain ? 1 : 0;
    out[pos + 1] = idLength;
    out.write(u.userId, pos + 2, idLength, 'utf8');
    pos = out.writeUInt32BE(u.members.length, pos + 2 + idLength);
    for (const m of u.members) pos += m.copy(out, pos);
  }
  return out;
}

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
  /** How logs are read (raw by default; ioredis with `rawReads: false`). */
  private readonly reader: ValueReader;
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
    this.reader = (options.rawReads ?? true) ? RawValueReader.of(this.redis) : clientValueReader(this.redis);
    // The TTL outlives every stored event's dedup state by a day: the slack between two daily
    // maintenances of a user. It never decides a count.
    const ttl = this.retentionMs + window + this.maxFutureSkewMs + DAY_MS;
    const layouts = [...this.schema.layouts.values()].map((l) => `${l.version}:${l.memberLength}`).join(',');
    this.settingsArg = `${ttl} ${window} ${this.legacyV1Keys ? 1 : 0} ${layouts}`;
    // Redefining is harmless (same script): several stores may share one client.
    this.redis.defineCommand('countingIngest', { numberOfKeys: 2, lua: INGEST_LUA });
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
   * per cluster node and up to {@link MAX_ARRIVALS_PER_CALL} arrivals (a user's arrivals are
   * never split); a user's events are applied in the order given (the first occurrence of an
   * identity is the one counted). Errors (Redis down) propagate: the caller retries.
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
    // Per user, its arrivals in order; the first call of the day for a user maintains it.
    const byUser = new Map<string, { userId: string; maintain: boolean; members: Buffer[] }>();
    let expired = 0;
    let total = 0;
    for (const r of records) {
      this.checkTimestamp(r, now);
      if (r.timestamp < cutoff) {
        expired++;
        continue;
      }
      // The script reads the timestamp from the member's bytes: they must be the one checked.
      const m = r.member;
      if (m.length < 9 || m[1] !== 0 || m[2] !== 0 || m.readUIntBE(3, 6) !== r.timestamp) {
        throw new RangeError(
          `Action event of user ${r.userId}: its timestamp ${r.timestamp} is not the one in its member ` +
            'bytes (1..8). Build records with decodeRecord.',
        );
      }
      total++;
      let user = byUser.get(r.userId);
      if (!user) {
        user = { userId: r.userId, maintain: !this.maintained.has(r.userId), members: [] };
        byUser.set(r.userId, user);
      }
      user.members.push(m);
    }
    const result = { added: 0, duplicates: 0, restamped: 0, expired, repaired: 0, migrated: 0 };
    if (byUser.size === 0) return result;
    const replies = await Promise.all(
      (await this.callsByNode([...byUser.values()])).map((users) => this.ingest(users, trimBefore)),
    );
    for (const [added, restamped, repaired, migrated] of replies) {
      result.added += added;
      result.restamped += restamped;
      result.repaired += repaired;
      result.migrated += migrated;
    }
    result.duplicates = total - result.added;
    return result;
  }

  /**
   * Splits users into script calls: per owning node (a cluster call may touch only that node's
   * keys), at most {@link MAX_ARRIVALS_PER_CALL} arrivals each unless one user has more.
   */
  private async callsByNode(users: readonly UserArrivals[]): Promise<UserArrivals[][]> {
    const groups = new Map<string, UserArrivals[]>();
    const redis = this.redis;
    if (redis instanceof Cluster && users.length > 1) {
      await slotsReady(redis);
      for (const u of users) {
        const node = redis.slots[slotOf(this.key(u.userId))]?.[0] ?? 'unknown';
        const group = groups.get(node);
        if (group) group.push(u);
        else groups.set(node, [u]);
      }
    } else groups.set('single', [...users]);
    const calls: UserArrivals[][] = [];
    for (const group of groups.values()) {
      let call: UserArrivals[] = [];
      let arrivals = 0;
      for (const u of group) {
        if (call.length > 0 && arrivals + u.members.length > MAX_ARRIVALS_PER_CALL) {
          calls.push(call);
          call = [];
          arrivals = 0;
        }
        call.push(u);
        arrivals += u.members.length;
      }
      calls.push(call);
    }
    return calls;
  }

  /**
   * One script call for `users` (all on one node). In a cluster, a call that fails — a stale
   * slot map sent it to a node that does not own every user, which the script detects before
   * writing — is retried after reloading the slot map, one call per user (each routed, and
   * redirected, by its own keys), one at a time: concurrent calls would be auto-pipelined per
   * node, and ioredis refuses such a pipeline when redirects change the map under it. A rare
   * path (resharding, failover), so its speed does not matter.
   */
  private async ingest(users: readonly UserArrivals[], trimBefore: string): Promise<IngestReply> {
    try {
      return await this.ingestCall(users, trimBefore);
    } catch (error) {
      const redis = this.redis;
      if (!(redis instanceof Cluster) || users.length === 1) throw error;
      await new Promise<void>((resolve) => redis.refreshSlotsCache(() => resolve()));
      const sum: IngestReply = [0, 0, 0, 0];
      for (const u of users) {
        const [added, restamped, repaired, migrated] = await this.ingestCall([u], trimBefore);
        sum[0] += added;
        sum[1] += restamped;
        sum[2] += repaired;
        sum[3] += migrated;
      }
      return sum;
    }
  }

  private async ingestCall(users: readonly UserArrivals[], trimBefore: string): Promise<IngestReply> {
    const first = (users[0] as UserArrivals).userId;
    const reply = await this.redis.countingIngest(
      this.key(first),
      this.logKey(first),
      trimBefore,
      this.settingsArg,
      this.prefix,
      packArrivals(users, this.schema),
    );
    // Maintained once the call that maintains it succeeded.
    for (const u of users) if (u.maintain) this.maintained.add(u.userId);
    return reply;
  }

  /**
   * The user's packed event log: stored members back to back (each self-delimiting by its
   * version byte), in arrival order, possibly including expired members not yet compacted away.
   * One GET; callers filter by timestamp.
   */
  async eventLog(userId: string): Promise<Buffer> {
    return this.readLog(userId, (log) => Buffer.from(log));
  }

  /**
   * Folds the user's log (see {@link eventLog}) with `fold`, which runs synchronously on a buffer
   * valid only during the call (the raw reader lends its socket chunk or reused buffer).
   */
  private readLog<T>(userId: string, fold: (log: Buffer) => T): Promise<T> {
    // A plain promise chain, not async functions: this is the cap check's whole read path, and
    // each async layer was garbage per check (garbage sets how often the request path pauses for
    // GC). Errors, the key's included, still arrive as rejections.
    try {
      const key = this.logKey(userId);
      if (!this.legacyV1Keys) return this.reader.get(key, (log) => fold(log ?? EMPTY));
      return this.reader
        .get(key, (log) => (log === null ? NO_LOG : fold(log)))
        .then((v2) =>
          v2 !== NO_LOG
            ? v2
            : // Not written since the upgrade: its v1 log (if any) is still the user's history.
              this.reader.get(userLogKey(userId, this.prefix, 1), (log) => fold(log ?? EMPTY)),
        );
    } catch (error) {
      return Promise.reject(error);
    }
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
    return this.readLog(userId, (log) => countMembers(log, queries, this.horizon(now), this.schema));
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
  checkFrequencyCaps(request: CapCheckRequest): Promise<CapCheckResult> {
    // Not async (see readLog); every error is still a rejection.
    try {
      const now = this.clock.now();
      const { candidates } = request;
      if (candidates.length === 0) {
        return Promise.resolve(evaluateCaps(EMPTY, candidates, now, this.horizon(now), this.schema));
      }
      return this.readLog(request.userId, (log) =>
        evaluateCaps(log, candidates, now, this.horizon(now), this.schema),
      );
    } catch (error) {
      return Promise.reject(error);
    }
  }
}
