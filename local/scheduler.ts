/**
 * Local EventBridge scheduler: invokes scheduled functions (a {@link ScheduleSpec}: a rate and
 * one rule per instance) with the timing asynchronously invoked Lambda functions see in AWS.
 *
 * Timing ({@link ScheduleTiming}):
 * - `eventbridge` (the default; the model is shared/region/schedule-delivery.ts): each rule fires
 *   at its own fixed offset within its period — a whole second of the minute for
 *   `rate(1 minute)` — drawn at random per rule and kept for the rule's life (from the seed, the
 *   region and the rule name, so one seed reproduces a run's timing); each firing is delivered
 *   after a delay drawn uniformly from [0, 20 s], occasionally twice (each delivery with its own
 *   delay: at-least-once delivery, the same event both times) and occasionally not at all.
 * - `exact`: every rule fires on the clock's boundaries (multiples of its rate from the epoch) and
 *   is delivered at once, exactly once: for tests that need to know when a function runs.
 *
 * Both scale with `msPerMinute` (offsets, delays), so fast test minutes keep the same shape.
 *
 * - A target with constant input receives exactly that JSON as its event; a target without
 *   input receives the `Scheduled Event` shape (version, id, detail-type, source `aws.events`,
 *   account, time = the firing's scheduled time to the second, region, resources = [rule ARN],
 *   detail {}).
 * - A clock jump over several firings of a rule fires once (the latest), as EventBridge does not
 *   replay missed schedules.
 * - Invocations are asynchronous (EventBridge does not wait); a slow target gets another
 *   instance on the next firing, as concurrent Lambda invocations would.
 *
 * For tests: `fireDue(now)` fires and delivers by hand against a {@link ManualClock},
 * `onFiring` reports every firing's deliveries, and `missNext(rule)` drops a rule's next firing.
 */
import { randomInt, randomUUID } from 'node:crypto';
import { prng, type Random } from '../shared/random/prng.js';
import type { ScheduleSpec } from '../shared/region/resources.js';
import {
  SCHEDULE_DELIVERY_DELAY_MAX_MS,
  SCHEDULE_DUPLICATE_RATE,
  SCHEDULE_MISS_RATE,
} from '../shared/region/schedule-delivery.js';
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
  /** The scheduled time, ISO-8601 to the second (`2026-11-21T20:00:37Z`). */
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

/** EventBridge-like timing; every field defaults to the model in shared/region/schedule-delivery.ts. */
export interface EventBridgeTiming {
  readonly mode: 'eventbridge';
  /** Seed of every rule's offset and every delivery draw. @default a random one (see {@link Scheduler.timing}) */
  readonly seed?: number;
  /** Longest delivery delay in a 60 s minute (scaled by `msPerMinute`). @default 20_000 */
  readonly maxDelayMs?: number;
  /** Probability that a firing is delivered twice. @default 0.01 */
  readonly duplicateRate?: number;
  /** Probability that a firing is not delivered. @default 0.01 */
  readonly missRate?: number;
}

/** How the scheduler times firings and deliveries. */
export type ScheduleTiming = { readonly mode: 'exact' } | EventBridgeTiming;

/** {@link ScheduleTiming} with every default filled in. */
export type ResolvedScheduleTiming = { readonly mode: 'exact' } | Required<EventBridgeTiming>;

/** The timing modes `npm start -- --scheduler` accepts. */
export const SCHEDULE_TIMING_MODES = ['eventbridge', 'exact'] as const;

/** One firing of a rule and what became of it. */
export interface ScheduleFiring {
  readonly ruleName: string;
  /** When the rule fired (its offset in its period); the `Scheduled Event` time. */
  readonly scheduledAt: number;
  /** When each delivery is due: none = missed, two = delivered twice. */
  readonly deliverAt: readonly number[];
}

/** Options of {@link Scheduler}. */
export interface SchedulerOptions {
  /** @default systemClock */
  readonly clock?: Clock;
  /** @default 'us-east-1' */
  readonly region?: string;
  /** Length of a schedule "minute" in clock milliseconds; lower it to run schedules fast. @default 60_000 */
  readonly msPerMinute?: number;
  /** @default { mode: 'eventbridge' } */
  readonly timing?: ScheduleTiming;
  /** Called with each invocation's outcome (function errors are logged here, not thrown). */
  readonly onResult?: (target: ScheduleTarget, scheduledAt: number, result: InvokeResult) => void;
  /** Called when a rule fires, with its deliveries (a missed or duplicated one shows here). */
  readonly onFiring?: (target: ScheduleTarget, firing: ScheduleFiring) => void;
}

