/**
 * The controller state of one plan: what the pacer stores beside the published parameters every
 * tick, so a new leader continues exactly where the old one stopped. Every field is an integer (or
 * a short string) — the controller quantises as it goes — so `decodeState(encodeState(s))` equals
 * `s` and a continued run is bit-identical to an uninterrupted one.
 *
 * Encoding (`encodeState`): the format version and the mode (`1e` even, `1a` ASAP), then the
 * fields in a fixed order as decimal integers, all separated by `,` (70–110 bytes for realistic
 * budgets, ≤ 140 for $10 M ones). Decimal because it is the cheapest to produce in JavaScript
 * (the pacer encodes 100,000 states a tick) and the simplest to read in any language.
 */
import type { PacingMode } from '../../budget/model.js';

/** Fixed-point scale of the integral and the pressure (u × 10 000). */
export const PRESSURE_SCALE = 10_000;
/** Fixed-point scale of the accumulated gain (seconds × 10⁶). */
export const GAIN_SCALE = 1_000_000;

/** See the module comment; docs/pacing.md lists every field. */
export interface ControllerState {
  /** The plan-day (`YYYY-MM-DD`, advertiser-local) this state belongs to. */
  readonly day: string;
  readonly mode: PacingMode;
  /** E(t) passes through (anchorSec × 1000, anchorMicros) … */
  readonly anchorSec: number;
  readonly anchorMicros: number;
  /** … and ends at this budget. */
  readonly budgetMicros: number;
  /** Fingerprint of the day profile the curve was built from (0 for flat curves). */
  readonly shape: number;
  /** Integral term, × PRESSURE_SCALE. */
  readonly integral: number;
  /** Published pressure u = ln throttle + κ ln multiplier, × PRESSURE_SCALE. */
  readonly pressure: number;
  /** Time of the step that produced this state, epoch seconds. */
  readonly lastSec: number;
  /** Committed spend (confirmed + in flight + leased) seen then. */
  readonly lastCommitted: number;
  /** E(t) then (continuity when the curve has to be rebuilt without its forecast). */
  readonly lastExpected: number;
  /** Float leased to guards, smoothed (micros): what the guards hold besides the spend. */
  readonly leasedAvg: number;
  /** Hour slot the learning accumulators belong to (−1: none). */
  readonly accSlot: number;
  /** Committed spend over the slot's uncensored intervals, micros. */
  readonly accSpend: number;
  /** Σ e^u × seconds over the same intervals, × GAIN_SCALE. */
  readonly accGain: number;
  /** Seconds of the slot observed uncensored. */
  readonly accSeconds: number;
  /** A closed slot's observation not yet written into the forecast (−1: none). */
  readonly pendSlot: number;
  /** The pending observation belongs to the day before `day`. */
  readonly pendPrevDay: boolean;
  /** Its quantised level and coverage (1/32 units). */
  readonly pendLevel: number;
  readonly pendCover: number;
}

/**
 * The concrete state objects the controller creates and decodes: plain readonly data plus a
 * private slot for the curve memo (never encoded, invisible to equality checks). A decoded
 * state has no memo; the controller rebuilds it from the stored forecast.
 */
export class StateRecord implements ControllerState {
  readonly day: string;
  readonly mode: PacingMode;
  readonly anchorSec: number;
  readonly anchorMicros: number;
  readonly budgetMicros: number;
  readonly shape: number;
  readonly integral: number;
  readonly pressure: number;
  readonly lastSec: number;
  readonly lastCommitted: number;
  readonly lastExpected: number;
  readonly leasedAvg: number;
  readonly accSlot: number;
  readonly accSpend: number;
  readonly accGain: number;
  readonly accSeconds: number;
  readonly pendSlot: number;
  readonly pendPrevDay: boolean;
  readonly pendLevel: number;
  readonly pendCover: number;
  #memo: unknown;

