/**
 * The pacing report (shared/pacing/delivery.ts, cli/spend-report.ts; docs/spend.md "Pacing
 * report"): the 90/110 % band at its edges, each reason a behind plan is given, and the report's
 * sums over regions (a plan at full speed in one region and paced in another is not at full speed).
 */
import { describe, expect, it } from 'vitest';
import type { PlanDayStatus } from '../../../cli/spend.js';
import { formatSpendReport, spendReport } from '../../../cli/spend-report.js';
import { flightDueShare } from '../../../shared/budget/flight.js';
import { type DeliveryInput, deliveryOf, flightDeliveryOf } from '../../../shared/pacing/delivery.js';

const base: DeliveryInput = {
  expectedMicros: 1_000_000,
  actualMicros: 1_000_000,
  inFlightMicros: 0,
  fresh: true,
  fullSpeed: false,
  accountAtCap: false,
};

describe('delivery band', () => {
  it('behind below 90 %, ahead above 110 %, on pace between (edges included)', () => {
    const at = (actual: number) => deliveryOf({ ...base, actualMicros: actual }).band;
    expect(at(899_999)).toBe('behind');
    expect(at(900_000)).toBe('on-pace');
    expect(at(1_100_000)).toBe('on-pace');
    expect(at(1_100_001)).toBe('ahead');
    expect(deliveryOf({ ...base, expectedMicros: 0, actualMicros: 5 })).toEqual({
      ratio: null,
      band: 'on-pace',
      reason: null,
    });
  });

  it('gives a behind plan the first reason that holds, in order', () => {
    const behind = { ...base, actualMicros: 500_000 };
    expect(
      deliveryOf({ ...behind, windowClosed: true, fresh: false, accountAtCap: true, fullSpeed: true }).reason,
    ).toBe('out-of-window');
    expect(deliveryOf({ ...behind, fresh: false, accountAtCap: true, fullSpeed: true }).reason).toBe(
      'stale-parameters',
    );
    expect(deliveryOf({ ...behind, accountAtCap: true, fullSpeed: true }).reason).toBe('account-cap');
    expect(deliveryOf({ ...behind, fullSpeed: true, inFlightMicros: 3_000 }).reason).toBe('lost-auctions');
    expect(deliveryOf({ ...behind, fullSpeed: true }).reason).toBe('no-traffic');
    expect(deliveryOf(behind).reason).toBe('catching-up');
    expect(deliveryOf({ ...base, actualMicros: 2_000_000, fresh: false }).reason).toBeNull();
  });
});

function status(p: Partial<PlanDayStatus> & Pick<PlanDayStatus, 'plan'>): PlanDayStatus {
  return {
    accountId: 'acme',
    campaignId: 'spring',
    day: '2026-11-23',
    pacingMode: 'even',
    budgetMicros: 10_000_000,
    initialised: true,
    confirmedMicros: 0,
    inFlightMicros: 0,
    leasedMicros: 0,
    shareMicros: null,
    allocationMicros: null,
    allocationUntilMs: null,
    remainingMicros: 0,
    targetMicros: 0,
    targetSource: 'published',
    throttle: 1,
    bidMultiplier: 1,
    atMs: 0,
    ...p,
  };
}

describe('spend report', () => {
  it('sums the regions, and reads full speed and freshness in every region', () => {
    const east = status({
      plan: 'campaign',
      targetMicros: 3_000_000,
      confirmedMicros: 1_000_000,
      inFlightMicros: 5_000,
    });
    const west = status({
      plan: 'campaign',
      targetMicros: 2_000_000,
      confirmedMicros: 900_000,
      throttle: 0.4,
    });
    const [row] = spendReport([
      { region: 'us-east-1', plans: [east] },
      { region: 'us-west-2', plans: [west] },
    ]);
    expect(row).toMatchObject({
      plan: 'campaign',
      regions: ['us-east-1', 'us-west-2'],
      expectedMicros: 5_000_000,
      actualMicros: 1_905_000,
      deliveryRatio: 0.381,
      band: 'behind',
      reason: 'catching-up',
    });
    const [fast] = spendReport([
      { region: 'us-east-1', plans: [east] },
      { region: 'us-west-2', plans: [{ ...west, throttle: 1 }] },
    ]);
    expect(fast?.reason).toBe('lost-auctions');
  });

  it('blames the account cap when the account plan is at its expected spend', () => {
    const rows = spendReport([
      {
        region: 'us-east-1',
        plans: [
          status({
            plan: 'account',
            campaignId: undefined,
            targetMicros: 1_000_000,
            confirmedMicros: 995_000,
          }),
          status({ plan: 'campaign', targetMicros: 1_000_000, confirmedMicros: 400_000 }),
        ],
      },
    ]);
    expect(rows.find((r) => r.plan === 'account')?.band).toBe('on-pace');
    expect(rows.find((r) => r.plan === 'campaign')?.reason).toBe('account-cap');
  });
});

