/**
 * Flights (shared/budget/flight.ts): the day's budget is the flight's remainder over its
 * remaining days, never above the cap; a day not closed counts at the whole cap; closes are due
 * after the day's end and once more a day later; invalid flights are refused with the field.
 */
import { describe, expect, it } from 'vitest';
import {
  dayBudgetMicros,
  type Flight,
  flightDaysDue,
  flightProblems,
  flightSpentBefore,
} from '../../../shared/budget/flight.js';
import {
  type BudgetPlan,
  BudgetValidationError,
  planOnDay,
  resolvePlan,
  storedPlanOf,
  validatePlan,
} from '../../../shared/budget/model.js';
import { addDays, daysBetween, dayWindowOf } from '../../../shared/budget/time-zone.js';

const $ = 1_000_000;
const flight: Flight = { startDay: '2026-12-01', endDay: '2026-12-21', budgetMicros: 30_000 * $ };
const plan = (spent: Record<string, number> = {}, at = 0): BudgetPlan => ({
  level: 'campaign',
  accountId: 'acme',
  campaignId: 'xmas',
  dailyBudgetMicros: 2_000 * $,
  pacingMode: 'even',
  flight,
  flightSpent: Object.fromEntries(Object.entries(spent).map(([d, micros]) => [d, { micros, at }])),
});
/** Every day from the start to the day before `day` closed at `micros` each. */
const closedUntil = (day: string, micros: number) => {
  const out: Record<string, number> = {};
  for (let d = flight.startDay; d < day; d = addDays(d, 1)) out[d] = micros;
  return out;
};

describe('a flight day budget', () => {
  it('spreads the flight evenly when every day delivered its share', () => {
    expect(dayBudgetMicros(plan(), '2026-12-01')).toBe(Math.floor((30_000 * $) / 21));
    const tenth = '2026-12-10';
    const share = Math.floor((30_000 * $) / 21);
    expect(dayBudgetMicros(plan(closedUntil(tenth, share)), tenth)).toBe(
      Math.floor((30_000 * $ - 9 * share) / 12),
    );
  });

  it('catches up what earlier days missed, up to the cap', () => {
    // Two slow days of $400: the remaining 19 days share $29,200, $1,536.84 each.
    const slow = plan({ '2026-12-01': 400 * $, '2026-12-02': 400 * $ });
    expect(dayBudgetMicros(slow, '2026-12-03')).toBe(Math.floor((29_200 * $) / 19));
    // Ten empty days: $30,000 over 11 days would be $2,727: the cap holds.
    expect(dayBudgetMicros(plan(closedUntil('2026-12-11', 0)), '2026-12-11')).toBe(2_000 * $);
  });

  it('gives the last day what is left, never above the cap, and 0 outside the flight', () => {
    const last = '2026-12-21';
    expect(dayBudgetMicros(plan(closedUntil(last, 1_450 * $)), last)).toBe(30_000 * $ - 20 * 1_450 * $);
    expect(dayBudgetMicros(plan(closedUntil(last, 1_000 * $)), last)).toBe(2_000 * $);
    expect(dayBudgetMicros(plan(closedUntil(last, 1_500 * $)), last)).toBe(0);
    expect(dayBudgetMicros(plan(), '2026-11-30')).toBe(0);
    expect(dayBudgetMicros(plan(), '2026-12-22')).toBe(0);
  });

  it('counts a day not closed yet at the whole cap, so the flight total still holds', () => {
    const p = plan({ '2026-12-01': 1_000 * $ }); // 12-02 ended but is not closed
    expect(flightSpentBefore(p, '2026-12-03')).toBe(3_000 * $);
    expect(dayBudgetMicros(p, '2026-12-03')).toBe(Math.floor((27_000 * $) / 19));
    // Whatever the closes say, the days' budgets never add up to more than the flight.
    const spent: Record<string, number> = {};
    let total = 0;
    for (let d = flight.startDay; d <= flight.endDay; d = addDays(d, 1)) {
      const b = dayBudgetMicros(plan(spent), d);
      spent[d] = b; // every day spends its whole budget
      total += b;
    }
    expect(total).toBeLessThanOrEqual(flight.budgetMicros);
    expect(total).toBeGreaterThanOrEqual(flight.budgetMicros - 21);
  });

  it('plans a flight day as a daily plan of the day budget, once per plan and day', () => {
    const r = resolvePlan(plan({ '2026-12-01': 400 * $ }), 'America/New_York');
    const day = planOnDay(r, '2026-12-02');
    expect(day.dailyBudgetMicros).toBe(Math.floor((29_600 * $) / 20));
    expect(planOnDay(r, '2026-12-02')).toBe(day);
    // A day-plan given again is derived from the stored plan, not from its own budget.
    expect(planOnDay(day, '2026-12-02').dailyBudgetMicros).toBe(day.dailyBudgetMicros);
    expect(planOnDay(day, '2026-12-05').dailyBudgetMicros).toBe(planOnDay(r, '2026-12-05').dailyBudgetMicros);
    expect(storedPlanOf(day)).toBe(r);
    const daily = resolvePlan({ ...plan(), flight: undefined }, 'America/New_York');
    expect(planOnDay(daily, '2026-12-02')).toBe(daily);
  });
});

