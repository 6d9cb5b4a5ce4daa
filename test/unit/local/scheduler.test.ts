/**
 * The local EventBridge scheduler on a manual clock: event shapes; `exact` timing (every rule on
 * the minute, delivered at once, once); the default EventBridge-like timing (a fixed second per
 * rule, delivery delay within bounds, duplicates and misses at their configured rates,
 * reproducible from the seed, scaled with the minute).
 */
import { describe, expect, it } from 'vitest';
import {
  resolveScheduleTiming,
  type ScheduleFiring,
  Scheduler,
  type ScheduleTiming,
  scheduleTargets,
} from '../../../local/scheduler.js';
import { InProcessInvoker } from '../../../local/worker/in-process-invoker.js';
import type { ScheduleSpec } from '../../../shared/region/resources.js';
import {
  SCHEDULE_DELIVERY_DELAY_MAX_MS,
  SCHEDULE_DUPLICATE_RATE,
  SCHEDULE_MISS_RATE,
} from '../../../shared/region/schedule-delivery.js';
import { ManualClock, MINUTE_MS } from '../../../shared/time/clock.js';

function capture(clock?: ManualClock) {
  const events: unknown[] = [];
  const at: number[] = [];
  const invoker = new InProcessInvoker({
    functionName: 'pacer',
    handler: async (event: never) => {
      events.push(event);
      at.push(clock?.now() ?? Date.now());
      return 'ok';
    },
  });
  return { events, at, invoker };
}

const T0 = Date.UTC(2026, 10, 21, 20, 0, 30); // 20:00:30
const EXACT: ScheduleTiming = { mode: 'exact' };

/** The local pacer layout: 4 shards × 3 instances, one rule each. */
const pacerSchedule: ScheduleSpec = {
  rateMinutes: 1,
  instances: Array.from({ length: 12 }, (_, i) => ({
    id: `s${Math.floor(i / 3)}-i${i % 3}`,
    input: { shard: Math.floor(i / 3), instance: i % 3 },
  })),
};

/**
 * Runs a scheduler on a manual clock for `minutes`, jumping from one due time to the next; returns
 * the firings of those minutes and their deliveries (the last ones may be due a little later).
 */
async function runFor(
  minutes: number,
  timing: ScheduleTiming,
  msPerMinute = MINUTE_MS,
  schedule: ScheduleSpec = pacerSchedule,
) {
  const clock = new ManualClock(T0);
  const delivered: { rule: string; event: unknown; at: number }[] = [];
  const firings: ScheduleFiring[] = [];
  const invoker = new InProcessInvoker({ functionName: 'pacer', handler: async () => 'ok' });
  const targets = scheduleTargets('pacer', schedule, invoker).map((t) => ({
    ...t,
    invoker: {
      functionName: 'pacer',
      invoke: (event: unknown) => {
        delivered.push({ rule: t.ruleName, event, at: clock.now() });
        return invoker.invoke(event);
      },
      close: () => invoker.close(),
    },
  }));
  const scheduler = new Scheduler(targets, {
    clock,
    msPerMinute,
    timing,
    onFiring: (_t, f) => firings.push(f),
  });
  const end = T0 + minutes * msPerMinute;
  for (;;) {
    const due = scheduler.nextDue();
    if (due > end + msPerMinute / 2) break;
    clock.set(due);
    await scheduler.fireDue();
  }
  const ours = firings.filter((f) => f.scheduledAt <= end);
  const keys = new Set(ours.flatMap((f) => f.deliverAt.map((at) => `${f.ruleName}@${at}`)));
  return { scheduler, delivered: delivered.filter((d) => keys.has(`${d.rule}@${d.at}`)), firings: ours };
}

