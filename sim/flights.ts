/**
 * Flight rows of a simulated run (docs/spend.md, "Flights"): per flight campaign, what it spent
 * over the flight's days against the flight budget, and each day's budget (the share the pacer
 * paced: min(cap, what was left ÷ days left)) and spend against the daily cap — where catch-up
 * shows as budgets above the even share after a day that under-delivered.
 */
import type { Flight } from '../shared/budget/flight.js';
import type { StrategyRun } from './runner.js';
import type { Scenario } from './scenario.js';

/** One day of a flight in a run. */
export interface FlightDayRow {
  readonly day: string;
  /** The day's budget as it stood at the day's end, micros. */
  readonly budgetMicros: number;
  readonly spentMicros: number;
}

/** One flight campaign of a run. */
export interface FlightRow {
  readonly campaignId: string;
  readonly flightBudgetMicros: number;
  readonly capMicros: number;
  readonly spentMicros: number;
  /** Spent ÷ flight budget. */
  readonly utilisation: number;
  /** (Spent − flight budget) ÷ flight budget, 0 when not over. */
  readonly overFlight: number;
  /** Largest (a day's spend − cap) ÷ cap over the flight's days, 0 when never over. */
  readonly maxDayOverCap: number;
  /** ASAP's run spent ≥ 99 % of the flight: only such a flight can be asked to spend it. */
  readonly fillable: boolean;
  readonly days: readonly FlightDayRow[];
}

/** The flights of a scenario: campaign id → flight and daily cap. */
export function flightsOf(
  scenario: Pick<Scenario, 'campaigns'>,
): Map<string, { flight: Flight; capMicros: number }> {
  const out = new Map<string, { flight: Flight; capMicros: number }>();
  for (const c of scenario.campaigns)
    if (c.flight) out.set(c.id, { flight: c.flight, capMicros: c.budgetMicros });
  return out;
}

const r4 = (x: number) => Math.round(x * 10_000) / 10_000;

/** What `run` spent per flight (every flight day the run simulated, scored or not). */
export function flightSpend(
  run: StrategyRun,
  flights: ReadonlyMap<string, { flight: Flight; capMicros: number }>,
): Map<string, { spentMicros: number; days: FlightDayRow[] }> {
  const out = new Map<string, { spentMicros: number; days: FlightDayRow[] }>();
  for (const p of run.plans) {
    const f = p.level === 'campaign' && p.campaignId !== undefined ? flights.get(p.campaignId) : undefined;
    if (!f || p.day < f.flight.startDay || p.day > f.flight.endDay) continue;
    const row = out.get(p.campaignId as string) ?? { spentMicros: 0, days: [] };
    row.spentMicros += p.spentMicros;
    row.days.push({ day: p.day, budgetMicros: p.budgetMicros, spentMicros: p.spentMicros });
    out.set(p.campaignId as string, row);
  }
  return out;
}

/** The flight rows of `run`; `asap` (ASAP's run) defines which flights are fillable. */
export function flightRows(
  run: StrategyRun,
  flights: ReadonlyMap<string, { flight: Flight; capMicros: number }>,
  asap: StrategyRun | undefined,
): FlightRow[] {
  const spent = flightSpend(run, flights);
  const asapSpent = asap ? flightSpend(asap, flights) : new Map();
  return [...flights].map(([campaignId, { flight, capMicros }]) => {
    const s = spent.get(campaignId) ?? { spentMicros: 0, days: [] };
    const F = flight.budgetMicros;
    return {
      campaignId,
      flightBudgetMicros: F,
      capMicros,
      spentMicros: s.spentMicros,
      utilisation: r4(s.spentMicros / F),
      overFlight: r4(Math.max(0, s.spentMicros / F - 1)),
      maxDayOverCap: r4(Math.max(0, ...s.days.map((d) => d.spentMicros / capMicros - 1))),
      fillable: (asapSpent.get(campaignId)?.spentMicros ?? 0) >= 0.99 * F,
      days: s.days.sort((a, b) => a.day.localeCompare(b.day)),
    };
  });
}
