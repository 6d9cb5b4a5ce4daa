/**
 * Reading a scenario file field by field: every accessor validates its value and, on error, throws
 * {@link ScenarioError} naming the field by its JSON path and what to do (docs/pacing-quality.md,
 * "Scenario format"). Shared by the scenario and its `regions` (`sim/regions/scenario.ts`).
 */
import { canonicalTimeZone } from '../shared/budget/time-zone.js';
import { inputErrorKind } from '../shared/errors.js';
import { isPacingMode, type PacingMode, pacingModeIds } from '../shared/pacing/modes.js';

/** Thrown for an invalid scenario; the message names the field (JSON path) and the fix. */
export class ScenarioError extends inputErrorKind(
  'ScenarioError',
  'sim.scenario',
  'field',
  (field) => `${field}: `,
) {}

/** A JSON object of the scenario file. */
export type Json = Record<string, unknown>;

const MICROS = 1_000_000;
/** The largest daily budget a scenario may give, dollars (the budgets API's limit). */
export const MAX_BUDGET_USD = 10_000_000;

/** True for a JSON object (not null, not an array). */
export function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Reads one object of the scenario file: each accessor validates and names the field on error. */
export class Reader {
  constructor(
    private readonly obj: Json,
    readonly path: string,
  ) {
    if (!isObject(obj)) throw new ScenarioError(path || '(root)', 'must be a JSON object.');
  }

  /** Rejects fields the format does not know (a typo would otherwise be silently ignored). */
  only(allowed: readonly string[]): void {
    for (const k of Object.keys(this.obj)) {
      if (!allowed.includes(k))
        throw new ScenarioError(this.at(k), `unknown field; allowed here: ${allowed.join(', ')}.`);
    }
  }

  at(k: string | number): string {
    return typeof k === 'number' ? `${this.path}[${k}]` : this.path ? `${this.path}.${k}` : k;
  }

  has(k: string): boolean {
    return this.obj[k] !== undefined;
  }

  raw(k: string): unknown {
    return this.obj[k];
  }

  string(k: string, fallback?: string): string {
    const v = this.obj[k] ?? fallback;
    if (typeof v !== 'string' || v.length === 0)
      throw new ScenarioError(this.at(k), `must be a non-empty string (got ${JSON.stringify(v)}).`);
    return v;
  }

  id(k: string): string {
    const v = this.string(k);
    if (!/^[A-Za-z0-9_.-]{1,64}$/.test(v))
      throw new ScenarioError(this.at(k), `${JSON.stringify(v)}: use 1–64 letters, digits, '_', '.', '-'.`);
    return v;
  }

  number(k: string, opts: { min?: number; max?: number; fallback?: number; integer?: boolean } = {}): number {
    const v = this.obj[k] ?? opts.fallback;
    if (typeof v !== 'number' || !Number.isFinite(v))
      throw new ScenarioError(this.at(k), `must be a finite number (got ${JSON.stringify(v)}).`);
    if (opts.integer && !Number.isInteger(v))
      throw new ScenarioError(this.at(k), `must be an integer (got ${v}).`);
    if (opts.min !== undefined && v < opts.min)
      throw new ScenarioError(this.at(k), `must be ≥ ${opts.min} (got ${v}).`);
    if (opts.max !== undefined && v > opts.max)
      throw new ScenarioError(this.at(k), `must be ≤ ${opts.max} (got ${v}).`);
    return v;
  }

  share(k: string, fallback?: number): number {
    return this.number(k, { min: 0, max: 1, ...(fallback === undefined ? {} : { fallback }) });
  }

  /** A daily budget in US dollars → micros (from $0.000001; $0 is refused: delete the plan instead). */
  budget(k: string): number {
    const usd = this.number(k, { max: MAX_BUDGET_USD });
    const micros = Math.round(usd * MICROS);
    if (!(micros > 0))
      throw new ScenarioError(
        this.at(k),
        `daily budget in USD must be > 0 (got ${usd}); pause a plan by removing it.`,
      );
    return micros;
  }

  instant(k: string): number {
    const v = this.obj[k];
    if (
      typeof v !== 'string' ||
      !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(v)
    )
      throw new ScenarioError(
        this.at(k),
        `must be an ISO 8601 instant with an offset, e.g. "2026-03-10T12:00:00-04:00" (got ${JSON.stringify(v)}).`,
      );
    const ms = Date.parse(v);
    if (!Number.isFinite(ms)) throw new ScenarioError(this.at(k), `${v} is not a valid instant.`);
    return ms;
  }

  /** A pacing mode of the registry (shared/pacing/modes.ts). */
  mode(k: string, fallback: PacingMode): PacingMode {
    const v = this.obj[k] ?? fallback;
    if (!isPacingMode(v))
      throw new ScenarioError(
        this.at(k),
        `must be a pacing mode: ${pacingModeIds().join(', ')} (got ${JSON.stringify(v)}).`,
      );
    return v;
  }

  timeZone(k: string, fallback?: string): string {
    const v = this.string(k, fallback);
    try {
      return canonicalTimeZone(v);
    } catch {
      throw new ScenarioError(
        this.at(k),
        `${JSON.stringify(v)} is not an IANA time zone (e.g. "America/New_York").`,
      );
    }
  }

  array(k: string, required = false): unknown[] {
    const v = this.obj[k];
    if (v === undefined && !required) return [];
    if (!Array.isArray(v)) throw new ScenarioError(this.at(k), 'must be an array.');
    return v;
  }

  child(k: string): Reader {
    return new Reader((this.obj[k] ?? {}) as Json, this.at(k));
  }

  item(k: string, i: number, v: unknown): Reader {
    return new Reader(v as Json, `${this.at(k)}[${i}]`);
  }
}