describe('Scheduler, exact timing', () => {
  it('delivers constant input unchanged, one rule per instance, on minute boundaries', async () => {
    const clock = new ManualClock(T0);
    const { events, invoker } = capture();
    const targets = scheduleTargets(
      'pacer',
      {
        rateMinutes: 1,
        instances: [
          { id: 's0-r0', input: { shard: 0, replica: 0 } },
          { id: 's0-r1', input: { shard: 0, replica: 1 } },
        ],
      },
      invoker,
    );
    const scheduler = new Scheduler(targets, { clock, region: 'us-west-2', timing: EXACT });
    expect(scheduler.nextFireTimes()).toEqual({
      'pacer-s0-r0': Date.UTC(2026, 10, 21, 20, 1),
      'pacer-s0-r1': Date.UTC(2026, 10, 21, 20, 1),
    });
    expect(await scheduler.fireDue()).toEqual([]); // 20:00:30: nothing due
    clock.set(Date.UTC(2026, 10, 21, 20, 1));
    const results = await scheduler.fireDue();
    expect(results.map((r) => r.ok)).toEqual([true, true]);
    expect(events).toEqual([
      { shard: 0, replica: 0 },
      { shard: 0, replica: 1 },
    ]);
    expect(await scheduler.fireDue()).toEqual([]); // fires once per boundary
  });

  it('without input sends the Scheduled Event shape with the boundary as its time', async () => {
    const clock = new ManualClock(T0);
    const { events, invoker } = capture();
    const scheduler = new Scheduler(scheduleTargets('pacer', { rateMinutes: 5, instances: [] }, invoker), {
      clock,
      region: 'us-west-2',
      timing: EXACT,
    });
    clock.set(Date.UTC(2026, 10, 21, 20, 5, 0, 250));
    await scheduler.fireDue();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      version: '0',
      'detail-type': 'Scheduled Event',
      source: 'aws.events',
      account: '000000000000',
      time: '2026-11-21T20:05:00Z',
      region: 'us-west-2',
      resources: ['arn:aws:events:us-west-2:000000000000:rule/pacer-schedule'],
      detail: {},
    });
    expect((events[0] as { id: string }).id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('a clock jump over several boundaries fires once (missed schedules are not replayed)', async () => {
    const clock = new ManualClock(T0);
    const { events, invoker } = capture();
    const scheduler = new Scheduler(scheduleTargets('pacer', { rateMinutes: 1, instances: [] }, invoker), {
      clock,
      timing: EXACT,
    });
    clock.advance(10 * MINUTE_MS);
    await scheduler.fireDue();
    expect(events.map((e) => (e as { time: string }).time)).toEqual(['2026-11-21T20:10:00Z']);
    expect(scheduler.nextFireTimes()['pacer-schedule']).toBe(Date.UTC(2026, 10, 21, 20, 11));
  });

  it('every rule, every minute, on the minute, exactly once (12 rules, 100 minutes)', async () => {
    const { delivered, firings, scheduler } = await runFor(100, EXACT);
    expect(Object.values(scheduler.offsets())).toEqual(new Array(12).fill(0));
    expect(firings).toHaveLength(12 * 100);
    expect(firings.every((f) => f.scheduledAt % MINUTE_MS === 0)).toBe(true);
    expect(firings.every((f) => f.deliverAt.length === 1 && f.deliverAt[0] === f.scheduledAt)).toBe(true);
    expect(delivered.every((d) => d.at % MINUTE_MS === 0)).toBe(true);
    expect(delivered).toHaveLength(1200);
  });

  it('runs on real timers with a scaled minute', async () => {
    const { events, invoker } = capture();
    const scheduler = new Scheduler(
      scheduleTargets('pacer', { rateMinutes: 1, instances: [{ id: 'a', input: { a: 1 } }] }, invoker),
      { msPerMinute: 40, timing: EXACT },
    );
    scheduler.start();
    await new Promise((r) => setTimeout(r, 300));
    await scheduler.stop();
    const count = events.length;
    expect(count).toBeGreaterThanOrEqual(3);
    expect(count).toBeLessThanOrEqual(9);
    await new Promise((r) => setTimeout(r, 100));
    expect(events.length).toBe(count); // stopped means stopped
  });

  it('rejects rates EventBridge cannot express', () => {
    const { invoker } = capture();
    expect(() => new Scheduler([{ ruleName: 'fast', rateMinutes: 0.5, invoker }])).toThrow(/whole minutes/);
  });
});

describe('Scheduler, EventBridge-like timing (the default)', () => {
  it('is the default, with the documented model: delay up to 20 s, 1 % duplicated, 1 % missed', () => {
    const { invoker } = capture();
    const scheduler = new Scheduler(scheduleTargets('pacer', pacerSchedule, invoker));
    expect(scheduler.timing).toMatchObject({
      mode: 'eventbridge',
      maxDelayMs: SCHEDULE_DELIVERY_DELAY_MAX_MS,
      duplicateRate: SCHEDULE_DUPLICATE_RATE,
      missRate: SCHEDULE_MISS_RATE,
    });
    expect([SCHEDULE_DELIVERY_DELAY_MAX_MS, SCHEDULE_DUPLICATE_RATE, SCHEDULE_MISS_RATE]).toEqual([
      20_000, 0.01, 0.01,
    ]);
    expect(Number.isSafeInteger((scheduler.timing as { seed: number }).seed)).toBe(true);
  });

  it('fires each rule at its own fixed second, once a minute, delivered 0–20 s later', async () => {
    const minutes = 300;
    const { scheduler, firings, delivered } = await runFor(minutes, { mode: 'eventbridge', seed: 42 });
    const offsets = scheduler.offsets();
    // A whole second in [0, 60 s), kept for every firing of the rule; rules spread over the minute.
    for (const offset of Object.values(offsets)) {
      expect(offset % 1000).toBe(0);
      expect(offset).toBeGreaterThanOrEqual(0);
      expect(offset).toBeLessThan(MINUTE_MS);
    }
    expect(new Set(Object.values(offsets)).size).toBeGreaterThanOrEqual(8);
    const byRule = new Map<string, ScheduleFiring[]>();
    for (const f of firings) byRule.set(f.ruleName, [...(byRule.get(f.ruleName) ?? []), f]);
    expect(byRule.size).toBe(12);
    for (const [rule, fs] of byRule) {
      expect(fs.length).toBeGreaterThanOrEqual(minutes - 1);
      for (const f of fs) expect(f.scheduledAt % MINUTE_MS, rule).toBe(offsets[rule]);
      for (let i = 1; i < fs.length; i++)
        expect((fs[i] as ScheduleFiring).scheduledAt - (fs[i - 1] as ScheduleFiring).scheduledAt).toBe(
          MINUTE_MS,
        );
    }
    // Delays within [0, 20 s], spread over the range; each delivery happens when it is due.
    const delays = firings.flatMap((f) => f.deliverAt.map((at) => at - f.scheduledAt));
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...delays)).toBeLessThanOrEqual(20_000);
    expect(Math.min(...delays)).toBeLessThan(1_000);
    expect(Math.max(...delays)).toBeGreaterThan(19_000);
    const mean = delays.reduce((a, b) => a + b, 0) / delays.length;
    expect(mean).toBeGreaterThan(9_000);
    expect(mean).toBeLessThan(11_000);
    const due = firings.flatMap((f) => f.deliverAt.map((at) => `${f.ruleName}@${at}`)).sort();
    expect(delivered.map((d) => `${d.rule}@${d.at}`).sort()).toEqual(due);
  });

  it('duplicates and misses firings at the configured rates (binomial bounds), the duplicate with the same event', async () => {
    const minutes = 1_000;
    const rate = 0.05;
    const { firings, delivered } = await runFor(
      minutes,
      { mode: 'eventbridge', seed: 7, duplicateRate: rate, missRate: rate },
      MINUTE_MS,
      { rateMinutes: 1, instances: [] }, // no input: Scheduled Events carry an id
    );
    const n = firings.length;
    const missed = firings.filter((f) => f.deliverAt.length === 0).length;
    const twice = firings.filter((f) => f.deliverAt.length === 2).length;
    // ±5 σ of Binomial(n, 0.05) (twice: only among the delivered ones).
    const bound = (p: number, m: number) => [
      m * p - 5 * Math.sqrt(m * p * (1 - p)),
      m * p + 5 * Math.sqrt(m * p * (1 - p)),
    ];
    const [ml, mh] = bound(rate, n);
    const [tl, th] = bound(rate, n - missed);
    expect(missed).toBeGreaterThan(ml as number);
    expect(missed).toBeLessThan(mh as number);
    expect(twice).toBeGreaterThan(tl as number);
    expect(twice).toBeLessThan(th as number);
    expect(delivered).toHaveLength(n - missed + twice);
    // A duplicate is the same event (same id) delivered again; distinct firings have distinct ids.
    const ids = delivered.map((d) => (d.event as { id: string }).id);
    expect(new Set(ids).size).toBe(n - missed);
  });

  it('default rates over 6,000 firings: about 1 % each', async () => {
    const { firings } = await runFor(500, { mode: 'eventbridge', seed: 3 });
    const n = firings.length;
    const missed = firings.filter((f) => f.deliverAt.length === 0).length;
    const twice = firings.filter((f) => f.deliverAt.length === 2).length;
    const sigma = Math.sqrt(n * 0.01 * 0.99);
    expect(Math.abs(missed - n * 0.01)).toBeLessThan(5 * sigma);
    expect(Math.abs(twice - n * 0.01)).toBeLessThan(5 * sigma);
    expect(missed).toBeGreaterThan(0);
    expect(twice).toBeGreaterThan(0);
  });

  it('is reproducible from its seed; another seed or region gives other seconds', async () => {
    const a = await runFor(30, { mode: 'eventbridge', seed: 11 });
    const b = await runFor(30, { mode: 'eventbridge', seed: 11 });
    const c = await runFor(30, { mode: 'eventbridge', seed: 12 });
    expect(b.firings).toEqual(a.firings);
    expect(c.scheduler.offsets()).not.toEqual(a.scheduler.offsets());
    const { invoker } = capture();
    const targets = scheduleTargets('pacer', pacerSchedule, invoker);
    const east = new Scheduler(targets, { region: 'us-east-1', timing: { mode: 'eventbridge', seed: 11 } });
    const west = new Scheduler(targets, { region: 'us-west-2', timing: { mode: 'eventbridge', seed: 11 } });
    expect(east.offsets()).toEqual(a.scheduler.offsets());
    expect(west.offsets()).not.toEqual(east.offsets());
  });

  it('scales with msPerMinute: seconds of a 6 s minute are 100 ms, delays at most 2 s', async () => {
    const { scheduler, firings } = await runFor(200, { mode: 'eventbridge', seed: 5 }, 6_000);
    for (const offset of Object.values(scheduler.offsets())) {
      expect(offset % 100).toBe(0);
      expect(offset).toBeLessThan(6_000);
    }
    for (const f of firings) expect(f.scheduledAt % 6_000).toBe(scheduler.offsets()[f.ruleName]);
    const delays = firings.flatMap((f) => f.deliverAt.map((at) => at - f.scheduledAt));
    expect(Math.max(...delays)).toBeLessThanOrEqual(2_000);
    expect(Math.max(...delays)).toBeGreaterThan(1_800);
  });

  it('missNext drops exactly the rule’s next firing', async () => {
    const clock = new ManualClock(T0);
    const firings: ScheduleFiring[] = [];
    const { invoker } = capture(clock);
    const scheduler = new Scheduler(scheduleTargets('pacer', pacerSchedule, invoker), {
      clock,
      timing: { mode: 'eventbridge', seed: 1, missRate: 0, duplicateRate: 0 },
      onFiring: (_t, f) => firings.push(f),
    });
    scheduler.missNext('pacer-s2-i1');
    expect(() => scheduler.missNext('pacer-s9-i9')).toThrow(/no schedule rule 'pacer-s9-i9'/);
    for (clock.set(scheduler.nextDue()); clock.now() < T0 + 3 * MINUTE_MS; clock.set(scheduler.nextDue()))
      await scheduler.fireDue();
    const rule = firings.filter((f) => f.ruleName === 'pacer-s2-i1');
    expect(rule.map((f) => f.deliverAt.length)).toEqual([0, 1, 1]);
    expect(firings.filter((f) => f.deliverAt.length !== 1)).toHaveLength(1);
  });

  it('rejects settings that cannot work with one line naming the setting', () => {
    expect(() => resolveScheduleTiming({ mode: 'eventbridge', missRate: 2 })).toThrow(
      /^schedule missRate must be from 0 to 1, got 2$/,
    );
    expect(() => resolveScheduleTiming({ mode: 'eventbridge', maxDelayMs: -1 })).toThrow(/maxDelayMs/);
    expect(() => resolveScheduleTiming({ mode: 'sometimes' } as never)).toThrow(
      /schedule timing must be one of eventbridge, exact, got 'sometimes'/,
    );
  });

  it('runs on real timers with a scaled minute: each rule about once a minute', async () => {
    const { events, invoker } = capture();
    const scheduler = new Scheduler(
      scheduleTargets('pacer', { rateMinutes: 1, instances: [{ id: 'a', input: { a: 1 } }] }, invoker),
      { msPerMinute: 60, timing: { mode: 'eventbridge', seed: 9, missRate: 0, duplicateRate: 0 } },
    );
    scheduler.start();
    await new Promise((r) => setTimeout(r, 600));
    await scheduler.stop();
    expect(events.length).toBeGreaterThanOrEqual(6);
    expect(events.length).toBeLessThanOrEqual(11);
  });
});
