/**
 * `paceline spend report`: per plan-day, the spend its curve expected by now beside what it has
 * spent (confirmed + in flight, every region read summed), the delivery ratio, the 90/110 % band
 * buyers watch and, when behind, the likely reason (shared/pacing/delivery.ts; docs/spend.md,
 * "Pacing report"). Built from the rows `spend status` reads.
 */
import { flightDueShare } from '../shared/budget/flight.js';
import {
  type BehindReason,
  type DeliveryBand,
  deliveryOf,
  flightDeliveryOf,
} from '../shared/pacing/delivery.js';
import { type FlightDayStatus, type PlanDayStatus, planDayKey, planDayParts } from './spend.js';

/** One plan-day of the report (integer micros). */
export interface PlanDayReport {
  readonly accountId: string;
  readonly campaignId?: string;
  /** `account`, `campaign` or `arm:<armId>`. */
  readonly plan: string;
  readonly day: string;
  readonly pacingMode: string;
  readonly budgetMicros: number;
  /** Regions the figures add up. */
  readonly regions: readonly string[];
  /** Σ E(now): what the curves the guards enforce expected by now. */
  readonly expectedMicros: number;
  /** Σ (confirmed + in flight). */
  readonly actualMicros: number;
  /** actual ÷ expected, 4 decimals; null while nothing is expected yet. */
  readonly deliveryRatio: number | null;
  readonly band: DeliveryBand;
  /** Why it is behind (band `behind`), else null. */
  readonly reason: BehindReason | null;
  /** A flight plan's standing over its flight (docs/spend.md, "Pacing report"). */
  readonly flight?: FlightReport;
  readonly atMs: number;
}

/** A flight plan's row part: the flight against its even line (integer micros). */
export interface FlightReport extends Omit<FlightDayStatus, 'closedMicros'> {
  /** ⌊flight ÷ days⌋: a day budget above it is catch-up. */
  readonly evenShareMicros: number;
  readonly expectedMicros: number;
  readonly actualMicros: number;
  readonly deliveryRatio: number | null;
  readonly band: DeliveryBand;
}

/** The report of the plan-days the regions' status rows hold. */
export function spendReport(
  regions: readonly { region: string; plans: readonly PlanDayStatus[] }[],
): PlanDayReport[] {
  const rows = planDayParts(regions);
  const sums = (parts: readonly { p: PlanDayStatus }[]) => {
    let expected = 0;
    let actual = 0;
    let inFlight = 0;
    for (const { p } of parts) {
      expected += p.targetMicros;
      actual += p.confirmedMicros + p.inFlightMicros;
      inFlight += p.inFlightMicros;
    }
    return { expected, actual, inFlight };
  };
  const out: PlanDayReport[] = [];
  for (const { first, parts } of rows.values()) {
    const { expected, actual, inFlight } = sums(parts);
    const account =
      first.plan === 'account'
        ? undefined
        : rows.get(planDayKey({ accountId: first.accountId, plan: 'account', day: first.day }));
    const acc = account ? sums(account.parts) : undefined;
    const delivery = deliveryOf({
      expectedMicros: expected,
      actualMicros: actual,
      inFlightMicros: inFlight,
      fresh: parts.every(({ p }) => p.targetSource === 'published'),
      fullSpeed: parts.every(({ p }) => p.throttle === 1 && p.bidMultiplier === 1),
      accountAtCap: acc !== undefined && acc.expected > 0 && acc.actual >= 0.99 * acc.expected,
      windowClosed: parts.some(({ p }) => p.windowOpen === false),
    });
    out.push({
      accountId: first.accountId,
      ...(first.campaignId === undefined ? {} : { campaignId: first.campaignId }),
      plan: first.plan,
      day: first.day,
      pacingMode: first.pacingMode,
      budgetMicros: first.budgetMicros,
      regions: parts.map(({ region }) => region),
      expectedMicros: expected,
      actualMicros: actual,
      deliveryRatio: r4(delivery.ratio),
      band: delivery.band,
      reason: delivery.reason,
      ...(first.flight
        ? { flight: flightReport(first.flight, first.pacingMode, first.budgetMicros, expected, actual) }
        : {}),
      atMs: first.atMs,
    });
  }
  return out;
}

const r4 = (x: number | null) => (x === null ? null : Math.round(x * 10_000) / 10_000);

function flightReport(
  f: FlightDayStatus,
  pacingMode: string,
  todayBudgetMicros: number,
  todayExpectedMicros: number,
  todayActualMicros: number,
): FlightReport {
  const dueShare = (x: number) => flightDueShare({ pacingMode }, x);
  const d = flightDeliveryOf({ ...f, todayBudgetMicros, todayExpectedMicros, todayActualMicros, dueShare });
  const { closedMicros: _closed, ...flight } = f;
  return {
    ...flight,
    evenShareMicros: d.evenShareMicros,
    expectedMicros: d.expectedMicros,
    actualMicros: d.actualMicros,
    deliveryRatio: r4(d.ratio),
    band: d.band,
  };
}

/** The report as a table (amounts in currency units). */
export function formatSpendReport(rows: readonly PlanDayReport[]): string {
  if (rows.length === 0) return '(no plans)';
  const dollars = (micros: number) => (micros / 1e6).toFixed(2);
  const lines = [
    'account        campaign       plan         day         mode          budget    expected  actual     delivery  band      reason',
  ];
  for (const r of rows) {
    const cells = [
      r.accountId.padEnd(13),
      (r.campaignId ?? '-').padEnd(13),
      r.plan.padEnd(11),
      r.day.padEnd(10),
      r.pacingMode.padEnd(12),
      dollars(r.budgetMicros).padStart(8),
      dollars(r.expectedMicros).padStart(9),
      dollars(r.actualMicros).padStart(9),
      (r.deliveryRatio === null ? '-' : `${(r.deliveryRatio * 100).toFixed(1)} %`).padStart(9),
      r.band.padEnd(8),
      r.reason ?? '',
    ];
    lines.push(cells.join('  ').trimEnd());
    const f = r.flight;
    if (f) {
      const ratio = f.deliveryRatio === null ? '-' : `${(f.deliveryRatio * 100).toFixed(1)} %`;
      const catchUp = r.budgetMicros > f.evenShareMicros ? ' (catching up)' : '';
      lines.push(
        `  flight ${f.startDay}..${f.endDay} day ${f.dayNumber}/${f.days}: budget ${dollars(f.budgetMicros)}, cap ${dollars(f.capMicros)}, ` +
          `today ${dollars(r.budgetMicros)} against an even share of ${dollars(f.evenShareMicros)}${catchUp}; ` +
          `expected ${dollars(f.expectedMicros)}, actual ${dollars(f.actualMicros)}, ${ratio} ${f.band}` +
          (f.unclosedDays > 0 ? `; ${f.unclosedDays} day(s) not closed yet` : ''),
      );
    }
  }
  return lines.join('\n');
}
