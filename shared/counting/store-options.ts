/** The options, requests and results of {@link ActionStore} (shared/counting/store.ts). */
import { errorKind } from '../errors.js';
import type { RedisClient } from '../redis/connect.js';
import { type Clock, DAY_MS, MINUTE_MS } from '../time/clock.js';
import type { RequestIdentities } from './cap-keys.js';
import type { CapCandidate } from './cap-rules.js';
import { NO_IDENTITY_POLICIES, type NoIdentityPolicy } from './identities.js';
import { actionEventSchema, type EventSchema } from './schema.js';

/** Options of {@link ActionStore}. */
export interface ActionStoreOptions {
  readonly redis: RedisClient;
  readonly clock: Clock;
  /** Days of events kept and counted (1–90). @default 30 */
  readonly retentionDays?: number;
  /**
   * Days a cap check reads event by event (1–90). With a longer retention, maintenance keeps a
   * day summary of each user's log, and a check whose windows reach further back reads the
   * other old days as per-day counts: exact, since a day holding a window start is read event by
   * event (docs/counting.md, "Long windows: the day summary"). @default 31
   */
  readonly rawDays?: number;
  /**
   * Day tables of the day summary kept between checks (≈ 20 bytes per day of a user's
   * retention each), least recently used out: a check of a user seen since needs one round trip,
   * not two. A kept table is only a plan, proved by the read itself. @default 4096
   */
  readonly cachedDayTables?: number;
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
   * (shared/redis/resp/value-reader.ts), instead of through ioredis, which copies each reply and builds
   * objects per command: about half a cap check's client time (docs/counting.md, "Reads").
   * @default true
   */
  readonly rawReads?: boolean;
  /**
   * Cap checks read the user's cap log (the compact copy of its events the ingest script keeps,
   * docs/counting.md "The cap log") instead of its log: a fraction of the bytes to read and
   * scan, same counts. A user without one (no events, or the key lost) is read from the log, a
   * second round trip. Turn off before rolling the ingest function back to a version that does
   * not write cap logs (their events would be missing from the cap logs it leaves).
   * @default true
   */
  readonly capLogReads?: boolean;
  /**
   * What a cap check does with a cap whose identity the request does not carry (a user without
   * an id): `refuse` the candidate, leave the cap `uncapped`, or count on the `coarser` identity
   * (the household) when there is one, else refuse. Every such cap is counted in
   * {@link ActionStore.noIdentityCounts} and reported in the result. @default 'refuse'
   */
  readonly noIdentity?: NoIdentityPolicy;
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

/**
 * Cap check request: all candidates of one ad request, for the identities the request carries.
 * Caps count on the user unless they name another `key` (docs/counting.md, "Identities").
 */
export interface CapCheckRequest {
  /** The user (the same as `identities.user`). */
  readonly userId?: string;
  /** The request's ids by identity kind: `{ device: '…', household: '…' }`. */
  readonly identities?: RequestIdentities;
  readonly candidates: readonly CapCandidate[];
  /** What to do with caps whose identity the request lacks. @default the store's `noIdentity` */
  readonly noIdentity?: NoIdentityPolicy;
}

/** How many caps the no-identity policy handled since the store was made (a metric's source). */
export interface NoIdentityCounts {
  refused: number;
  uncapped: number;
  coarser: number;
}

/** {@link ActionStore} options out of range (the message names the option and its range). */
export class InvalidActionStoreOptionsError extends errorKind(
  'InvalidActionStoreOptionsError',
  'counting.invalid-store-options',
) {}

/** The options with their defaults, checked. */
export interface StoreSettings {
  readonly retentionMs: number;
  /** Days read event by event when the retention is longer (day summaries kept); else undefined. */
  readonly rawDays: number | undefined;
  readonly cachedDayTables: number;
  readonly dedupWindowMs: number;
  readonly maxFutureSkewMs: number;
  readonly prefix: string;
  readonly schema: EventSchema;
  readonly legacyV1Keys: boolean;
  readonly capLogReads: boolean;
  readonly noIdentity: NoIdentityPolicy;
}

function integerIn(name: string, value: number, min: number, max: number, fallback: string): number {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new InvalidActionStoreOptionsError(
      `${name} is ${value}: give an integer from ${min} to ${max} (default ${fallback}).`,
    );
  }
  return value;
}

/** {@link ActionStoreOptions} with defaults; throws {@link InvalidActionStoreOptionsError}. */
export function storeSettings(options: ActionStoreOptions): StoreSettings {
  const retentionDays = integerIn('retentionDays', options.retentionDays ?? 30, 1, 90, '30');
  const rawDays = integerIn('rawDays', options.rawDays ?? 31, 1, 90, '31');
  const retentionMs = retentionDays * DAY_MS;
  const window = options.dedupWindowMs ?? DAY_MS;
  if (!Number.isSafeInteger(window) || window < 0 || window > retentionMs) {
    throw new InvalidActionStoreOptionsError(
      `dedupWindowMs is ${window}: give an integer number of ms from 0 (exact-bytes dedup only) ` +
        `to the retention (${retentionMs}); default ${DAY_MS} (one day).`,
    );
  }
  const noIdentity = options.noIdentity ?? 'refuse';
  if (!NO_IDENTITY_POLICIES.includes(noIdentity)) {
    throw new InvalidActionStoreOptionsError(
      `noIdentity is ${JSON.stringify(noIdentity)}: give ${NO_IDENTITY_POLICIES.join(', ')} (default refuse).`,
    );
  }
  return {
    retentionMs,
    rawDays: retentionDays > rawDays ? rawDays : undefined,
    cachedDayTables: integerIn('cachedDayTables', options.cachedDayTables ?? 4096, 0, 1_000_000, '4096'),
    dedupWindowMs: window,
    maxFutureSkewMs: options.maxFutureSkewMs ?? 15 * MINUTE_MS,
    prefix: options.keyPrefix ?? 'act',
    schema: options.schema ?? actionEventSchema,
    legacyV1Keys: options.legacyV1Keys ?? true,
    capLogReads: options.capLogReads ?? true,
    noIdentity,
  };
}
