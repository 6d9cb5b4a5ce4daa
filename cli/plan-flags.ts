/**
 * The plan `budgets plan put` writes, from its flags: ids by level, the daily amount or a flight
 * with its cap, the pacing mode, dayparting and the plan's own curve — each refused with the flag
 * and what to give (strict parsing: no amount `Number()` would also accept).
 */
import { readFileSync } from 'node:fs';
import { DaypartError, parseDaypartText } from '../shared/budget/daypart.js';
import type { BudgetPlan, PlanLevel } from '../shared/budget/model.js';
import { PlanCurveError, parsePlanCurveText } from '../shared/budget/plan-curve.js';
import { isTimeZone } from '../shared/budget/time-zone.js';
import { type PacingMode, pacingModeIds } from '../shared/pacing/modes.js';
import { CliUsageError } from './common.js';
import { budgetsUsage } from './usage.js';

export function need(value: string | undefined, flag: string): string {
  if (value === undefined || value === '')
    throw new CliUsageError(`--${flag} is required.\n${budgetsUsage()}`);
  return value;
}

/**
 * Dollars ("1000.50") → integer micros, exactly (no float rounding). Strict: plain decimal
 * digits only — no sign, spaces, exponent (`1e6`), hex (`0x10`), leading zeros or empty string.
 */
export function dollarsToMicros(value: string, flag = 'daily-budget'): number {
  const m = /^(0|[1-9]\d{0,8})(?:\.(\d{1,6}))?$/.exec(value);
  if (value.startsWith('-'))
    throw new CliUsageError(
      `--${flag} ${JSON.stringify(value)}: a budget cannot be negative; give dollars such as 1000 or 1000.50 (0 spends nothing).`,
    );
  if (!m)
    throw new CliUsageError(
      `--${flag} ${JSON.stringify(value)}: give dollars as a plain decimal such as 1000 or 1000.50 (up to 6 decimals).`,
    );
  return Number(m[1]) * 1_000_000 + Number((m[2] ?? '').padEnd(6, '0'));
}

/** A plain non-negative decimal integer (`0`, `250000000`); nothing `Number()` would also accept. */
export function parseMicros(flag: string, value: string): number {
  if (value.startsWith('-'))
    throw new CliUsageError(
      `--${flag} ${JSON.stringify(value)}: cannot be negative; give plain digits, e.g. 250000000 for $250.`,
    );
  if (!/^(0|[1-9]\d{0,15})$/.test(value) || !Number.isSafeInteger(Number(value))) {
    throw new CliUsageError(
      `--${flag} ${JSON.stringify(value)}: give integer micros as plain digits, e.g. 250000000 for $250.`,
    );
  }
  return Number(value);
}

/** An amount given as `--<flag> <dollars>` or `--<flag>-micros <integer>` (exactly one). */
function amountMicros(values: Record<string, unknown>, flag: string): number {
  const dollars = values[flag] as string | undefined;
  const micros = values[`${flag}-micros`] as string | undefined;
  if ((dollars === undefined) === (micros === undefined)) {
    throw new CliUsageError(`Give exactly one of --${flag} <dollars> or --${flag}-micros <integer>.`);
  }
  if (dollars !== undefined) return dollarsToMicros(dollars, flag);
  return parseMicros(`${flag}-micros`, micros as string);
}

const FLIGHT_FLAGS = ['flight-start', 'flight-end', 'flight-budget', 'flight-budget-micros'] as const;

/**
 * The daily amount and the flight of `plan put`: `--daily-budget` alone, or a whole flight
 * (start, end, budget) with its `--daily-cap`; anything in between is refused with what is missing.
 */