  constructor(s: ControllerState, memo?: unknown) {
    this.day = s.day;
    this.mode = s.mode;
    this.anchorSec = s.anchorSec;
    this.anchorMicros = s.anchorMicros;
    this.budgetMicros = s.budgetMicros;
    this.shape = s.shape;
    this.integral = s.integral;
    this.pressure = s.pressure;
    this.lastSec = s.lastSec;
    this.lastCommitted = s.lastCommitted;
    this.lastExpected = s.lastExpected;
    this.leasedAvg = s.leasedAvg;
    this.accSlot = s.accSlot;
    this.accSpend = s.accSpend;
    this.accGain = s.accGain;
    this.accSeconds = s.accSeconds;
    this.pendSlot = s.pendSlot;
    this.pendPrevDay = s.pendPrevDay;
    this.pendLevel = s.pendLevel;
    this.pendCover = s.pendCover;
    this.#memo = memo;
  }

  /** The memo attached by the controller that created this state (undefined after a decode). */
  static memoOf(s: ControllerState): unknown {
    return s instanceof StateRecord ? s.#memo : undefined;
  }
}

/** A decimal integer (optional leading `-`, 1–16 digits) or undefined; no regex (hot path). */
function parseInteger(p: string): number | undefined {
  const neg = p.charCodeAt(0) === 45;
  const from = neg ? 1 : 0;
  if (p.length - from < 1 || p.length - from > 16) return undefined;
  let n = 0;
  for (let i = from; i < p.length; i++) {
    const d = p.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return undefined;
    n = n * 10 + d;
  }
  return neg && n !== 0 ? -n : n;
}

function dayNumber(day: string): number {
  return Number(day.replaceAll('-', ''));
}

function dayString(n: number): string | undefined {
  const s = String(n);
  if (!/^\d{8}$/.test(s)) return undefined;
  return `${s.slice(0, 4)}-${s.slice(4, 6)}-${s.slice(6, 8)}`;
}

/** Compact text form (see the module comment). */
export function encodeState(s: ControllerState): string {
  const pend = s.pendSlot < 0 ? -1 : s.pendSlot + (s.pendPrevDay ? 32 : 0);
  const ints = [
    dayNumber(s.day),
    s.anchorSec,
    s.anchorMicros,
    s.budgetMicros,
    s.shape,
    s.integral,
    s.pressure,
    s.lastSec,
    s.lastCommitted,
    s.lastExpected,
    s.leasedAvg,
    s.accSlot,
    s.accSpend,
    s.accGain,
    s.accSeconds,
    pend,
    s.pendLevel,
    s.pendCover,
  ];
  return `1${s.mode === 'asap' ? 'a' : 'e'},${ints.join(',')}`;
}

/** Parses {@link encodeState}'s output; undefined when the text is not a state of this format. */
export function decodeState(raw: string): ControllerState | undefined {
  const parts = raw.split(',');
  if (parts.length !== 19) return undefined;
  const head = parts[0];
  if (head !== '1e' && head !== '1a') return undefined;
  const v: number[] = [];
  for (let i = 1; i < parts.length; i++) {
    const n = parseInteger(parts[i] as string);
    if (n === undefined) return undefined;
    v.push(n);
  }
  const [dayN, anchorSec, anchorMicros, budgetMicros, shape, integral, pressure, lastSec] = v as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const [
    lastCommitted,
    lastExpected,
    leasedAvg,
    accSlot,
    accSpend,
    accGain,
    accSeconds,
    pend,
    pendLevel,
    pendCover,
  ] = v.slice(8) as [number, number, number, number, number, number, number, number, number, number];
  const day = dayString(dayN);
  if (
    day === undefined ||
    budgetMicros < 0 ||
    anchorMicros < 0 ||
    leasedAvg < 0 ||
    integral > 0 ||
    pressure > 0
  )
    return undefined;
  if (accSlot < -1 || accSlot > 24 || pend < -1 || pend > 56) return undefined;
  return new StateRecord({
    day,
    mode: head === '1a' ? 'asap' : 'even',
    anchorSec,
    anchorMicros,
    budgetMicros,
    shape,
    integral,
    pressure,
    lastSec,
    lastCommitted,
    lastExpected,
    leasedAvg,
    accSlot,
    accSpend,
    accGain,
    accSeconds,
    pendSlot: pend < 0 ? -1 : pend % 32,
    pendPrevDay: pend >= 32,
    pendLevel,
    pendCover,
  });
}
