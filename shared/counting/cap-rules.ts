/**
 * Frequency caps and blocks as callers write them, the verdicts a cap check returns, and the
 * validation that names a bad cap.
 */

import { InvalidCountQueryError, specOf, valueKey } from './event-log.js';
import type { NoIdentityReport } from './identities.js';
import type { EventSchema } from './schema.js';

/**
 * One cap: fewer than `max` events of `action` on the candidate's `level` entity in the window
 * (now − windowMs, now] allow one more serve. An event exactly `windowMs` old no longer counts;
 * events stamped ahead of the clock (accepted producer skew) count as now.
 */
export interface FrequencyCap {
  /** Entity dimension the cap applies to: 'ad' | 'adGroup' | 'campaign' | 'advertiser' (any id dimension). */
  readonly level: string;
  /** Window length, ms: a positive integer. */
  readonly windowMs: number;
  /**
   * Serves allowed per window, an integer ≥ 1: count ≥ max rejects. 0 is refused (ad servers
   * disagree on whether it means "unlimited" or "never"): leave the cap out for no limit, use an
   * {@link EntityBlock} to never serve.
   */
  readonly max: number;
  /** @default 'impression' */
  readonly action?: string | number;
  /** Restrict to one view type. @default any view type */
  readonly viewType?: string | number;
  /**
   * The identity the cap counts on: 'user' | 'device' | 'household' (shared/counting/identities.ts).
   * @default 'user'
   */
  readonly key?: string;
  readonly block?: undefined;
  readonly recencyMs?: undefined;
  readonly lifetime?: undefined;
  readonly stopAfter?: undefined;
  readonly withinMs?: undefined;
}

/**
 * A recency cap: not again within `recencyMs` of the user's last `action` on the candidate's
 * `level` entity — allowed when no such event is in (now − recencyMs, now], so exactly
 * `recencyMs` after the last one it is allowed and 1 ms earlier refused. It is a frequency cap of
 * max 1 over that window (its status reports remaining 1 − count), combined with the candidate's
 * other caps like any of them: the strictest wins.
 */
export interface RecencyCap {
  /** Entity dimension: 'ad' | 'adGroup' | 'campaign' | 'advertiser' (any id dimension). */
  readonly level: string;
  /** How long after the last event the entity may be served again, ms: a positive integer. */
  readonly recencyMs: number;
  /** @default 'impression' */
  readonly action?: string | number;
  /** Restrict to one view type. @default any view type */
  readonly viewType?: string | number;
  /**
   * The identity the cap counts on: 'user' | 'device' | 'household' (shared/counting/identities.ts).
   * @default 'user'
   */
  readonly key?: string;
  readonly block?: undefined;
  readonly windowMs?: undefined;
  readonly max?: undefined;
  readonly lifetime?: undefined;
  readonly stopAfter?: undefined;
  readonly withinMs?: undefined;
}

/**
 * A lifetime cap: fewer than `max` events of `action` on the candidate's `level` entity since
 * the candidate's flight started (`CapCandidate.flightStartMs`, inclusive) allow one more serve —
 * "at most 10 per campaign for its whole flight". The store must keep the whole flight
 * (`retentionDays` ≥ the flight's age): a flight that started before the retention horizon is
 * refused rather than under-counted.
 */
export interface LifetimeCap {
  /** Entity dimension: 'ad' | 'adGroup' | 'campaign' | 'advertiser' (any id dimension). */
  readonly level: string;
  readonly lifetime: true;
  /** Serves allowed over the flight, an integer ≥ 1 (count ≥ max rejects). */
  readonly max: number;
  /** @default 'impression' */
  readonly action?: string | number;
  /** Restrict to one view type. @default any view type */
  readonly viewType?: string | number;
  /**
   * The identity the cap counts on: 'user' | 'device' | 'household' (shared/counting/identities.ts).
   * @default 'user'
   */
  readonly key?: string;
  readonly block?: undefined;
  readonly windowMs?: undefined;
  readonly recencyMs?: undefined;
  readonly stopAfter?: undefined;
  readonly withinMs?: undefined;
}

/**
 * A conversion cap: stop serving the candidate's `level` entity to a user once the user did
 * `stopAfter` (a click, a conversion, any action code) on it — within the last `withinMs`, or
 * when that is not given, since the candidate's flight started (`flightStartMs`), or without a
 * flight, over the store's whole retention. It is max 1 event of `stopAfter` over that window.
 */