interface Rule {
  readonly target: ScheduleTarget;
  /** Fixed offset of the rule's firings within its period, ms. */
  readonly offsetMs: number;
  /** The rule's own stream of delivery draws (reproducible whatever the other rules do). */
  readonly random: Random;
  next: number;
  missNext: boolean;
}

interface Delivery {
  readonly rule: Rule;
  readonly scheduledAt: number;
  readonly at: number;
  readonly event: unknown;
}

/** Resolves and validates a timing; the error says which setting is wrong and what it takes. */
export function resolveScheduleTiming(
  timing: ScheduleTiming = { mode: 'eventbridge' },
): ResolvedScheduleTiming {
  if (timing.mode === 'exact') return { mode: 'exact' };
  if (timing.mode !== 'eventbridge') {
    throw new RangeError(
      `schedule timing must be one of ${SCHEDULE_TIMING_MODES.join(', ')}, got '${(timing as { mode: unknown }).mode}'`,
    );
  }
  const resolved = {
    mode: 'eventbridge' as const,
    seed: timing.seed ?? randomInt(2 ** 31),
    maxDelayMs: timing.maxDelayMs ?? SCHEDULE_DELIVERY_DELAY_MAX_MS,
    duplicateRate: timing.duplicateRate ?? SCHEDULE_DUPLICATE_RATE,
    missRate: timing.missRate ?? SCHEDULE_MISS_RATE,
  };
  if (!Number.isSafeInteger(resolved.seed))
    throw new RangeError(`schedule seed must be a whole number, got ${resolved.seed}`);
  if (!(resolved.maxDelayMs >= 0 && resolved.maxDelayMs < MINUTE_MS))
    throw new RangeError(
      `schedule maxDelayMs must be from 0 to under 60000 (a minute), got ${resolved.maxDelayMs}`,
    );
  for (const key of ['duplicateRate', 'missRate'] as const) {
    const rate = resolved[key];
    if (!(rate >= 0 && rate <= 1)) throw new RangeError(`schedule ${key} must be from 0 to 1, got ${rate}`);
  }
  return resolved;
}