describe('flight delivery', () => {
  const flight = {
    budgetMicros: 21_000_000,
    days: 7,
    dayNumber: 4,
    closedMicros: 0,
    todayBudgetMicros: 4_000_000,
    todayExpectedMicros: 2_000_000,
    todayActualMicros: 2_000_000,
  };

  it('holds a flight to its even line: the days before today and today’s curve share', () => {
    // 3.5 of 7 days elapsed: $10.50 expected.
    const behind = flightDeliveryOf({ ...flight, closedMicros: 5_000_000 });
    expect(behind).toMatchObject({
      evenShareMicros: 3_000_000,
      expectedMicros: 10_500_000,
      actualMicros: 7_000_000,
    });
    expect(behind.band).toBe('behind');
    expect(flightDeliveryOf({ ...flight, closedMicros: 8_000_000 }).band).toBe('on-pace');
    expect(flightDeliveryOf({ ...flight, closedMicros: 10_000_000 }).band).toBe('ahead');
    // Before the flight nothing is expected; after it, the whole flight, and today's spend is not its.
    expect(flightDeliveryOf({ ...flight, dayNumber: 0 })).toMatchObject({ expectedMicros: 0, ratio: null });
    expect(flightDeliveryOf({ ...flight, dayNumber: 8, closedMicros: 21_000_000 })).toMatchObject({
      expectedMicros: 21_000_000,
      actualMicros: 21_000_000,
      band: 'on-pace',
    });
  });

  it('holds a front-loaded flight to its schedule, not the even line', () => {
    const dueShare = (x: number) => flightDueShare({ pacingMode: 'front-loaded' }, x);
    // φ(3/7) + (φ(4/7) − φ(3/7)) × ½ of $21: ahead of even's $10.50 by the schedule's lead.
    const phi = (x: number) => x + 0.5 * x * (1 - x);
    const want = Math.round(21_000_000 * (phi(3 / 7) + (phi(4 / 7) - phi(3 / 7)) / 2));
    const d = flightDeliveryOf({ ...flight, closedMicros: 8_000_000, dueShare });
    expect(d.expectedMicros).toBe(want);
    expect(want).toBeGreaterThan(12_000_000);
    // $10 by now is on pace for an even flight and behind a front-loaded one.
    expect(d.band).toBe('behind');
    expect(
      flightDeliveryOf({ ...flight, dayNumber: 8, closedMicros: 21_000_000, dueShare }).expectedMicros,
    ).toBe(21_000_000);
    expect(flightDueShare({ pacingMode: 'even' }, 0.3)).toBe(0.3);
  });

  it('reports a flight row with the flight against its even line and today against the even share', () => {
    const [row] = spendReport([
      {
        region: 'us-east-1',
        plans: [
          status({
            plan: 'campaign',
            budgetMicros: 4_500_000,
            targetMicros: 2_250_000,
            confirmedMicros: 2_000_000,
            flight: {
              startDay: '2026-11-20',
              endDay: '2026-11-26',
              budgetMicros: 21_000_000,
              capMicros: 6_000_000,
              dayNumber: 4,
              days: 7,
              closedMicros: 7_500_000,
              unclosedDays: 0,
            },
          }),
        ],
      },
    ]);
    expect(row?.flight).toMatchObject({
      evenShareMicros: 3_000_000,
      expectedMicros: 10_500_000,
      actualMicros: 9_500_000,
      deliveryRatio: 0.9048,
      band: 'on-pace',
    });
    expect(formatSpendReport(row ? [row] : [])).toMatch(
      /flight 2026-11-20\.\.2026-11-26 day 4\/7: .*today 4\.50 against an even share of 3\.00 \(catching up\)/,
    );
  });
});
