/**
 * The controller state of one plan: what the pacer stores beside the published parameters every
 * tick, so a new leader continues exactly where the old one stopped. Every field is an integer (or
 * a short string) — the controller quantises as it goes — so `decodeState(encodeState(s))` equals
 * `s` and a continued run is bit-identical to an uninterrupted one.
 *
 * Encoding (`encodeState`): the format version and the mode's state code (`1e` even, `1a` ASAP:
 * shared/pacing/modes.ts), then the fields in a fixed order as decimal integers, all separated by
 * `,` (115–135 bytes for realistic budgets, < 150 for $10 M ones). Decimal because it is the
 * cheapest to produce in JavaScript (the pacer encodes 100,000 states a tick) and the simplest to
 * read in any language. A state code this process does not know is an error
 * (`UnknownPacingModeError`), never read as another mode.
 */
import { writeField } from '../decimal.js';
import { type PacingMode, pacingModeOf, pacingModeOfStateCode, stateCodeByteOf } from '../modes.js';

/** Fixed-point scale of the integral and the pressure (u × 10 000). */
export const PRESSURE_SCALE = 10_000;
/** Fixed-point scale of the accumulated gain (seconds × 10⁶). */
export const GAIN_SCALE = 1_000_000;

/**
 * A controller state (see the module comment; docs/pacing.md lists every field): plain readonly
 * data plus a private slot for the curve memo (never encoded, invisible to equality checks). A
 * decoded state has no memo; the controller rebuilds it from the stored forecast.
 */
export class StateRecord {
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
  /** Spend (confirmed + in flight) seen then. */
  readonly lastCommitted: number;
  /** E(t) then (continuity when the curve has to be rebuilt without its forecast). */
  readonly lastExpected: number;
  /** Float leased to guards, smoothed (micros): what the guards hold besides the spend. */
  readonly leasedAvg: number;
  /** Hour slot the learning accumulators belong to (−1: none). */
  readonly accSlot: number;
  /** Spend over the slot's uncensored intervals, micros. */
  readonly accSpend: number;
  /** Σ e^u × seconds over the same intervals, × GAIN_SCALE. */
  readonly accGain: number;
  /** Seconds of the slot observed uncensored. */
  readonly accSeconds: number;
  /**
   * Ticks of those intervals that saw new spend: the evidence behind the slot's level (memo.ts
   * `observation`). −1: unknown (a state written mid-slot by a leader that did not count them).
   */
  readonly accEvents: number;
  /** A closed slot's observation not yet written into the forecast (−1: none). */
  readonly pendSlot: number;
  /** The pending observation belongs to the day before `day`. */
  readonly pendPrevDay: boolean;
  /** Its quantised level and coverage (1/32 units). */
  readonly pendLevel: number;
  readonly pendCover: number;
  #memo: unknown;
  #held: unknown;

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
    this.accEvents = s.accEvents;
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

  /**
   * The memo of the state held for the same plan when this one was decoded, if the two agree on
   * the day's profile but not on the anchor (the profile is reused, the curve rebuilt).
   */
  static heldMemoOf(s: ControllerState): unknown {
    return s instanceof StateRecord ? s.#held : undefined;
  }

