/**
 * Flights: a plan with a lifetime budget over a run of local days and a daily cap
 * (docs/spend.md, "Flights"). On each day of its flight the plan is a daily plan whose budget is
 * the day's share of what the flight has left:
 *
 *   D(k) = min(cap, ⌊(F − S(<k)) / days left⌋), the last day min(cap, F − S(<k))
 *
 * where S(<k) is the spend of the flight's earlier days as closed from the ledger
 * (`flightSpent`). A day that under-delivers leaves more for the following days (catch-up), never
 * more than the cap. An earlier day not closed yet counts as if it had spent the whole cap, so a
 * late or failed close can only lower today's budget, never let the flight pass its total.
 * Outside its flight the plan's budget is 0.
 *
 * A pacing mode with a flight schedule φ (`front-loaded`) shares what is left by the schedule's
 * weight of the day among the days left instead: D(k) = min(cap, ⌊(F − S(<k)) · w(k) / Σ w(≥k)⌋)
 * with w(k) = φ((k + 1)/n) − φ(k/n). An even flight is the case φ(x) = x, computed in integers.
 */
import { findPacingMode } from '../pacing/modes.js';
import type { BudgetPlan } from './model.js';
import { addDays, daysBetween, InvalidDayError, parseDay } from './time-zone.js';

/** A flight: local days (the account's zone) from `startDay` to `endDay` inclusive. */
export interface Flight {
  /** First day, `YYYY-MM-DD`. */
  readonly startDay: string;
  /** Last day, `YYYY-MM-DD`, inclusive. */
  readonly endDay: string;
  /** Lifetime budget, integer micros. */
  readonly budgetMicros: number;
}

/** One closed day of a flight: its spend from the ledger and when it was summed (epoch ms). */
export interface ClosedFlightDay {
  readonly micros: number;
  readonly at: number;
}

/** Closed days by local date (`flightSpent` of a plan; written only by the flight closer). */
export type FlightSpent = Readonly<Record<string, ClosedFlightDay>>;

/** Longest flight accepted, days (a year; the ledger keeps 400 days). */
export const MAX_FLIGHT_DAYS = 366;

/** Why a flight is invalid: the field and what to do. Thrown as the model's validation error. */
export interface FlightProblem {
  readonly field: string;
  readonly message: string;
}

/** Problems of a plan's flight against its daily cap (empty when valid). */
export function flightProblems(flight: Flight, dailyCapMicros: number): FlightProblem[] {
  const out: FlightProblem[] = [];
  for (const field of ['startDay', 'endDay'] as const) {
    try {
      parseDay(String(flight[field]));
    } catch (error) {
      if (!(error instanceof InvalidDayError)) throw error;
      out.push({ field: `flight.${field}`, message: `${error.message} Give the local date as YYYY-MM-DD.` });
    }
  }
  if (out.length > 0) return out;
  const days = daysBetween(flight.startDay, flight.endDay) + 1;
  if (days < 1) {
    out.push({
      field: 'flight.endDay',
      message: `${flight.endDay} is before the start ${flight.startDay}: the end day must be on or after the start.`,
    });
    return out;
  }
  if (days > MAX_FLIGHT_DAYS) {
    out.push({
      field: 'flight.endDay',
      message: `the flight has ${days} days: at most ${MAX_FLIGHT_DAYS}; split it into flights of a year or less.`,
    });
  }
  const f = flight.budgetMicros;
  if (typeof f !== 'number' || !Number.isSafeInteger(f) || f <= 0) {
    out.push({
      field: 'flight.budgetMicros',
      message: `${JSON.stringify(f)} is not a flight budget: give integer micros above 0 ($1 = 1000000).`,
    });
    return out;
  }
  if (dailyCapMicros > f) {
    out.push({
      field: 'dailyBudgetMicros',
      message: `the daily cap ${dailyCapMicros} is above the flight budget ${f}: lower the cap to at most the flight.`,
    });
  } else if (dailyCapMicros * days < f) {
    out.push({
      field: 'dailyBudgetMicros',
      message: `the daily cap × ${days} days = ${dailyCapMicros * days} is below the flight budget ${f}: the flight could never be spent; raise the cap or lower the budget.`,
    });
  }
  return out;
}

/** True when `day` is a day of the plan's flight (always true for a plan without one). */
export function inFlight(plan: Pick<BudgetPlan, 'flight'>, day: string): boolean {
  const f = plan.flight;
  return !f || (day >= f.startDay && day <= f.endDay);
}

/**
 * The flight's days before `day`: the sum of the closed ones and how many ended without a close
 * (a stored amount that is not a finite number counts as 0 spent).
 */