/** 32-bit FNV-1a of a string's UTF-16 code units: a rule's stream seed. */
function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** Fires scheduled targets with EventBridge's timing (or exactly on clock boundaries). */
export class Scheduler {
  /** The timing in force, defaults filled in (the seed reproduces this run's offsets and draws). */
  readonly timing: ResolvedScheduleTiming;
  private readonly clock: Clock;
  private readonly msPerMinute: number;
  private readonly rules: Rule[];
  private pending: Delivery[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  private timer?: NodeJS.Timeout;
  private running = false;

  constructor(
    readonly targets: readonly ScheduleTarget[],
    private readonly options: SchedulerOptions = {},
  ) {
    this.clock = options.clock ?? systemClock;
    this.msPerMinute = options.msPerMinute ?? MINUTE_MS;
    this.timing = resolveScheduleTiming(options.timing);
    for (const t of targets) {
      if (!(t.rateMinutes >= 1) || !Number.isInteger(t.rateMinutes)) {
        throw new RangeError(`${t.ruleName}: EventBridge rates are whole minutes ≥ 1, got ${t.rateMinutes}`);
      }
    }
    const now = this.clock.now();
    const region = options.region ?? 'us-east-1';
    this.rules = targets.map((target) => {
      const timing = this.timing;
      const random = prng(
        timing.mode === 'exact' ? 0 : hash32(`${timing.seed}/${region}/${target.ruleName}`),
      );
      // A whole second of the rule's period ("second" scaled with the minute), fixed for its life.
      const second = this.msPerMinute / 60;
      const offsetMs = timing.mode === 'exact' ? 0 : Math.floor(random() * target.rateMinutes * 60) * second;
      const rule: Rule = { target, offsetMs, random, next: 0, missNext: false };
      rule.next = this.firingAfter(rule, now);
      return rule;
    });
  }

  private period(t: ScheduleTarget): number {
    return t.rateMinutes * this.msPerMinute;
  }

  /** The rule's first firing strictly after `now`. */
  private firingAfter(rule: Rule, now: number): number {
    const p = this.period(rule.target);
    return (Math.floor((now - rule.offsetMs) / p) + 1) * p + rule.offsetMs;
  }

  /** When each rule fires next (clock ms; deliveries follow with their delays). */
  nextFireTimes(): Record<string, number> {
    return Object.fromEntries(this.rules.map((r) => [r.target.ruleName, r.next]));
  }

  /** Each rule's fixed offset within its period, ms (0 for every rule in `exact` mode). */
  offsets(): Record<string, number> {
    return Object.fromEntries(this.rules.map((r) => [r.target.ruleName, r.offsetMs]));
  }

  /** Fault injection (tests): the rule's next firing is not delivered. */
  missNext(ruleName: string): void {
    const rule = this.rules.find((r) => r.target.ruleName === ruleName);
    if (!rule)
      throw new RangeError(
        `no schedule rule '${ruleName}' (rules: ${this.targets.map((t) => t.ruleName).join(', ')})`,
      );
    rule.missNext = true;
  }

  /** The event a target receives for the firing at `scheduledAt`. */
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

  /**
   * Fires every rule whose firing is ≤ `now` (once, for the latest), then delivers every
   * delivery due by `now`; resolves when the invocations delivered in this call return.
   */
  async fireDue(now = this.clock.now()): Promise<InvokeResult[]> {
    for (const rule of this.rules) {
      if (rule.next > now) continue;
      const p = this.period(rule.target);
      // Missed firings (a clock jump) are not replayed: fire once for the latest one.
      const latest = this.firingAfter(rule, now) - p;
      rule.next = latest + p;
      this.fire(rule, latest);
    }
    const due = this.pending.filter((d) => d.at <= now).sort((a, b) => a.at - b.at);
    this.pending = this.pending.filter((d) => d.at > now);
    return Promise.all(due.map((d) => this.deliver(d)));
  }

  /** Draws the firing's deliveries (a fixed number of draws per firing keeps each rule's stream stable). */
  private fire(rule: Rule, scheduledAt: number): void {
    const deliverAt: number[] = [];
    if (this.timing.mode === 'exact') {
      deliverAt.push(scheduledAt);
    } else {
      const { random } = rule;
      const [miss, duplicate, d1, d2] = [random(), random(), random(), random()];
      const maxDelay = (this.timing.maxDelayMs * this.msPerMinute) / MINUTE_MS;
      if (!(miss < this.timing.missRate || rule.missNext)) {
        deliverAt.push(scheduledAt + Math.round(d1 * maxDelay));
        if (duplicate < this.timing.duplicateRate) deliverAt.push(scheduledAt + Math.round(d2 * maxDelay));
      }
      rule.missNext = false;
    }
    const event = this.eventFor(rule.target, scheduledAt);
    for (const at of deliverAt) this.pending.push({ rule, scheduledAt, at, event });
    this.options.onFiring?.(rule.target, { ruleName: rule.target.ruleName, scheduledAt, deliverAt });
  }

  private deliver(d: Delivery): Promise<InvokeResult> {
    const { target } = d.rule;
    // Each delivery gets its own copy of the one event (a duplicate carries the same id).
    const call = target.invoker.invoke(JSON.parse(JSON.stringify(d.event)));
    const tracked = call.then((result) => this.options.onResult?.(target, d.scheduledAt, result));
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

  /** When the scheduler next has something to do (a firing or a delivery), clock ms; ∞ without rules. */
  nextDue(): number {
    let due = Number.POSITIVE_INFINITY;
    for (const r of this.rules) due = Math.min(due, r.next);
    for (const d of this.pending) due = Math.min(due, d.at);
    return due;
  }

  private arm(): void {
    if (!this.running || this.rules.length === 0) return;
    const delay = Math.max(0, this.nextDue() - this.clock.now());
    // setTimeout caps near 24.8 days; long rates re-arm on the way.
    this.timer = setTimeout(
      () => {
        void this.fireDue().catch(() => {});
        this.arm();
      },
      Math.min(delay, 2 ** 31 - 1),
    );
  }

  /** Stops the timers (deliveries not yet due are dropped) and waits for in-flight invocations. */
  async stop(): Promise<void> {
    this.running = false;
    if (this.timer) clearTimeout(this.timer);
    this.pending = [];
    await Promise.all(this.inFlight);
  }
}
