/**
 * Pacing modes — how a plan's allowance grows over its day — as one registry. Everything that
 * knows a mode reads it here and nowhere else: the budget validator (`validatePlan`), the operator
 * CLI (`--pacing` and its help), the published contract's codec (the mode field of `p:<planId>`),
 * the controller's stored state (one letter after the format digit: `1e…`), the controller (the
 * curve function, whether it steers, whether the forecast shapes it), the fail-safe and the linear
 * baseline (`failSafeCurve`), the guard's default curve (`defaultExpectedMicros`) and the
 * simulator's scenario files. Adding a mode is an entry in {@link BUILT_IN} plus its curve function
 * in controller/curve.ts (docs/pacing.md, "Adding a pacing mode"); {@link registerPacingMode} adds
 * one at run time (tests).
 *
 * A mode this process does not know is an error wherever a mode must be understood — a plan's mode
 * (validation, the controller), a stored state's code, a published `p:` field — so a mode added in
 * a newer version is never paced as another one. Where only a safe ceiling is needed (the guard's
 * default curve, the fail-safe) an unknown mode gets the linear day curve.
 */
import type { DayWindow } from '../budget/time-zone.js';
import { errorKind, inputErrorKind } from '../errors.js';
import {
  asapCurve,
  evenCurve,
  flatCurve,
  linearDayCurve,
  linearExpected,
  type ModeCurveInput,
} from './controller/curve.js';
import {
  aheadCurve,
  aheadDayCurve,
  asapHourlyCurve,
  asapHourlyDayCurve,
  customCurve,
  frontLoadedSchedule,
} from './controller/mode-curves.js';
import { type CurvePoints, evaluateCurve } from './types.js';

/** What the code knows about one pacing mode. */
export interface PacingModeSpec {
  /**
   * The mode's name: a plan's `pacingMode`, the CLI's `--pacing` value, the mode field published
   * in `p:<planId>`. Lower-case letters, digits and `-` (1–32), starting with a letter.
   */
  readonly id: string;
  /**
   * One lower-case letter after the format digit of a stored controller state (`1e,…`). Never
   * reuse the letter of a removed mode: stored states outlive deploys.
   */
  readonly stateCode: string;
  /** What the mode does, one line (`budgets --help`). */
  readonly help: string;
  /**
   * True: the controller steers spend along E(t) (PI control of bid shading, then throttle).
   * False: throttle 1 and multiplier 1, E(t) is only the ceiling the guard enforces — switching
   * away from such a mode, the new curve starts from the spend so far, not from E.
   */
  readonly paced: boolean;
  /**
   * True: the controller computes the plan-day's traffic profile from the plan's forecast, passes
   * its weights to {@link curve} and stores its fingerprint (re-anchoring when it changes).
   */
  readonly shaped: boolean;
  /**
   * True: the controller re-anchors E(t) at the start of every hour slot, at the spend it read at
   * its last tick before that start, so the curve bounds each hour's spend on its own (a cap per
   * hour: `asap-hourly`) instead of the day's running total.
   */
  readonly hourly: boolean;
  /** The controller's E(t) from the anchor to the day's end (a function of controller/curve.ts). */
  curve(input: ModeCurveInput): CurvePoints;
  /**
   * E(t) over the whole day when the plan's parameters are stale, missing or invalid
   * (`failSafeParams`); also the curve of the linear baseline controller. The guard caps at it
   * whatever the throttle, so it must never be above what the plan may spend by then.
   */
  failSafeCurve(day: DayWindow, budgetMicros: number): CurvePoints;
  /** {@link failSafeCurve} at `nowMs`, without building it: the guard's default E(t) (every lease). */
  defaultExpectedMicros(budgetMicros: number, day: DayWindow, nowMs: number): number;
  /**
   * How the mode spreads a flight over its days: the share of the flight's budget due by the end
   * of fraction `x` of its days (φ(0) = 0, φ(1) = 1, non-decreasing). Absent: evenly, day by day
   * (shared/budget/flight.ts). A mode that gives one paces across days only, so it needs a flight:
   * `validatePlan` refuses it on a daily plan.
   */
  readonly flightSchedule?: (x: number) => number;
  /**
   * True: the mode paces to the plan's own curve (`BudgetPlan.curve`, passed to {@link curve} as
   * `quarters`); `validatePlan` requires one, and refuses a curve on a plan of any other mode.
   */
  readonly planCurve?: boolean;
}

