/**
 * The flight closer (docs/spend.md, "Flights"): after a flight day ends, sums its spend in every
 * region from the replicated ledger and records it on the plan (`flightSpent`), so the following
 * days' budgets take what is left. Run by a shard's lease holder for the plans whose allocation
 * home is its region (one writer per plan); a pass runs beside the ticks, never delaying one.
 *
 * Until a day is closed the budget counts it at the whole cap (shared/budget/flight.ts), so a
 * closer that is late or failing lowers the following days' budgets and never lets a flight pass
 * its total; the `FlightDaysUnclosed` figure of a pass says how many closes are overdue.
 */

import { defaultFlightCloseTiming, type FlightCloseTiming, flightDaysDue } from '../budget/flight.js';
import type { ResolvedPlan } from '../budget/model.js';
import { dayWindowOf, localDate } from '../budget/time-zone.js';

/** Options of {@link FlightCloser}. */
export interface FlightCloserOptions {
  /** A plan-day's confirmed spend in every region, micros (`ledgerPlanDaySpendOf`). */
  readonly spendOf: (plan: ResolvedPlan, day: string) => Promise<number>;
  /** Writes one closed day; false when the plan has no flight any more (`recordFlightDay`). */
  readonly record: (plan: ResolvedPlan, day: string, micros: number, nowMs: number) => Promise<boolean>;
  /** When days are summed. @default {@link defaultFlightCloseTiming} */
  readonly timing?: Partial<FlightCloseTiming>;
  /** Plans closed at once. @default 8 */
  readonly concurrency?: number;
  /**
   * How long a day closed here is not closed again while the plan as read still lacks it (the
   * budgets reload lags the write by a tick or two), ms. @default 10 min
   */
  readonly rememberMs?: number;
}

/** What one pass did. */
export interface FlightClosePass {
  readonly atMs: number;
  /** Flight days due for a close or a re-close. */
  readonly due: number;
  readonly closed: number;
  /** Days left due after the pass (a write or ledger read failed; retried at the next pass). */
  readonly unclosed: number;
  /** The first failure's message. */
  readonly error?: string;
}

/** Closes flight days; one pass at a time. */
export class FlightCloser {
  private readonly timing: FlightCloseTiming;
  private readonly concurrency: number;
  private readonly rememberMs: number;
  /** `<scope>|<plan>|<day>` → when this process closed it. */
  private readonly closedHere = new Map<string, number>();
  private running: Promise<FlightClosePass> | undefined;
  /** The last finished pass. */
  last: FlightClosePass | undefined;

  constructor(private readonly options: FlightCloserOptions) {
    this.timing = { ...defaultFlightCloseTiming, ...options.timing };
    this.concurrency = Math.max(1, options.concurrency ?? 8);
    this.rememberMs = options.rememberMs ?? 10 * 60_000;
  }

  /** Starts a pass over `plans()` unless one is running; the caller does not wait for it. */
  kick(plans: () => Iterable<ResolvedPlan>, nowMs: number): void {
    if (this.running) return;
    this.running = this.pass(plans(), nowMs).finally(() => {
      this.running = undefined;
    });
    // A failed pass is recorded in `last`; nothing awaits the promise.
    this.running.catch(() => undefined);
  }

  /** Closes every due day of `plans` (oldest first per plan; a plan stops at its first failure). */
  async pass(plans: Iterable<ResolvedPlan>, nowMs: number): Promise<FlightClosePass> {
    for (const [k, at] of this.closedHere) if (nowMs - at > this.rememberMs) this.closedHere.delete(k);
    const work: { plan: ResolvedPlan; days: string[] }[] = [];
    for (const plan of plans) {
      if (!plan.flight) continue;
      const days = flightDaysDue(
        plan,
        nowMs,
        localDate(nowMs, plan.timeZone),
        (d) => dayWindowOf(d, plan.timeZone).endMs,
        this.timing,
      ).filter((d) => !this.closedHere.has(keyOf(plan, d)));
      if (days.length > 0) work.push({ plan, days });
    }
    const due = work.reduce((n, w) => n + w.days.length, 0);
    let closed = 0;
    let error: string | undefined;
    let next = 0;
    const worker = async () => {
      while (next < work.length) {
        const { plan, days } = work[next++] as (typeof work)[number];
        for (const day of days) {
          try {
            const micros = await this.options.spendOf(plan, day);
            if (await this.options.record(plan, day, micros, nowMs)) {
              this.closedHere.set(keyOf(plan, day), nowMs);
              closed++;
            }
          } catch (e) {
            error ??= e instanceof Error ? e.message : String(e);
            break; // days stay oldest-first closed: the next pass resumes here
          }
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.concurrency, work.length) }, worker));
    const pass = { atMs: nowMs, due, closed, unclosed: due - closed, ...(error ? { error } : {}) };
    this.last = pass;
    return pass;
  }
}

function keyOf(plan: ResolvedPlan, day: string): string {
  return `${plan.scope}|${plan.planId}|${day}`;
}