export interface ConversionCap {
  /** Entity dimension: 'ad' | 'adGroup' | 'campaign' | 'advertiser' (any id dimension). */
  readonly level: string;
  /** The action after which the entity is not served: 'click', 'conversion' or a code 1–255. */
  readonly stopAfter: string | number;
  /** How long serving stays stopped, ms: a positive integer. @default the flight, else the retention */
  readonly withinMs?: number;
  /** Restrict to one view type. @default any view type */
  readonly viewType?: string | number;
  /**
   * The identity the cap counts on: 'user' | 'device' | 'household' (shared/counting/identities.ts).
   * @default 'user'
   */
  readonly key?: string;
  readonly block?: undefined;
  readonly windowMs?: undefined;
  readonly max?: undefined;
  readonly recencyMs?: undefined;
  readonly lifetime?: undefined;
  readonly action?: undefined;
}

/**
 * Never serve the candidate's `level` entity to this user (e.g. the user hid the advertiser):
 * the explicit form of what a `max: 0` cap would ambiguously mean. Always a hit, and the
 * strictest one; its status has count 0 and remaining 0.
 */
export interface EntityBlock {
  /** Entity dimension blocked: 'ad' | 'adGroup' | 'campaign' | 'advertiser' (any id dimension). */
  readonly level: string;
  readonly block: true;
  readonly key?: undefined;
  readonly recencyMs?: undefined;
  readonly windowMs?: undefined;
  readonly max?: undefined;
  readonly lifetime?: undefined;
  readonly stopAfter?: undefined;
  readonly withinMs?: undefined;
}

/** What a candidate can carry: frequency, recency, lifetime and conversion caps, and blocks. */
export type CapRule = FrequencyCap | RecencyCap | LifetimeCap | ConversionCap | EntityBlock;

/** A cap that counts events (not a block). */
export type CountingCap = FrequencyCap | RecencyCap | LifetimeCap | ConversionCap;

/** The events a counting cap allows per window: its `max`; 1 for a recency or conversion cap. */
export function capMax(cap: CountingCap): number {
  return cap.max ?? 1;
}

/**
 * The window a counting cap counts over, ms, for ordering caps by length (ties of the strictest
 * go to the longest): `windowMs`, `recencyMs` or `withinMs`; a lifetime cap and a conversion cap
 * without `withinMs` count back to the flight's start or the retention, longer than any fixed
 * window, so they rank as the longest.
 */
export function capWindowMs(cap: CountingCap): number {
  return cap.windowMs ?? cap.recencyMs ?? cap.withinMs ?? Number.MAX_SAFE_INTEGER;
}

/** The action a counting cap counts: `stopAfter` for a conversion cap, else `action` (default impression). */
export function capAction(cap: CountingCap): string | number {
  return cap.stopAfter ?? cap.action ?? 'impression';
}

/**
 * The first instant a counting cap counts (its events are those stamped in [since, now], and
 * never before `notBefore`, the retention horizon). Throws {@link InvalidCountQueryError} for a
 * cap whose window reaches back past the retention (it would under-count).
 */
export function capSince(
  cap: CountingCap,
  c: CapCandidate,
  ci: number,
  k: number,
  now: number,
  notBefore: number,
): number {
  // (now − w, now]: the first millisecond that counts is one after now − w.
  const fixed = cap.windowMs ?? cap.recencyMs ?? cap.withinMs;
  if (fixed !== undefined) return now - fixed + 1;
  const start = c.flightStartMs;
  if (start === undefined) return notBefore;
  if (start < notBefore) {
    throw new InvalidCountQueryError(
      `${whereCap(c, ci, k)} ${describeCap(cap)}: the flight started at ${new Date(start).toISOString()}, ` +
        `before the store's retention horizon ${new Date(notBefore).toISOString()}: its first days are no longer ` +
        'counted. Give the store a retentionDays of at least the flight length (at most 90), or cap over windowMs.',
    );
  }
  return start;
}

/** An ad candidate of a request. */
export interface CapCandidate {
  /** Caller's identifier, echoed back. @default the ad id */
  readonly id?: string;
  /** Entity ids by level, e.g. `{ ad: '11', adGroup: '7', campaign: '3', advertiser: '1' }`. */
  readonly entities: Readonly<Record<string, unknown>>;
  readonly caps: readonly CapRule[];
  /**
   * When the candidate's flight started, epoch ms: what lifetime caps count from (and conversion
   * caps without `withinMs`). Required by a lifetime cap.
   */
  readonly flightStartMs?: number;
}

/** A cap's (or block's) evaluation. */
export interface CapStatus {
  readonly cap: CapRule;
  /** The entity id the cap counted. */
  readonly entity: string;
  readonly count: number;
  /** `max − count`; ≤ 0 means the cap is hit. */
  readonly remaining: number;
  /**
   * The identity counted on, when not the user: the cap's `key`, or the coarser identity the
   * `coarser` policy counted on instead.
   */
  readonly key?: string;
  /** The request had no id for the cap's identity and the policy refused: hit with count 0. */
  readonly missingIdentity?: true;
}