/** A built-in mode: its id is its key in {@link BUILT_IN}. */
type Definition = Omit<PacingModeSpec, 'id'>;

/** How `even` paces a day (also each day of a `front-loaded` flight). */
const EVEN_DAY = {
  paced: true,
  shaped: true,
  hourly: false,
  curve: evenCurve,
  failSafeCurve: linearDayCurve,
  defaultExpectedMicros: linearExpected,
} as const;

/**
 * The modes of this version. The key is the id; {@link PacingMode} is derived from the keys, so a
 * new entry is a new member of the type, and every entry must give every field of the spec.
 */
const BUILT_IN = {
  even: {
    stateCode: 'e',
    help: 'spread over the day where the traffic is (the forecast shapes E(t); the controller shades bids, then throttles)',
    ...EVEN_DAY,
  },
  asap: {
    stateCode: 'a',
    help: 'the whole budget from the day’s first instant, at full speed (the guard alone caps spend)',
    paced: false,
    shaped: false,
    hourly: false,
    curve: asapCurve,
    failSafeCurve: (day, budgetMicros) => flatCurve(day.startMs, day.endMs, budgetMicros),
    defaultExpectedMicros: (budgetMicros) => budgetMicros,
  },
  ahead: {
    stateCode: 'h',
    help: 'even’s traffic-shaped curve run at 120 % of its pace, flat at the budget once reached (DV360’s “ahead”)',
    paced: true,
    shaped: true,
    hourly: false,
    curve: aheadCurve,
    failSafeCurve: aheadDayCurve,
    defaultExpectedMicros: (budgetMicros, day, nowMs) =>
      evaluateCurve(aheadDayCurve(day, budgetMicros), nowMs),
  },
  'asap-hourly': {
    stateCode: 's',
    help: 'as fast as possible, at most 10 × the even hourly share (budget ÷ the day’s hours) in any hour slot (DV360’s ASAP hourly cap)',
    paced: false,
    shaped: false,
    hourly: true,
    curve: asapHourlyCurve,
    failSafeCurve: asapHourlyDayCurve,
    defaultExpectedMicros: (budgetMicros, day, nowMs) =>
      evaluateCurve(asapHourlyDayCurve(day, budgetMicros), nowMs),
  },
  'front-loaded': {
    stateCode: 'f',
    help: 'a flight front-loaded over its days: its first half gets 25 % more than even (Ad Manager’s rule), each day paced like even; needs a flight',
    ...EVEN_DAY,
    flightSchedule: frontLoadedSchedule,
  },
  curve: {
    stateCode: 'c',
    help: 'the plan’s own curve (--curve FILE: 24 hourly or 96 quarter-hourly shares of the local day), steered like even',
    paced: true,
    shaped: false,
    hourly: false,
    curve: customCurve,
    failSafeCurve: linearDayCurve,
    defaultExpectedMicros: linearExpected,
    planCurve: true,
  },
} as const satisfies Record<string, Definition>;

/** A pacing mode of this version (`even` | `asap` | `ahead` | `asap-hourly` | `front-loaded` | `curve`); a plan's `pacingMode`. */
export type PacingMode = keyof typeof BUILT_IN;

/**
 * Thrown where a mode must be understood and is not known to this process; `mode` is the unknown
 * mode id, or the state code (`1x`) when it came from a stored state.
 */
export class UnknownPacingModeError extends inputErrorKind(
  'UnknownPacingModeError',
  'pacing.unknown-mode',
  'mode',
) {}

/** Thrown by {@link registerPacingMode} for a definition that breaks the registry's rules. */
export class PacingModeDefinitionError extends errorKind(
  'PacingModeDefinitionError',
  'pacing.mode-definition',
) {}

const byId = new Map<string, PacingModeSpec>();
const byStateCode = new Map<string, PacingModeSpec>();
/** The state code's character code by mode id (the pacer encodes every changed state every tick). */
const stateBytes = new Map<string, number>();

const ID = /^[a-z][a-z0-9-]{0,31}$/;

/**
 * Adds a mode (after the built-in ones). Returns a function that removes it again (tests). Throws
 * {@link PacingModeDefinitionError} for a malformed id or state code, or one already taken.
 */
