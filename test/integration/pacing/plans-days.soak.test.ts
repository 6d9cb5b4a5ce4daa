/**
 * Several budget plans per bid over two simulated days (UTC), on the simulator's engine like the
 * other pacing simulations (the real pacer, publisher and readers, BudgetGuard × 2 on real Redis,
 * the real SpendTracker, the market model). Every plan has its own controller state and curve;
 * an ad server applies the product of the parameters of all plans of a bid (combineForBid) and the
 * guard checks every plan:
 *
 * - an account plan binding over its campaigns: the account spends its budget on its curve, the
 *   campaigns stay under theirs and their own controllers sit at full speed (not binding);
 * - a campaign plan binding over its experiment arms;
 * - experiment arms binding, each with its own budget, curve and controller state.
 *
 * Every tick is a takeover (a new pacer process with the next lease epoch): every plan steps from
 * the state and forecast decoded from what the last publish stored, so the run also shows the
 * encodings are complete.
 *
 * Plans here hold ≥ 200 guard floats (F = 5,000 micros, the largest bid): a plan of only ~100
 * floats ends a few percent short, because the floats the guards still hold at midnight are never
 * spent (docs/pacing.md, "Limits").
 */
import { describe, expect, it } from 'vitest';
import { dayWindowOf } from '../../../shared/budget/time-zone.js';
import { daysOf, expectClean, requestsFor, rowsOf, simulatedDays, soakScenario } from './simulation.js';

const TZ = 'UTC';
const DAY2 = dayWindowOf('2026-11-21', TZ);
/** The two campaigns of the binding account, alike. */
const UNDER_ACCOUNT = ['x', 'y'];

/** Day-2 ticks at which each plan was published at full speed. */
const fullSpeed = new Map<string, { full: number; all: number }>();

const runs = simulatedDays(() => [
  {
    scenario: soakScenario({
      name: 'plans',
      timeZone: TZ,
      start: '2026-11-20',
      days: 2,
      seed: 31,
      accounts: [
        {
          // The account's $2 binds: its two campaigns could each spend $2 and would like to.
          id: 'acc-bind',
          budget: 2_000_000,
          campaigns: UNDER_ACCOUNT.map((id) => ({ id, budget: 2_000_000, demand: 2 })),
        },
        {
          id: 'acc-free',
          budget: 20_000_000,
          campaigns: [
            // The campaign's $0.80 binds over two arms of $0.50 each.
            {
              id: 'z',
              budget: 800_000,
              demand: 4,
              arms: [
                { id: 'A', budget: 500_000, share: 0.5 },
                { id: 'B', budget: 500_000, share: 0.5 },
              ],
            },
            // The arms bind ($1.00 and $1.50, traffic for 3× each) under a campaign budget of $5.
            {
              id: 'w',
              budget: 5_000_000,
              requests: requestsFor(3, 2_500_000, 'second-price'),
              arms: [
                { id: 'A', budget: 1_000_000, share: 0.4 },
                { id: 'B', budget: 1_500_000, share: 0.6 },
              ],
            },
          ],
        },
      ],
    }),
    // Every tick a new leader: state and forecast decoded from their stored text, as a new leader
    // reads them; the encodings carry everything the controller needs.
    takeoverEveryTick: true,
    onTick: (now, params) => {
      if (now < DAY2.startMs) return;
      for (const [key, p] of params) {
        const c = fullSpeed.get(key) ?? { full: 0, all: 0 };
        c.all++;
        if (p.throttle === 1 && p.bidMultiplier === 1) c.full++;
        fullSpeed.set(key, c);
      }
    },
  },
]);
const run = () => runs('plans');

const share = (key: string) => {
  const c = fullSpeed.get(key);
  return c && c.all > 8000 ? c.full / c.all : Number.NaN;
};

describe('account, campaign and arm plans over simulated days', () => {
  it('runs clean: counters equal the booked wins for every plan, no errors, a takeover every tick', () => {
    expectClean(run());
    expect(run().stateReloads).toBe(run().ticks);
    expect(run().publishedTicks).toBe(run().ticks);
  });

  it('an account plan constrains its campaigns: it spends its budget on its curve, none over a cap', () => {
    const account = rowsOf(run(), 'a:acc-bind/account');
    expect(account.length).toBe(2);
    for (const d of account) {
      expect(d.spentMicros).toBeLessThanOrEqual(d.budgetMicros);
      expect(d.spentMicros / d.budgetMicros).toBeGreaterThanOrEqual(0.98);
    }
    expect(account[1]?.maxDeviation).toBeLessThanOrEqual(0.05);
    for (const id of UNDER_ACCOUNT) {
      for (const d of daysOf(run(), id)) expect(d.spentMicros).toBeLessThan(d.budgetMicros);
      // The campaigns' own controllers are not binding: they leave the control to the account.
      expect(share(`c:${id}/campaign`)).toBeGreaterThan(0.9);
    }
    const [x, y] = UNDER_ACCOUNT.map((id) => daysOf(run(), id)[1]?.spentMicros ?? 0);
    expect((x ?? 0) + (y ?? 0)).toBe(account[1]?.spentMicros);
  });

  it('a campaign plan constrains its arms', () => {
    const z = daysOf(run(), 'z');
    expect(z.length).toBe(2);
    for (const d of z) {
      expect(d.spentMicros).toBeLessThanOrEqual(d.budgetMicros);
      expect(d.spentMicros / d.budgetMicros).toBeGreaterThanOrEqual(0.98);
    }
    expect(z[1]?.maxDeviation).toBeLessThanOrEqual(0.05);
    for (const arm of ['A', 'B']) {
      for (const d of daysOf(run(), 'z', `arm:${arm}`)) expect(d.spentMicros).toBeLessThan(d.budgetMicros);
      expect(share(`c:z/arm:${arm}`)).toBeGreaterThan(0.9);
    }
    expect(share('a:acc-free/account')).toBeGreaterThan(0.99);
  });

  it('experiment arms with their own budgets, curves and controller state each spend their own budget', () => {
    for (const [arm, budget] of [
      ['A', 1_000_000],
      ['B', 1_500_000],
    ] as const) {
      const rows = daysOf(run(), 'w', `arm:${arm}`);
      expect(rows.length).toBe(2);
      for (const d of rows) {
        expect(d.budgetMicros).toBe(budget);
        expect(d.spentMicros).toBeLessThanOrEqual(budget);
        expect(d.spentMicros / budget).toBeGreaterThanOrEqual(0.98);
      }
      expect(rows[1]?.maxDeviation).toBeLessThanOrEqual(0.05);
    }
    expect(share('c:w/campaign')).toBeGreaterThan(0.9);
  });
});
