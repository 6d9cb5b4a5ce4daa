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
 *                           whole ad request's counts is one GET of one value;
 *   `act:v2:{<userId>}:cap` string; the cap log, the same events as 10-byte records over a
 *                           table of the user's entity tuples (counting-caplog.lua): what a cap
 *                           check GETs (`:tix` indexes its tuples for the writer).
 *
 * Dedup (Aperture's rule, DESIGN.md requirement 7): an event's identity is its member without the
 * timestamp; an arrival whose identity has a counted occurrence less than the dedup window away
 * (either side) is a duplicate, whatever its timestamp, so the first occurrence seen is the one
 * counted; identical bytes are always a duplicate. Retention is enforced from the injected clock:
 * reads ignore events older than now − retention whether or not a write has trimmed them yet;
 * writes keep dedup state for retention + window, trim and compact; TTLs only reclaim idle users'
 * memory.
 */
import { Cluster } from 'ioredis';
import { type RedisClient, slotOf, slotsReady } from '../redis/connect.js';
import { slotOwner } from '../redis/resp/ioredis-adapter.js';
import { clientValueReader, RawValueReader, type ValueReader } from '../redis/resp/value-reader.js';
import { defineScripts } from '../redis/scripts/registry.js';
import { type Clock, DAY_MS } from '../time/clock.js';
import { type IngestReply, MAX_ARRIVALS_PER_CALL, packArrivals, type UserArrivals } from './arrivals.js';
import { checkPolicy, namesOtherKeys, planKeys, planVerdicts, validateRequest } from './cap-keys.js';
import { CAP_LOG_KEPT, CAP_LOG_MIN_LOG_BYTES } from './cap-log.js';
import type { CapSubset } from './cap-setup.js';
import { countCaps, evaluateCapLog, requestCounts } from './caps.js';
import { type DaySummaryCounts, DaySummaryReader, daysRead } from './day-summary.js';
import { checkEventTime, type DecodedRecord } from './event-decode.js';
import { InvalidCountQueryError } from './event-log.js';
import { DEFAULT_IDENTITY, type NoIdentityPolicy } from './identities.js';
import { userAggregatesKey, userCapLogKey, userDaysKey, userKey, userLogKey } from './keys.js';
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
import type { EventSchema } from './schema.js';
import { parseCountQuery } from './sql.js';

import {
  type ActionStoreOptions,
  type AddResult,
  type CapCheckRequest,
  type NoIdentityCounts,
  storeSettings,
} from './store-options.js';

export { MAX_ARRIVALS_PER_CALL, MAX_USER_ID_BYTES, packArrivals, type UserArrivals } from './arrivals.js';
export {
  KEY_SCHEMA_VERSION,
  userAggregatesKey,
  userDaysKey,
  userKey,
  userLogKey,
} from './keys.js';
export {
  type ActionStoreOptions,
  type AddResult,
  type CapCheckRequest,
  InvalidActionStoreOptionsError,
  type NoIdentityCounts,
} from './store-options.js';

const EMPTY = Buffer.alloc(0);

/** A read of a user's v2 log found no key (and v1 keys may still hold the history). */
const NO_LOG: unique symbol = Symbol('no v2 log');

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
  /** Days read event by event when the retention is longer (day summaries kept); else undefined. */
  private readonly rawDays: number | undefined;
  /** How logs are read (raw by default; ioredis with `rawReads: false`). */
  private readonly reader: ValueReader;
  private readonly rawReader: RawValueReader | undefined;
  /** The script's settings argument (never changes: built once, not per call). */
  private readonly settingsArg: string;
  /**
   * Users this store maintained (trim, compaction or day summary, TTL refresh, v1 import) on `maintainedDay`
   * of the injected clock: each user written is maintained at least once a (clock) day per
   * process, which is what the TTL's day of slack relies on.
   */
  private readonly maintained = new Set<string>();
  private maintainedDay = Number.NaN;
  private readonly noIdentity: NoIdentityPolicy;
  private readonly capLogReads: boolean;
  /**
   * Cap checks of a user whose log is too long to be read with its cap log and that found no
   * cap log (lost alone, past 65,535 tuples, a writer that keeps none), so they read the log in a
   * second round trip; cumulative (read by metrics).
   */
  capLogMisses = 0;
  /** Reads through the day summary (day-summary.ts). */
  private readonly days: DaySummaryReader;
  /** Caps handled by the no-identity policy, cumulative (read by metrics). */
  readonly noIdentityCounts: NoIdentityCounts = { refused: 0, uncapped: 0, coarser: 0 };

  constructor(options: ActionStoreOptions) {
    const settings = storeSettings(options);
    this.retentionMs = settings.retentionMs;
    this.rawDays = settings.rawDays;
    this.dedupWindowMs = settings.dedupWindowMs;
    this.maxFutureSkewMs = settings.maxFutureSkewMs;
    this.prefix = settings.prefix;
    this.schema = settings.schema;
    this.legacyV1Keys = settings.legacyV1Keys;
    this.capLogReads = settings.capLogReads;
    this.noIdentity = settings.noIdentity;
    this.redis = options.redis;
    this.clock = options.clock;
    const window = this.dedupWindowMs;
    this.rawReader = (options.rawReads ?? true) ? RawValueReader.of(this.redis) : undefined;
    this.reader = this.rawReader ?? clientValueReader(this.redis);
    this.days = new DaySummaryReader({
      redis: this.redis,
      reader: this.reader,
      raw: this.rawReader,
      cachedTables: settings.cachedDayTables,
    });
    // The TTL outlives every stored event's dedup state by a day: the slack between two daily
    // maintenances of a user. It never decides a count.
    const ttl = this.retentionMs + window + this.maxFutureSkewMs + DAY_MS;
    const layouts = [...this.schema.layouts.values()].map((l) => `${l.version}:${l.memberLength}`).join(',');
    const withDays = this.rawDays === undefined ? 0 : 1;
    this.settingsArg = `${ttl} ${window} ${this.legacyV1Keys ? 1 : 0} ${withDays} ${layouts}`;
    // One script call per batch of users (shared/redis/scripts/counting-ingest.lua states why, and
    // the key-group invariants I1–I3). Redefining is harmless (same script): several stores may
    // share one client.
    defineScripts(this.redis, 'countingIngest');
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
      // An event counts in the key group of every identity it carries (one arrival each).
      const keys = r.keys;
      for (let i = 0; i < keys.length; i++) {
        const tag = keys[i] as string;
        total++;
        let user = byUser.get(tag);
        if (!user) {
          user = { userId: tag, maintain: !this.maintained.has(tag), members: [] };
          byUser.set(tag, user);
        }
        user.members.push(m);
      }
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
        const node = slotOwner(redis, slotOf(this.key(u.userId))) ?? 'unknown';
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
  private readLog<T>(userId: string, fold: (log: Buffer) => T, legacy = this.legacyV1Keys): Promise<T> {
    // A plain promise chain, not async functions: this is the cap check's whole read path, and
    // each async layer was garbage per check (garbage sets how often the request path pauses for
    // GC). Errors, the key's included, still arrive as rejections.
    try {
      const key = this.logKey(userId);
      if (!legacy) return this.reader.get(key, (log) => fold(log ?? EMPTY));
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
      const { candidates, userId } = request;
      if (userId === undefined || namesOtherKeys(candidates)) return this.checkByIdentity(request, now);
      if (candidates.length === 0) {
        return Promise.resolve(evaluateCaps(EMPTY, candidates, now, this.horizon(now), this.schema));
      }
      const horizon = this.horizon(now);
      const schema = this.schema;
      return this.evaluateFrom(
        userId,
        candidates,
        now,
        this.legacyV1Keys,
        undefined,
        (log, capLog, aggregates) =>
          capLog !== undefined
            ? evaluateCapLog(capLog, candidates, now, horizon, schema)
            : evaluateCaps(log ?? EMPTY, candidates, now, horizon, schema, aggregates),
      );
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Evaluates `candidates` (the caps of `subset`, when given) over the key group `tag` with
   * `evaluate`, in one round trip for nearly every user: a GET of its cap log pipelined with a
   * GETRANGE of its log's first CAP_LOG_MIN_LOG_BYTES — the cap log when it has one, else the log
   * when that prefix is all of it (a log that short has no cap log). Otherwise (a long log
   * without a cap log: lost alone, too many tuples, or a writer that keeps none) as without cap
   * logs: {@link evaluateOverLog}. `evaluate` never returns undefined.
   */
  private evaluateFrom<T>(
    tag: string,
    candidates: readonly CapCandidate[],
    now: number,
    legacy: boolean,
    subset: CapSubset | undefined,
    evaluate: Evaluation<T>,
  ): Promise<T> {
    const horizon = this.horizon(now);
    if (!this.capLogReads)
      return this.evaluateOverLog(tag, candidates, now, horizon, legacy, subset, evaluate);
    // The replies come in order on one connection, so the log's prefix is skipped when the cap
    // log answered (should they not, both are evaluated and the cap log's result taken).
    let answered = false;
    let headLength = -1;
    const viaCapLog = this.reader.get(userCapLogKey(tag, this.prefix), (capLog) => {
      if (capLog === null || capLog[0] !== CAP_LOG_KEPT) return undefined;
      answered = true;
      return evaluate(undefined, capLog);
    });
    const viaShortLog = this.reader.getRange(this.logKey(tag), 0, CAP_LOG_MIN_LOG_BYTES - 1, (head) => {
      headLength = head.length;
      return answered || head.length >= CAP_LOG_MIN_LOG_BYTES || (head.length === 0 && legacy)
        ? undefined
        : evaluate(head, undefined);
    });
    return Promise.all([viaCapLog, viaShortLog]).then(([fromCapLog, fromLog]) => {
      const result = fromCapLog ?? fromLog;
      if (result !== undefined) return result;
      if (headLength === 0) {
        // No v2 log while upgrading from v1 (a user not written since): its v1 log, if any.
        return this.reader.get(userLogKey(tag, this.prefix, 1), (log) => evaluate(log ?? EMPTY, undefined));
      }
      this.capLogMisses++;
      return this.evaluateOverLog(tag, candidates, now, horizon, legacy, subset, evaluate);
    });
  }

  /** {@link evaluateFrom} over the log: through the day summary when it saves reading, else whole. */
  private evaluateOverLog<T>(
    tag: string,
    candidates: readonly CapCandidate[],
    now: number,
    horizon: number,
    legacy: boolean,
    subset: CapSubset | undefined,
    evaluate: Evaluation<T>,
  ): Promise<T> {
    const read =
      this.rawDays === undefined
        ? undefined
        : daysRead(candidates, now, horizon, Math.floor(now / DAY_MS) - this.rawDays + 1, subset);
    const wholeLog = () => this.readLog(tag, (log) => evaluate(log, undefined), legacy);
    if (read === undefined) return wholeLog();
    const keys = {
      log: this.logKey(tag),
      days: userDaysKey(tag, this.prefix),
      aggregates: userAggregatesKey(tag, this.prefix),
    };
    return this.days
      .read(keys, read, (members, aggregates) => evaluate(members, undefined, aggregates))
      .then((result) => result ?? wholeLog());
  }

  /**
   * Checks with a window past `rawDays`, cumulative (read by metrics): read through the day
   * summary, over the whole log as a fallback (no summary yet, or one lost during the read), or
   * over the whole log because the summary would save nothing (`noGain`).
   */
  get daySummaryReads(): Readonly<DaySummaryCounts> {
    return this.days.counts;
  }

  /**
   * A check whose caps count on several identities, or without a user id: one log per identity
   * read at once (pipelined), each identity's caps counted over its own log, then the verdicts
   * built once; caps without an id of their identity go by the no-identity policy.
   */
  private checkByIdentity(request: CapCheckRequest, now: number): Promise<CapCheckResult> {
    const identities: Record<string, string | undefined> = { ...request.identities };
    if (request.userId !== undefined) {
      if (identities.user !== undefined && identities.user !== request.userId) {
        throw new InvalidCountQueryError(
          `cap check: userId ${JSON.stringify(request.userId)} and identities.user ${JSON.stringify(identities.user)} differ: give the user once.`,
        );
      }
      identities.user = request.userId;
    }
    const { candidates } = request;
    const policy = checkPolicy(request.noIdentity ?? this.noIdentity, 'cap check');
    const horizon = this.horizon(now);
    const schema = this.schema;
    // Bad input is named as the caller numbered it, the first in request order (the plan and
    // each group check only the caps they handle).
    const named = (error: unknown): never => {
      if (error instanceof InvalidCountQueryError) validateRequest(schema, candidates, now, horizon);
      throw error;
    };
    let plan: ReturnType<typeof planKeys>;
    try {
      plan = planKeys(schema, candidates, identities, policy);
    } catch (error) {
      return named(error);
    }
    const { groupOf, groups } = plan;
    const counts = requestCounts(groupOf.length);
    return Promise.all(
      groups.map((g, group) => {
        const subset = { groupOf, group };
        // Only users can have v1 keys (v1 had no other identity).
        const legacy = this.legacyV1Keys && g.kind.name === DEFAULT_IDENTITY;
        return this.evaluateFrom(g.tag, candidates, now, legacy, subset, (log, capLog, aggregates) => {
          countCaps(log, capLog, aggregates, candidates, now, horizon, schema, subset, counts);
          return counts;
        });
      }),
    ).then(() => {
      const report = plan.report;
      if (report) {
        this.noIdentityCounts.refused += report.refused;
        this.noIdentityCounts.uncapped += report.uncapped;
        this.noIdentityCounts.coarser += report.coarser;
      }
      return planVerdicts(candidates, plan, counts);
    }, named);
  }
}

/**
 * How a check evaluates what it read: a log (with the day summary's aggregates) or a cap log;
 * never undefined.
 */
type Evaluation<T> = (
  log: Buffer | readonly Buffer[] | undefined,
  capLog: Buffer | undefined,
  aggregates?: Buffer | readonly Buffer[],
) => T;