export function registerPacingMode(spec: PacingModeSpec): () => void {
  const bad = (what: string) => {
    throw new PacingModeDefinitionError(`pacing mode ${JSON.stringify(spec.id)}: ${what}`);
  };
  if (!ID.test(spec.id)) bad('the id must be 1–32 lower-case letters, digits or -, starting with a letter');
  if (!/^[a-z]$/.test(spec.stateCode)) bad('the state code must be one lower-case letter');
  if (byId.has(spec.id)) bad('a mode of this id exists');
  const taken = byStateCode.get(spec.stateCode);
  if (taken) bad(`state code "${spec.stateCode}" is mode ${taken.id}'s`);
  if (spec.help.includes('\n')) bad('the help text must be one line');
  const frozen = Object.freeze({ ...spec });
  byId.set(frozen.id, frozen);
  byStateCode.set(frozen.stateCode, frozen);
  stateBytes.set(frozen.id, frozen.stateCode.charCodeAt(0));
  return () => {
    if (byId.get(frozen.id) !== frozen) return;
    byId.delete(frozen.id);
    byStateCode.delete(frozen.stateCode);
    stateBytes.delete(frozen.id);
  };
}

for (const [id, definition] of Object.entries(BUILT_IN)) registerPacingMode({ id, ...definition });

/** The ids of every known mode, built-in ones first. */
export function pacingModeIds(): string[] {
  return [...byId.keys()];
}

/** The mode of `id`, or undefined. */
export function findPacingMode(id: unknown): PacingModeSpec | undefined {
  return typeof id === 'string' ? byId.get(id) : undefined;
}

/** True for the id of a known mode. */
export function isPacingMode(id: unknown): id is PacingMode {
  return findPacingMode(id) !== undefined;
}

/** The mode of `id`; throws {@link UnknownPacingModeError} for a mode this process does not know. */
export function pacingModeOf(id: string): PacingModeSpec {
  const spec = byId.get(id);
  if (spec) return spec;
  throw new UnknownPacingModeError(
    id,
    `pacing mode ${JSON.stringify(id)} is not known to this version (known: ${pacingModeIds().join(', ')}): ` +
      'deploy a version that knows it to every pacer and ad server before any plan uses it (docs/pacing.md, "Adding a pacing mode").',
  );
}

/** The character code of mode `id`'s state code; throws {@link UnknownPacingModeError} like {@link pacingModeOf}. */
export function stateCodeByteOf(id: string): number {
  return stateBytes.get(id) ?? pacingModeOf(id).stateCode.charCodeAt(0);
}

/**
 * The mode whose state code is `code`; throws {@link UnknownPacingModeError} for a code this
 * process does not know (`state`: the stored text, for the message).
 */
export function pacingModeOfStateCode(code: string, state: string): PacingModeSpec {
  const spec = byStateCode.get(code);
  if (spec) return spec;
  const known = [...byStateCode.values()].map((m) => `${m.stateCode} ${m.id}`).join(', ');
  throw new UnknownPacingModeError(
    `1${code}`,
    `stored controller state ${JSON.stringify(`${state.slice(0, 24)}…`)} has pacing mode code "${code}", which this version does not know ` +
      `(known: ${known}): a version that knows the mode wrote it, and only such a version can continue it — deploy it to every pacer (docs/pacing.md, "Adding a pacing mode").`,
  );
}

/** The linear day curve: the fail-safe and default of a mode this process does not know. */
const LINEAR: Pick<PacingModeSpec, 'failSafeCurve' | 'defaultExpectedMicros'> = {
  failSafeCurve: linearDayCurve,
  defaultExpectedMicros: linearExpected,
};

/**
 * The fail-safe and default curves of mode `id`; the linear day curve's for a mode this process
 * does not know (a newer version's plan): a ceiling never above linear, so the cap holds.
 */
export function safeCurvesOf(id: string): Pick<PacingModeSpec, 'failSafeCurve' | 'defaultExpectedMicros'> {
  return byId.get(id) ?? LINEAR;
}

/** `budgets --help`'s lines about `--pacing`: every mode with its help. */
export function pacingModesHelp(indent: string): string {
  return [...byId.values()].map((m) => `${indent}${m.id.padEnd(12)} ${m.help}`).join('\n');
}