describe('flight closes', () => {
  const zone = 'America/Los_Angeles';
  const endOf = (d: string) => dayWindowOf(d, zone).endMs;
  const due = (p: BudgetPlan, now: number) =>
    flightDaysDue(
      p,
      now,
      dayWindowOf(new Date(now - 8 * 3_600_000).toISOString().slice(0, 10), zone).day,
      endOf,
    );

  it('are due 15 minutes after a day ends, and once more 24 hours after', () => {
    const end = endOf('2026-12-01');
    expect(due(plan(), end + 14 * 60_000)).toEqual([]);
    expect(due(plan(), end + 15 * 60_000)).toEqual(['2026-12-01']);
    const closed = plan({ '2026-12-01': 5 * $ }, end + 15 * 60_000);
    expect(due(closed, end + 3_600_000)).toEqual([]);
    expect(due(closed, end + 24 * 3_600_000)).toEqual(['2026-12-01']);
    const final = plan({ '2026-12-01': 5 * $ }, end + 24 * 3_600_000);
    expect(due(final, end + 24 * 3_600_000 + 10 * 60_000)).toEqual([]);
  });

  it('are due oldest first for every day a late closer missed', () => {
    const now = endOf('2026-12-04') + 20 * 60_000;
    expect(due(plan(), now)).toEqual(['2026-12-01', '2026-12-02', '2026-12-03', '2026-12-04']);
    expect(due(plan({ '2026-12-01': 0 }, endOf('2026-12-01') + 25 * 3_600_000), now)).toEqual([
      '2026-12-02',
      '2026-12-03',
      '2026-12-04',
    ]);
  });

  it('follow the local day across a DST change (a 25-hour day)', () => {
    const f = { startDay: '2026-10-31', endDay: '2026-11-02', budgetMicros: 30 * $ };
    const p: BudgetPlan = { ...plan(), dailyBudgetMicros: 10 * $, flight: f, flightSpent: {} };
    expect(endOf('2026-11-01') - dayWindowOf('2026-11-01', zone).startMs).toBe(25 * 3_600_000);
    expect(due(p, endOf('2026-11-01') + 15 * 60_000)).toEqual(['2026-10-31', '2026-11-01']);
    expect(due(p, endOf('2026-11-01') + 10 * 60_000)).toEqual(['2026-10-31']);
  });
});

