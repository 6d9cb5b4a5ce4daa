/**
 * The plan fields of a scenario's campaigns, each checked as \`budgets plan put\` checks it: a
 * flight with its daily cap, dayparting windows, the plan's own curve, and the modes that need
 * one of them (sim/scenario.ts reads the rest of the file).
 */
import { type Daypart, DaypartError, parseDaypartText } from '../shared/budget/daypart.js';
import { type Flight, flightProblems } from '../shared/budget/flight.js';
import { planCurveProblem } from '../shared/budget/plan-curve.js';
import { findPacingMode, type PacingMode } from '../shared/pacing/modes.js';
import { type Reader, ScenarioError } from './scenario-reader.js';

/**
 * Refuses, at `at`, a mode whose need is not met there (as `validatePlan` refuses it): one that
 * paces to the plan's own curve (`curve`) anywhere but a campaign with `curve`, one that spreads a
 * flight over its days (`front-loaded`) anywhere but a campaign with `flight`. The caller calls it
 * only where the need is missing.
 */
export function refuseUnmetMode(at: string, mode: PacingMode): void {
  if (findPacingMode(mode)?.planCurve) {
    throw new ScenarioError(
      at,
      `${mode} paces to a campaign's own "curve": give the campaign one (accounts and arms have none).`,
    );
  }
  if (findPacingMode(mode)?.flightSchedule === undefined) return;
  throw new ScenarioError(
    at,
    `${mode} spreads a flight over its days and there is no flight here: give the campaign a "flight", or use ahead.`,
  );
}

/** A campaign's `curve` (24 or 96 shares of the day summing to 1), for `pacingMode: "curve"` only. */
export function parseCurve(c: Reader, mode: PacingMode): number[] {
  const points = c.array('curve');
  const problem = findPacingMode(mode)?.planCurve
    ? planCurveProblem(points)
    : `a curve is for pacingMode "curve" (got ${mode}).`;
  if (problem) throw new ScenarioError(c.at('curve'), problem);
  return points as number[];
}

/**
 * A campaign's `daypart: {windows, timeZone?}`: `windows` in the CLI's text form
 * ("mon-fri 08:00-20:00; sat 10:00-14:00"), `timeZone` the zone they are read in (default: the
 * account's); refused as `budgets plan put --daypart` refuses it.
 */
export function parseDaypart(c: Reader): Daypart {
  const d = c.child('daypart');
  d.only(['windows', 'timeZone']);
  const zone = d.has('timeZone') ? d.timeZone('timeZone') : undefined;
  try {
    return parseDaypartText(d.string('windows'), zone);
  } catch (error) {
    if (error instanceof DaypartError) throw new ScenarioError(d.at('windows'), error.message);
    throw error;
  }
}

/**
 * A campaign's `flight: {start, end, budget}` (local days of its account, inclusive; budget in
 * USD), its `dailyBudget` being the daily cap; refused as `budgets plan put` refuses it.
 */
export function parseFlight(c: Reader, capMicros: number): Flight {
  const f = c.child('flight');
  f.only(['start', 'end', 'budget']);
  const flight = { startDay: f.string('start'), endDay: f.string('end'), budgetMicros: f.budget('budget') };
  const problem = flightProblems(flight, capMicros)[0];
  if (problem) {
    const field = problem.field === 'dailyBudgetMicros' ? 'dailyBudget' : problem.field;
    throw new ScenarioError(
      c.at(field.replace('startDay', 'start').replace('endDay', 'end')),
      problem.message,
    );
  }
  return flight;
}
