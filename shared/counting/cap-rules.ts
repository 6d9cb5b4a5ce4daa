/**
 * Frequency caps and blocks as callers write them, the verdicts a cap check returns, and the
 * validation that names a bad cap.
 */

import { InvalidCountQueryError, specOf, valueKey } from './event-log.js';
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
  readonly block?: undefined;
  readonly recencyMs?: undefined;
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
  readonly block?: undefined;
  readonly windowMs?: undefined;
  readonly max?: undefined;
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
  readonly recencyMs?: undefined;
  readonly windowMs?: undefined;
  readonly max?: undefined;
}

/** What a candidate can carry: frequency caps, recency caps and blocks. */
export type CapRule = FrequencyCap | RecencyCap | EntityBlock;

/** A cap that counts events (not a block): a frequency or a recency cap. */
export type CountingCap = FrequencyCap | RecencyCap;

/** The events a counting cap allows per window: its `max`, 1 for a recency cap. */
export function capMax(cap: CountingCap): number {
  return cap.max ?? 1;
}

/** The window a counting cap counts over, ms: its `windowMs`, or a recency cap's `recencyMs`. */
export function capWindowMs(cap: CountingCap): number {
  return cap.windowMs ?? (cap.recencyMs as number);
}

/** An ad candidate of a request. */
export interface CapCandidate {
  /** Caller's identifier, echoed back. @default the ad id */
  readonly id?: string;
  /** Entity ids by level, e.g. `{ ad: '11', adGroup: '7', campaign: '3', advertiser: '1' }`. */
  readonly entities: Readonly<Record<string, unknown>>;
  readonly caps: readonly CapRule[];
}

/** A cap's (or block's) evaluation. */
export interface CapStatus {
  readonly cap: CapRule;
  /** The entity id the cap counted. */
  readonly entity: string;
  readonly count: number;
  /** `max − count`; ≤ 0 means the cap is hit. */
  readonly remaining: number;
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

/** Throws {@link InvalidCountQueryError} naming the cap unless it is a usable cap or block. */
export function checkRule(schema: EventSchema, c: CapCandidate, ci: number, k: number, cap: CapRule): void {
  const where = () => `${whereCap(c, ci, k)} ${describeCap(cap)}`;
  if (cap.block !== undefined) {
    const extra = cap as {
      readonly windowMs?: unknown;
      readonly max?: unknown;
      readonly recencyMs?: unknown;
    };
    if (
      cap.block !== true ||
      extra.windowMs !== undefined ||
      extra.max !== undefined ||
      extra.recencyMs !== undefined
    ) {
      throw new InvalidCountQueryError(
        `${where()}: a block is exactly { level, block: true } (it has no window, max or recency); ` +
          'for a frequency cap give windowMs and max instead.',
      );
    }
    const spec = specOf(schema, cap.level, whereCap(c, ci, k));
    if (spec.kind !== 'id') {
      throw new InvalidCountQueryError(`${where()}: level "${cap.level}" is not an entity id dimension.`);
    }
    const value = c.entities[cap.level];
    if (value === undefined) {
      throw new InvalidCountQueryError(`${where()}: the candidate has no "${cap.level}" id in entities.`);
    }
    try {
      valueKey(spec, value);
    } catch (error) {
      throw new InvalidCountQueryError(`${where()}: ${(error as Error).message}`, { cause: error });
    }
    return;
  }
  if (cap.recencyMs !== undefined) {
    const extra = cap as { readonly windowMs?: unknown; readonly max?: unknown };
    if (extra.windowMs !== undefined || extra.max !== undefined) {
      throw new InvalidCountQueryError(
        `${where()}: a recency cap is { level, recencyMs, action?, viewType? } (it is max 1 over recencyMs); ` +
          'for a frequency cap give windowMs and max instead.',
      );
    }
    if (!Number.isSafeInteger(cap.recencyMs) || cap.recencyMs <= 0) {
      throw new InvalidCountQueryError(
        `${where()}: recencyMs must be a positive integer (ms); 0 or less would never refuse — leave the cap out for none.`,
      );
    }
    return;
  }
  if (!Number.isSafeInteger(cap.windowMs) || cap.windowMs <= 0) {
    throw new InvalidCountQueryError(`${where()}: windowMs must be a positive integer (ms).`);
  }
  if (cap.max === 0) {
    throw new InvalidCountQueryError(
      `${where()}: max 0 is ambiguous (some ad servers read it as "unlimited", others as "never"). ` +
        `Leave the cap out for no limit, or use { level: '${cap.level}', block: true } to never serve.`,
    );
  }
  if (!Number.isSafeInteger(cap.max) || cap.max < 1) {
    throw new InvalidCountQueryError(`${where()}: max must be an integer ≥ 1 (serves allowed per window).`);
  }
}
