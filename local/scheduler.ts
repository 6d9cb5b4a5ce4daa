/**
 * Local EventBridge scheduler: invokes scheduled functions (a {@link ScheduleSpec}: a rate and
 * one rule per instance) the way EventBridge does.
 *
 * - A target with constant input receives exactly that JSON as its event; a target without
 *   input receives the `Scheduled Event` shape (version, id, detail-type, source `aws.events`,
 *   account, time, region, resources = [rule ARN], detail {}).
 * - Rules fire on boundaries of the injected clock (every `rateMinutes` from the epoch), with
 *   the boundary as the event time. A clock jump over several boundaries fires once, as
 *   EventBridge does not replay missed schedules.
 * - Invocations are asynchronous (EventBridge does not wait); a slow target gets another
 *   instance on the next boundary, as concurrent Lambda invocations would.
 *
 * For tests: `fireDue(now)` fires by hand against a {@link ManualClock}, and `msPerMinute`
 * scales a "minute" down so real-time runs are fast.
 */
import { randomUUID } from 'node:crypto';
import type { ScheduleSpec } from '../shared/region/resources.js';
import { type Clock, MINUTE_MS, systemClock } from '../shared/time/clock.js';
import { LOCAL_ACCOUNT_ID } from './esm/lambda-shapes.js';
import type { InvokeResult, Invoker } from './worker/invoker.js';

/** One EventBridge rule → function target. */
export interface ScheduleTarget {
  readonly ruleName: string;
  readonly rateMinutes: number;
  /** Constant input; when absent the function receives a `Scheduled Event`. */
  readonly input?: Readonly<Record<string, unknown>>;
  readonly invoker: Invoker;
}

/** The `Scheduled Event` EventBridge sends when a target has no constant input. */
export interface ScheduledEvent {
  readonly version: '0';
  readonly id: string;
  readonly 'detail-type': 'Scheduled Event';
  readonly source: 'aws.events';
  readonly account: string;
  /** The scheduled time, ISO-8601 to the second (`2026-11-21T20:00:00Z`). */
  readonly time: string;
  readonly region: string;
  readonly resources: readonly string[];
  readonly detail: Record<string, never>;
}

/** Rules of a function's {@link ScheduleSpec}: one per instance, or one without input when there are none. */
export function scheduleTargets(
  functionName: string,
  schedule: ScheduleSpec,
  invoker: Invoker,
): ScheduleTarget[] {
  if (schedule.instances.length === 0) {
    return [{ ruleName: `${functionName}-schedule`, rateMinutes: schedule.rateMinutes, invoker }];
  }
  return schedule.instances.map((instance) => ({
    ruleName: `${functionName}-${instance.id}`,
    rateMinutes: schedule.rateMinutes,
    input: instance.input,
    invoker,
  }));
}

/** Options of {@link Scheduler}. */
export interface SchedulerOptions {
  /** @default systemClock */
  readonly clock?: Clock;
  /** @default 'us-east-1' */
  readonly region?: string;
  /** Length of a schedule "minute" in clock milliseconds; lower it to run schedules fast. @default 60_000 */
  readonly msPerMinute?: number;
  /** Called with each invocation's outcome (function errors are logged here, not thrown). */
  readonly onResult?: (target: ScheduleTarget, scheduledAt: number, result: InvokeResult) => void;
}

/** Fires scheduled targets on clock boundaries. */
export class Scheduler {
  private readonly clock: Clock;
  private readonly next = new Map<ScheduleTarget, number>();
  private readonly inFlight = new Set<Promise<void>>();
  private timer?: NodeJS.Timeout;
  private running = false;

  constructor(
    readonly targets: readonly ScheduleTarget[],
    private readonly options: SchedulerOptions = {},
  ) {
    this.clock = options.clock ?? systemClock;
    for (const t of targets) {
      if (!(t.rateMinutes >= 1) || !Number.isInteger(t.rateMinutes)) {
        throw new RangeError(`${t.ruleName}: EventBridge rates are whole minutes ≥ 1, got ${t.rateMinutes}`);
      }
    }
    const now = this.clock.now();
    for (const t of targets) this.next.set(t, this.boundaryAfter(t, now));
  }

  private period(t: ScheduleTarget): number {
    return t.rateMinutes * (this.options.msPerMinute ?? MINUTE_MS);
  }

  private boundaryAfter(t: ScheduleTarget, now: number): number {
    const p = this.period(t);
    return (Math.floor(now / p) + 1) * p;
  }

  /** When each rule fires next (clock ms). */
  nextFireTimes(): Record<string, number> {
    return Object.fromEntries([...this.next].map(([t, at]) => [t.ruleName, at]));
  }

  /** The event a target receives for the boundary `scheduledAt`. */
  eventFor(target: ScheduleTarget, scheduledAt: number): unknown {
    if (target.input !== undefined) return JSON.parse(JSON.stringify(target.input));
    const region = this.options.region ?? 'us-east-1';
    const event: ScheduledEvent = {
      version: '0',
      id: randomUUID(),
      'detail-type': 'Scheduled Event',
      source: 'aws.events',
      account: LOCAL_ACCOUNT_ID,
      time: new Date(scheduledAt).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      region,
      resources: [`arn:aws:events:${region}:${LOCAL_ACCOUNT_ID}:rule/${target.ruleName}`],
      detail: {},
    };
    return event;
  }

  /** Fires every rule whose boundary is ≤ `now`; resolves when those invocations return. */
  async fireDue(now = this.clock.now()): Promise<InvokeResult[]> {
    const fired: Promise<InvokeResult>[] = [];
    for (const target of this.targets) {
      const at = this.next.get(target) as number;
      if (at > now) continue;
      // Missed boundaries (a clock jump) are not replayed: fire once for the latest one.
      const latest = this.boundaryAfter(target, now) - this.period(target);
      this.next.set(target, latest + this.period(target));
      fired.push(this.fire(target, latest));
    }
    return Promise.all(fired);
  }

  private fire(target: ScheduleTarget, scheduledAt: number): Promise<InvokeResult> {
    const call = target.invoker.invoke(this.eventFor(target, scheduledAt));
    const tracked = call.then((result) => this.options.onResult?.(target, scheduledAt, result));
    this.inFlight.add(tracked);
    void tracked.finally(() => this.inFlight.delete(tracked));
    return call;
  }

  /** Starts firing on real timers against the clock. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.arm();
  }

  private arm(): void {
    if (!this.running || this.targets.length === 0) return;
    const due = Math.min(...this.next.values());
    const delay = Math.max(0, due - this.clock.now());
    // setTimeout caps near 24.8 days; long rates re-arm on the way.
    this.timer = setTimeout(
      () => {
        void this.fireDue().catch(() => {});
        this.arm();
      },
      Math.min(delay, 2 ** 31 - 1),
    );
  }

  /** Stops the timers and waits for in-flight invocations. */
  async stop(): Promise<void> {
    this.running = false;
    if (this.timer) clearTimeout(this.timer);
    await Promise.all(this.inFlight);
  }
}