  /**
   * Gives `to` (a state just decoded) the memo of `from` when the two agree on everything the
   * memo's curve is built from, or as {@link heldMemoOf} when they agree on the day's profile
   * only; the controller still checks either against the forecast it is stepped with (memo.ts
   * `memoOf`), as for its own states.
   */
  static carryMemo(to: StateRecord, from: ControllerState | undefined): void {
    if (!(from instanceof StateRecord) || from.#memo === undefined || !sameProfileInputs(to, from)) return;
    if (
      to.anchorSec === from.anchorSec &&
      to.anchorMicros === from.anchorMicros &&
      to.budgetMicros === from.budgetMicros
    )
      to.#memo = from.#memo;
    else to.#held = from.#memo;
  }
}

/**
 * The fields the day's profile is a function of (with the plan's forecast): the day, the mode,
 * the shape's fingerprint, and an observation of the day before still pending (the profile folds
 * it in). With the anchor (instant, value) and the budget, they are E(t)'s inputs.
 */
function sameProfileInputs(a: ControllerState, b: ControllerState): boolean {
  return (
    a.day === b.day &&
    a.mode === b.mode &&
    a.shape === b.shape &&
    a.pendPrevDay === b.pendPrevDay &&
    (!a.pendPrevDay ||
      (a.pendSlot === b.pendSlot && a.pendLevel === b.pendLevel && a.pendCover === b.pendCover))
  );
}

/** The state's data (what is encoded): every public field of {@link StateRecord}. */
export type ControllerState = Pick<StateRecord, keyof StateRecord>;

function dayNumber(day: string): number {
  return Number(day.replaceAll('-', ''));
}

let lastDay = '';
let lastDayNumber = 0;

/** {@link dayNumber}, remembering the last day (a tick encodes thousands of states of one day). */
function dayNumberOf(day: string): number {
  if (day !== lastDay) {
    lastDayNumber = dayNumber(day);
    lastDay = day;
  }
  return lastDayNumber;
}

function dayString(n: number): string | undefined {
  const s = String(n);
  if (!/^\d{8}$/.test(s)) return undefined;
  return `${s.slice(0, 4)}-${s.slice(4, 6)}-${s.slice(6, 8)}`;
}

/** The plain integer fields, in their encoded order (between the day and the pending observation). */
const INT_FIELDS = [
  'anchorSec',
  'anchorMicros',
  'budgetMicros',
  'shape',
  'integral',
  'pressure',
  'lastSec',
  'lastCommitted',
  'lastExpected',
  'leasedAvg',
  'accSlot',
  'accSpend',
  'accGain',
  'accSeconds',
] as const;
type IntField = (typeof INT_FIELDS)[number];

/** A blank state (no day, nothing anchored, nothing learned): what new plan-days and decodes start from. */
export const BLANK_STATE: ControllerState = Object.freeze({
  day: '',
  mode: 'even',
  anchorSec: 0,
  anchorMicros: 0,
  budgetMicros: 0,
  shape: 0,
  integral: 0,
  pressure: 0,
  lastSec: 0,
  lastCommitted: 0,
  lastExpected: 0,
  leasedAvg: 0,
  accSlot: -1,
  accSpend: 0,
  accGain: 0,
  accSeconds: 0,
  accEvents: 0,
  pendSlot: -1,
  pendPrevDay: false,
  pendLevel: 0,
  pendCover: 0,
});

/** Compact text form (see the module comment). */
export function encodeState(s: ControllerState): string {
  const pend = s.pendSlot < 0 ? -1 : s.pendSlot + (s.pendPrevDay ? 32 : 0);
  const day = dayNumberOf(s.day);
  const b = ENCODE_BUFFER;
  b[0] = 0x31; // '1'
  b[1] = stateCodeByteOf(s.mode);
  let p = writeField(b, 2, 0x2c, day);
  // INT_FIELDS, in order (decodeState reads them by that list; the round-trip tests hold the two
  // together): one property read each, no keyed loop.
  p = writeField(b, p, 0x2c, s.anchorSec);
  p = writeField(b, p, 0x2c, s.anchorMicros);
  p = writeField(b, p, 0x2c, s.budgetMicros);
  p = writeField(b, p, 0x2c, s.shape);
  p = writeField(b, p, 0x2c, s.integral);
  p = writeField(b, p, 0x2c, s.pressure);
  p = writeField(b, p, 0x2c, s.lastSec);
  p = writeField(b, p, 0x2c, s.lastCommitted);
  p = writeField(b, p, 0x2c, s.lastExpected);
  p = writeField(b, p, 0x2c, s.leasedAvg);
  p = writeField(b, p, 0x2c, s.accSlot);
  p = writeField(b, p, 0x2c, s.accSpend);
  p = writeField(b, p, 0x2c, s.accGain);
  p = writeField(b, p, 0x2c, packedSeconds(s));
  p = writeField(b, p, 0x2c, pend);
  p = writeField(b, p, 0x2c, s.pendLevel);
  p = writeField(b, p, 0x2c, s.pendCover);
  // p < 0: a field was not a safe integer (a bug upstream): the text form shows what it was.
  return p < 0 ? encodeStateText(s, day, pend) : b.toString('latin1', 0, p);
}

/**
 * The `accSeconds` field as stored: the seconds plus {@link EVENTS_UNIT} × (accEvents + 1) —
 * `3001234` is 1,234 s and 2 ticks with spend; below EVENTS_UNIT, the seconds of a state whose
 * ticks were not counted. One field, not a new one, so the state keeps its 19 fields and a leader
 * of the version before reads it (a rolling deploy: leaders of both versions take over from each
 * other; a 20th field would make the older decoder drop the state and re-anchor the plan). That
 * leader reads the slot as fully observed (its coverage is capped at the whole slot) for the one
 * slot it closes; everything else it reads as written.
 */
function packedSeconds(s: ControllerState): number {
  return s.accEvents < 0 ? s.accSeconds : s.accSeconds + EVENTS_UNIT * (s.accEvents + 1);
}

/** See {@link packedSeconds}: a slot's seconds (≤ 3,600 + one tick gap) stay far below it. */
const EVENTS_UNIT = 1_000_000;

/** The same text from template strings (for a field that is not a safe integer). */
function encodeStateText(s: ControllerState, day: number, pend: number): string {
  let out = `1${pacingModeOf(s.mode).stateCode},${day}`;
  for (const k of INT_FIELDS) out += `,${k === 'accSeconds' ? packedSeconds(s) : s[k]}`;
  return `${out},${pend},${s.pendLevel},${s.pendCover}`;
}

/**
 * Room for the longest state (19 fields of at most 17 characters and their commas), written per
 * call and copied into one flat string. The pacer encodes every changed plan every tick; the
 * template string's 18-part rope, flattened later by the comparison and the join, costs ~3 µs per
 * plan (a CPU profile of `npm run bench -- pacer`).
 */
const ENCODE_BUFFER = Buffer.alloc(19 * 18 + 2);

/**
 * Parses {@link encodeState}'s output; undefined when the text is not a state of this format.
 * Throws `UnknownPacingModeError` (modes.ts) for a state of this format whose mode code this
 * process does not know (written by a version with more modes): continuing it as another mode
 * would publish that mode's curve for the plan.
 *
 * `held`: the state this process holds for the same plan (a warm instance taking over). The
 * decoded state takes over `held`'s curve memo when their curve inputs agree, or its day profile
 * when the profile's inputs agree ({@link StateRecord.carryMemo}), instead of rebuilding them at its
 * first step: a takeover at 100,000 campaigns decodes 150,000-odd states.
 */
export function decodeState(raw: string, held?: ControllerState): ControllerState | undefined {
  const code = raw.charCodeAt(1); // the mode's state code: one letter a–z
  if (raw.charCodeAt(0) !== 0x31 || code < 0x61 || code > 0x7a || raw.charCodeAt(2) !== 0x2c)
    return undefined;
  const v = readFields(raw, 3);
  if (v === undefined) return undefined;
  const day = dayStringOf(v[0] as number);
  const pend = v[INT_FIELDS.length + 1] as number;
  if (day === undefined || pend < -1 || pend > 56) return undefined;
  const s = new StateRecord(BLANK_STATE);
  // Fill the integer fields in INT_FIELDS order (the one definition of the format's field order).
  const w = s as unknown as Record<IntField, number>;
  for (let i = 0; i < INT_FIELDS.length; i++) w[INT_FIELDS[i] as IntField] = v[i + 1] as number;
  if (s.budgetMicros < 0 || s.anchorMicros < 0 || s.leasedAvg < 0 || s.integral > 0 || s.pressure > 0)
    return undefined;
  if (s.accSlot < -1 || s.accSlot > 24) return undefined;
  const packed = s.accSeconds;
  if (packed < 0) return undefined;
  const d = s as unknown as { -readonly [K in keyof ControllerState]: ControllerState[K] };
  d.accSeconds = packed % EVENTS_UNIT;
  d.accEvents = Math.floor(packed / EVENTS_UNIT) - 1;
  const mode = pacingModeOfStateCode(raw.charAt(1), raw).id as PacingMode;
  d.day = day;
  d.mode = mode;
  d.pendSlot = pend < 0 ? -1 : pend % 32;
  d.pendPrevDay = pend >= 32;
  d.pendLevel = v[INT_FIELDS.length + 2] as number;
  d.pendCover = v[INT_FIELDS.length + 3] as number;
  StateRecord.carryMemo(s, held);
  return s;
}

/** The numbers of a state after its head: the day, INT_FIELDS, the pending slot, level, cover. */
const FIELD_VALUES = new Float64Array(INT_FIELDS.length + 4);

/**
 * Reads {@link FIELD_VALUES} from `raw` at `p` (decimal integers, each an optional `-` and 1–16
 * digits, separated by `,`, nothing after the last); undefined when the text is not that. One scan
 * of the text, no split into 19 strings: a takeover decodes 100,000-odd states at once.
 */
function readFields(raw: string, from: number): Float64Array | undefined {
  const v = FIELD_VALUES;
  const n = raw.length;
  let p = from;
  for (let k = 0; k < v.length; k++) {
    const neg = raw.charCodeAt(p) === 45;
    if (neg) p++;
    const start = p;
    let x = 0;
    for (; p < n; p++) {
      const d = raw.charCodeAt(p) - 48;
      if (d < 0 || d > 9) break;
      x = x * 10 + d;
    }
    if (p === start || p - start > 16) return undefined;
    v[k] = neg && x !== 0 ? -x : x;
    if (k + 1 < v.length) {
      if (raw.charCodeAt(p) !== 0x2c) return undefined;
      p++;
    } else if (p !== n) return undefined;
  }
  return v;
}

let lastDayNumberRead = 0;
let lastDayRead: string | undefined;

/** {@link dayString}, remembering the last day (the states of a takeover share a few days). */
function dayStringOf(n: number): string | undefined {
  if (n !== lastDayNumberRead || lastDayRead === undefined) {
    lastDayRead = dayString(n);
    lastDayNumberRead = n;
  }
  return lastDayRead;
}