describe('a front-loaded flight', () => {
  // A cap high enough that it never binds, so the schedule alone shapes the days.
  const fl = (spent: Record<string, number> = {}, cap = 6_000 * $): BudgetPlan => ({
    ...plan(spent),
    pacingMode: 'front-loaded',
    dailyBudgetMicros: cap,
  });
  /** Every day spends its whole budget: the days' budgets, in order. */
  const run = (cap?: number, spendShare = 1) => {
    const spent: Record<string, number> = {};
    const budgets: number[] = [];
    for (let d = flight.startDay; d <= flight.endDay; d = addDays(d, 1)) {
      const b = dayBudgetMicros(fl(spent, cap), d);
      budgets.push(b);
      spent[d] = Math.floor(b * spendShare);
    }
    return budgets;
  };

  it('puts 25 % more than even into the first half, pace falling from 1.5 × to 0.5 × even', () => {
    const b = run();
    const even = (30_000 * $) / 21;
    expect(b[0] as number).toBeGreaterThan(1.45 * even);
    expect(b[20] as number).toBeLessThan(0.55 * even);
    for (let k = 1; k < 21; k++) expect(b[k] as number).toBeLessThanOrEqual(b[k - 1] as number);
    // The first 10.5 days: 62.5 % of the flight (1.25 × half), to within a day's rounding.
    const half = b.slice(0, 10).reduce((x, y) => x + y, 0) + (b[10] as number) / 2;
    expect(half / (30_000 * $)).toBeCloseTo(0.625, 3);
    const total = b.reduce((x, y) => x + y, 0);
    expect(total).toBeLessThanOrEqual(flight.budgetMicros);
    expect(total).toBeGreaterThanOrEqual(flight.budgetMicros - 21);
  });

  it('keeps the cap and the flight total, and spreads catch-up by the weights ahead', () => {
    // A cap of 1.2 × even clips the first days; what it holds back goes to the later ones.
    const cap = Math.ceil((1.2 * 30_000 * $) / 21);
    const b = run(cap);
    expect(Math.max(...b)).toBe(cap);
    expect(b.reduce((x, y) => x + y, 0)).toBeLessThanOrEqual(flight.budgetMicros);
    expect(b.reduce((x, y) => x + y, 0)).toBeGreaterThanOrEqual(flight.budgetMicros - 21);
    // Days that spend 80 % of their budget: later days rise above the schedule, the total stays.
    const short = run(undefined, 0.8);
    const onTime = run();
    expect(short[20] as number).toBeGreaterThan(onTime[20] as number);
    // Every day's budget ≤ what is left, whatever the closes say.
    const late = fl({ '2026-12-01': 29_999 * $ });
    expect(dayBudgetMicros(late, '2026-12-02')).toBeLessThanOrEqual(1 * $);
  });

  it('is refused on a plan without a flight, naming what to do', () => {
    expect(() => validatePlan({ ...fl(), flight: undefined, flightSpent: undefined })).toThrow(
      /pacingMode: front-loaded spreads a flight over its days and this plan has no flight: give the flight/,
    );
    expect(validatePlan({ ...fl(), flightSpent: undefined }).pacingMode).toBe('front-loaded');
  });
});

describe('flight validation', () => {
  const base = { ...plan(), flightSpent: undefined };
  const refused = (f: Partial<Flight>, cap = 2_000 * $) => {
    try {
      validatePlan({ ...base, dailyBudgetMicros: cap, flight: { ...flight, ...f } });
    } catch (e) {
      expect(e).toBeInstanceOf(BudgetValidationError);
      return (e as Error).message;
    }
    throw new Error('accepted');
  };

  it('refuses each invalid flight with the field and what to do', () => {
    expect(refused({ endDay: '2026-11-30' })).toMatch(/flight\.endDay: 2026-11-30 is before the start/);
    expect(refused({ startDay: '2026-12-1' })).toMatch(/flight\.startDay: .*YYYY-MM-DD/);
    expect(refused({ endDay: '2026-02-30' })).toMatch(/flight\.endDay: .*not a calendar date/);
    expect(refused({ budgetMicros: 1_000 * $ })).toMatch(
      /dailyBudgetMicros: the daily cap .* is above the flight/,
    );
    expect(refused({}, 1_000 * $)).toMatch(/below the flight budget .* raise the cap/);
    expect(refused({ budgetMicros: 0 })).toMatch(/flight\.budgetMicros: 0 is not a flight budget/);
    expect(refused({ budgetMicros: 1.5 })).toMatch(/flight\.budgetMicros/);
    expect(refused({ endDay: '2028-01-01' })).toMatch(/at most 366/);
    expect(flightProblems(flight, 2_000 * $)).toEqual([]);
    expect(validatePlan(base)).toBe(base);
  });

  it('counts days by the calendar', () => {
    expect(daysBetween('2026-12-01', '2026-12-21')).toBe(20);
    expect(daysBetween('2026-03-07', '2026-03-09')).toBe(2);
    expect(addDays('2026-12-31', 1)).toBe('2027-01-01');
    expect(addDays('2028-03-01', -1)).toBe('2028-02-29');
  });
});