/** Verdict on one candidate. */
export interface CandidateVerdict {
  readonly id: string;
  readonly allowed: boolean;
  /**
   * The strictest cap: a block if any, else the least remaining (ties → longest window);
   * undefined without caps.
   */
  readonly strictest?: CapStatus;
  /** Every cap that is hit (rejected candidates only). */
  readonly hits: readonly CapStatus[];
}

/** Result of a cap check. */
export interface CapCheckResult {
  readonly allowed: readonly CandidateVerdict[];
  readonly rejected: readonly CandidateVerdict[];
  /** Present when caps had no id of their identity in the request: how the policy handled them. */
  readonly noIdentity?: NoIdentityReport;
}

/** The code of an action or view-type value (throws InvalidCountQueryError naming the cap). */
export function codeOf(schema: EventSchema, dim: string, value: string | number, where: string): number {
  const spec = specOf(schema, dim, where);
  try {
    return valueKey(spec, value) as number;
  } catch (error) {
    throw new InvalidCountQueryError(`${where}: ${(error as Error).message}`, { cause: error });
  }
}

/** Names a cap in error messages (a top-level function: no closure per candidate on the hot path). */
export function whereCap(c: CapCandidate, ci: number, k: number): string {
  return `candidate ${c.id ?? ci} cap ${k}`;
}

/** A cap as the caller wrote it, for error messages. */
function describeCap(cap: unknown): string {
  try {
    return JSON.stringify(cap, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v));
  } catch {
    return String(cap);
  }
}

/** The kinds of cap rule, told apart by the field only that kind has. */
type RuleKind = 'block' | 'recency' | 'lifetime' | 'conversion' | 'frequency';

/** The fields each kind may have, and how the kind reads in an error message. */
const RULE_FIELDS: Readonly<Record<RuleKind, readonly string[]>> = {
  block: ['level', 'block'],
  recency: ['level', 'recencyMs', 'action', 'viewType', 'key'],
  lifetime: ['level', 'lifetime', 'max', 'action', 'viewType', 'key'],
  conversion: ['level', 'stopAfter', 'withinMs', 'viewType', 'key'],
  frequency: ['level', 'windowMs', 'max', 'action', 'viewType', 'key'],
};

/** Every field some kind has: a rule may carry only its own kind's. */
const RULE_FIELD_NAMES = [
  'block',
  'windowMs',
  'max',
  'recencyMs',
  'lifetime',
  'stopAfter',
  'withinMs',
  'action',
  'viewType',
  'key',
] as const;

/** Per kind, the fields of other kinds (what checkRule refuses). */
const FORBIDDEN_FIELDS: Readonly<Record<RuleKind, readonly string[]>> = Object.fromEntries(
  (Object.keys(RULE_FIELDS) as RuleKind[]).map((kind) => [
    kind,
    RULE_FIELD_NAMES.filter((f) => !RULE_FIELDS[kind].includes(f)),
  ]),
) as unknown as Record<RuleKind, readonly string[]>;

function ruleKind(cap: CapRule): RuleKind {
  if (cap.block !== undefined) return 'block';
  if (cap.recencyMs !== undefined) return 'recency';
  if (cap.lifetime !== undefined) return 'lifetime';
  if (cap.stopAfter !== undefined) return 'conversion';
  return 'frequency';
}

/** Fields a kind cannot do without; the others are optional (`?`). */
const REQUIRED_FIELDS = new Set(['level', 'block', 'lifetime', 'stopAfter', 'recencyMs', 'windowMs', 'max']);

function shapeOf(kind: RuleKind): string {
  const fields = RULE_FIELDS[kind].map((f) =>
    f === 'block' || f === 'lifetime' ? `${f}: true` : REQUIRED_FIELDS.has(f) ? f : `${f}?`,
  );
  return `{ ${fields.join(', ')} }`;
}

function isPositiveInteger(v: unknown): boolean {
  return Number.isSafeInteger(v) && (v as number) > 0;
}

/**
 * Throws {@link InvalidCountQueryError} naming the cap unless it is a usable cap or block: its
 * kind's fields only (a field of another kind is refused, never ignored), each in range.
 */