export function flightClosedBefore(
  plan: Pick<BudgetPlan, 'flight' | 'flightSpent'>,
  day: string,
): { readonly closedMicros: number; readonly unclosedDays: number } {
  const f = plan.flight;
  let closedMicros = 0;
  let unclosedDays = 0;
  if (!f) return { closedMicros, unclosedDays };
  for (let d = f.startDay; d < day && d <= f.endDay; d = addDays(d, 1)) {
    const closed = plan.flightSpent?.[d];
    if (!closed) unclosedDays++;
    else if (Number.isFinite(closed.micros)) closedMicros += Math.max(0, closed.micros);
  }
  return { closedMicros, unclosedDays };
}

/**
 * The flight's spend before `day` as the budget counts it: closed days at their sum, earlier days
 * not closed yet at the whole cap (the conservative reading), micros.
 */
export function flightSpentBefore(
  plan: Pick<BudgetPlan, 'flight' | 'flightSpent' | 'dailyBudgetMicros'>,
  day: string,
): number {
  const { closedMicros, unclosedDays } = flightClosedBefore(plan, day);
  return closedMicros + unclosedDays * plan.dailyBudgetMicros;
}

/** The plan's budget on `day`: its daily budget, or for a flight the day's share (module doc). */
export function dayBudgetMicros(
  plan: Pick<BudgetPlan, 'flight' | 'flightSpent' | 'dailyBudgetMicros' | 'pacingMode'>,
  day: string,
): number {
  const f = plan.flight;
  if (!f) return plan.dailyBudgetMicros;
  if (day < f.startDay || day > f.endDay) return 0;
  const left = Math.max(0, f.budgetMicros - flightSpentBefore(plan, day));
  const daysLeft = daysBetween(day, f.endDay) + 1;
  const schedule = findPacingMode(plan.pacingMode)?.flightSchedule;
  const share =
    daysLeft <= 1
      ? left
      : schedule
        ? Math.floor(
            left *
              scheduledShare(schedule, daysBetween(f.startDay, day), daysBetween(f.startDay, f.endDay) + 1),
          )
        : Math.floor(left / daysLeft);
  return Math.min(plan.dailyBudgetMicros, share);
}

/** Day `k`'s (0-based, of `n`) part of what the flight has left under schedule φ, in [0, 1]. */
function scheduledShare(schedule: (x: number) => number, k: number, n: number): number {
  const done = schedule(k / n);
  const rest = 1 - done;
  if (!(rest > 0)) return 1;
  const share = (schedule((k + 1) / n) - done) / rest;
  return Number.isFinite(share) ? Math.min(1, Math.max(0, share)) : 0;
}

/**
 * The share of the flight due by the end of fraction `x` of its days under the plan's mode (the
 * even line's `x` for a mode without a flight schedule): the pacing report's flight line.
 */
export function flightDueShare(plan: { readonly pacingMode: string }, x: number): number {
  const schedule = findPacingMode(plan.pacingMode)?.flightSchedule;
  const c = Math.min(1, Math.max(0, x));
  return schedule ? schedule(c) : c;
}

/** When the closer sums a flight day: shortly after it ends, and once more a day later. */
export interface FlightCloseTiming {
  /** After the day's end: in-flight bids have expired and their notices arrived. @default 15 min */
  readonly closeDelayMs: number;
  /** After the day's end: the re-sum that takes late billing notices in. @default 24 h */
  readonly recloseDelayMs: number;
}

/** Default {@link FlightCloseTiming}. */
export const defaultFlightCloseTiming: FlightCloseTiming = {
  closeDelayMs: 15 * 60_000,
  recloseDelayMs: 24 * 3_600_000,
};

/**
 * The flight days due for a (re)close at `nowMs`, oldest first: ended at least `closeDelayMs` ago
 * and never closed, or ended at least `recloseDelayMs` ago and last closed before that. `today` is
 * the account's local date at `nowMs` and `dayEndMs` a day's end in its zone. The walk goes back
 * from today and stops at the first final day: the closer closes a plan's days oldest first and
 * stops at a failure, so every day before a final one is final.
 */
export function flightDaysDue(
  plan: Pick<BudgetPlan, 'flight' | 'flightSpent'>,
  nowMs: number,
  today: string,
  dayEndMs: (day: string) => number,
  timing: FlightCloseTiming = defaultFlightCloseTiming,
): string[] {
  const f = plan.flight;
  if (!f || today < f.startDay) return [];
  const out: string[] = [];
  for (let d = today < f.endDay ? today : f.endDay; d >= f.startDay; d = addDays(d, -1)) {
    const end = dayEndMs(d);
    if (nowMs < end + timing.closeDelayMs) continue;
    const closed = plan.flightSpent?.[d];
    const recloseAt = end + timing.recloseDelayMs;
    if (!closed || (closed.at < recloseAt && nowMs >= recloseAt)) out.push(d);
    else if (closed.at >= recloseAt) break;
  }
  return out.reverse();
}