function budgetAndFlight(values: Record<string, unknown>): Pick<BudgetPlan, 'dailyBudgetMicros' | 'flight'> {
  const flightGiven = FLIGHT_FLAGS.filter((f) => values[f] !== undefined);
  const capGiven = values['daily-cap'] !== undefined || values['daily-cap-micros'] !== undefined;
  if (flightGiven.length === 0) {
    if (capGiven) {
      throw new CliUsageError(
        '--daily-cap caps a flight: add --flight-start, --flight-end and --flight-budget, or give --daily-budget for a daily plan.',
      );
    }
    return { dailyBudgetMicros: amountMicros(values, 'daily-budget') };
  }
  if (values['daily-budget'] !== undefined || values['daily-budget-micros'] !== undefined) {
    throw new CliUsageError(
      "A flight plan's daily amount is its cap: give --daily-cap <dollars> instead of --daily-budget.",
    );
  }
  return {
    dailyBudgetMicros: amountMicros(values, 'daily-cap'),
    flight: {
      startDay: need(values['flight-start'] as string | undefined, 'flight-start'),
      endDay: need(values['flight-end'] as string | undefined, 'flight-end'),
      budgetMicros: amountMicros(values, 'flight-budget'),
    },
  };
}

export function oneOf<T extends string>(flag: string, value: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(value)) {
    throw new CliUsageError(`--${flag} ${JSON.stringify(value)}: use ${allowed.join(', ')}.`);
  }
  return value as T;
}

/** The ids a plan level takes, and no others (a stray --campaign on an account plan is refused). */
function planIds(values: { level?: string; campaign?: string; arm?: string }) {
  const level = oneOf<PlanLevel>('level', need(values.level, 'level'), ['account', 'campaign', 'arm']);
  if (level === 'account' && values.campaign !== undefined) {
    throw new CliUsageError('--level account takes no --campaign (the account plan covers every campaign).');
  }
  if (level !== 'arm' && values.arm !== undefined) {
    throw new CliUsageError(`--level ${level} takes no --arm: use --level arm for an arm plan.`);
  }
  return {
    level,
    ...(level === 'account' ? {} : { campaignId: need(values.campaign, 'campaign') }),
    ...(level === 'arm' ? { armId: need(values.arm, 'arm') } : {}),
  };
}

/**
 * The plan `plan put` writes, from its flags (strict: see {@link planIds}, {@link dollarsToMicros};
 * `--pacing` is any mode of the registry, shared/pacing/modes.ts). The repository validates it.
 */
export function planFromFlags(values: {
  level?: string;
  account?: string;
  campaign?: string;
  arm?: string;
  'daily-budget'?: string;
  'daily-budget-micros'?: string;
  'daily-cap'?: string;
  'daily-cap-micros'?: string;
  'flight-start'?: string;
  'flight-end'?: string;
  'flight-budget'?: string;
  'flight-budget-micros'?: string;
  pacing?: string;
  daypart?: string;
  'daypart-zone'?: string;
  curve?: string;
}): BudgetPlan {
  return {
    ...planIds(values),
    accountId: need(values.account, 'account'),
    ...budgetAndFlight(values),
    pacingMode: oneOf('pacing', values.pacing ?? 'even', pacingModeIds()) as PacingMode,
    ...daypartOf(values.daypart, values['daypart-zone']),
    ...(values.curve === undefined ? {} : { curve: curveOf(values.curve) }),
  };
}

/** `--curve FILE`: the plan's own curve, read and checked (shared/budget/plan-curve.ts). */
function curveOf(file: string): number[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new CliUsageError(
      `--curve ${file}: cannot read it (${(error as NodeJS.ErrnoException).code ?? error}).`,
    );
  }
  try {
    return parsePlanCurveText(text);
  } catch (error) {
    if (error instanceof PlanCurveError) throw new CliUsageError(`--curve ${file}: ${error.message}`);
    throw error;
  }
}

/** `--daypart TEXT [--daypart-zone Z]` as a plan's `daypart` (none without --daypart). */
function daypartOf(text: string | undefined, zone: string | undefined): Pick<BudgetPlan, 'daypart'> {
  if (text === undefined) {
    if (zone !== undefined)
      throw new CliUsageError('--daypart-zone is the zone of --daypart windows: give --daypart too.');
    return {};
  }
  if (zone !== undefined && !isTimeZone(zone)) {
    throw new CliUsageError(
      `--daypart-zone ${JSON.stringify(zone)} is not a time zone: give an IANA name such as America/Los_Angeles.`,
    );
  }
  try {
    return { daypart: parseDaypartText(text, zone) };
  } catch (error) {
    if (error instanceof DaypartError) throw new CliUsageError(`--daypart: ${error.message}`);
    throw error;
  }
}