export function checkRule(schema: EventSchema, c: CapCandidate, ci: number, k: number, cap: CapRule): void {
  // Runs for every recency, lifetime and conversion cap of every check: no closure, no
  // allocation and no message until something is wrong.
  const kind = ruleKind(cap);
  const forbidden = FORBIDDEN_FIELDS[kind];
  for (let f = 0; f < forbidden.length; f++) {
    const field = forbidden[f] as string;
    if ((cap as unknown as Record<string, unknown>)[field] === undefined) continue;
    throw ruleError(
      c,
      ci,
      k,
      `a ${kind === 'block' ? 'block' : `${kind} cap`} is exactly ${shapeOf(kind)}; "${field}" does not belong in it` +
        (kind === 'block' ? ' (a block has no window, max or recency).' : '.') +
        ' Frequency cap: { level, windowMs, max }; recency: { level, recencyMs }; lifetime: { level, lifetime: true, max };' +
        ' conversion: { level, stopAfter }; block: { level, block: true }.',
    );
  }
  switch (kind) {
    case 'block':
      if (cap.block !== true) throw ruleError(c, ci, k, 'a block is { level, block: true }.');
      checkCapEntity(schema, c, ci, k, cap.level);
      return;
    case 'recency':
      if (!isPositiveInteger(cap.recencyMs)) {
        throw ruleError(
          c,
          ci,
          k,
          'recencyMs must be a positive integer (ms); 0 or less would never refuse — leave the cap out for none.',
        );
      }
      return;
    case 'lifetime':
      if (cap.lifetime !== true) throw ruleError(c, ci, k, 'a lifetime cap has lifetime: true.');
      checkMax(cap.max, c, ci, k);
      if (c.flightStartMs === undefined) {
        throw ruleError(
          c,
          ci,
          k,
          'a lifetime cap counts since the flight started — give the candidate flightStartMs (epoch ms), or cap over windowMs.',
        );
      }
      checkFlightStart(c, ci, k);
      return;
    case 'conversion':
      if (cap.withinMs !== undefined && !isPositiveInteger(cap.withinMs)) {
        throw ruleError(
          c,
          ci,
          k,
          'withinMs must be a positive integer (ms); leave it out to stop for the flight (or the retention).',
        );
      }
      try {
        codeOf(schema, 'action', cap.stopAfter as string | number, 'stopAfter');
      } catch (error) {
        throw ruleError(c, ci, k, (error as Error).message, error);
      }
      if (c.flightStartMs !== undefined) checkFlightStart(c, ci, k);
      return;
    case 'frequency':
      if (!isPositiveInteger(cap.windowMs))
        throw ruleError(c, ci, k, 'windowMs must be a positive integer (ms).');
      checkMax(cap.max, c, ci, k);
      return;
  }
}

/** The error naming cap `k` of candidate `ci` as the caller wrote it. */
function ruleError(
  c: CapCandidate,
  ci: number,
  k: number,
  problem: string,
  cause?: unknown,
): InvalidCountQueryError {
  const message = `${whereCap(c, ci, k)} ${describeCap(c.caps[k])}: ${problem}`;
  return cause === undefined
    ? new InvalidCountQueryError(message)
    : new InvalidCountQueryError(message, { cause });
}

function checkMax(max: unknown, c: CapCandidate, ci: number, k: number): void {
  if (max === 0) {
    throw ruleError(
      c,
      ci,
      k,
      'max 0 is ambiguous (some ad servers read it as "unlimited", others as "never"). ' +
        `Leave the cap out for no limit, or use { level: '${(c.caps[k] as CapRule).level}', block: true } to never serve.`,
    );
  }
  if (!Number.isSafeInteger(max) || (max as number) < 1) {
    throw ruleError(c, ci, k, 'max must be an integer ≥ 1 (serves allowed per window).');
  }
}

function checkFlightStart(c: CapCandidate, ci: number, k: number): void {
  if (!isPositiveInteger(c.flightStartMs)) {
    throw ruleError(
      c,
      ci,
      k,
      `flightStartMs is ${JSON.stringify(c.flightStartMs)}: give the flight's start as epoch milliseconds.`,
    );
  }
}

/** Throws {@link InvalidCountQueryError} unless `level` is an id dimension the candidate gives a valid id for. */
export function checkCapEntity(
  schema: EventSchema,
  c: CapCandidate,
  ci: number,
  k: number,
  level: string,
): void {
  const spec = schema.dimension(level);
  if (spec === undefined) specOf(schema, level, whereCap(c, ci, k));
  if (spec?.kind !== 'id') throw ruleError(c, ci, k, `level "${level}" is not an entity id dimension.`);
  const value = c.entities[level];
  if (value === undefined) throw ruleError(c, ci, k, `the candidate has no "${level}" id in entities.`);
  try {
    valueKey(spec, value);
  } catch (error) {
    throw ruleError(c, ci, k, (error as Error).message, error);
  }
}
