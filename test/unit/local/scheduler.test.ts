/** EventBridge behaviour of the local scheduler: event shapes, boundaries, no replay of missed boundaries. */
import { describe, expect, it } from 'vitest';
import { Scheduler, scheduleTargets } from '../../../local/scheduler.js';
import { InProcessInvoker } from '../../../local/worker/in-process-invoker.js';
import { ManualClock, MINUTE_MS } from '../../../shared/time/clock.js';

function capture() {
  const events: unknown[] = [];
  const invoker = new InProcessInvoker({
    functionName: 'pacer',
    handler: async (event: never) => {
      events.push(event);
      return 'ok';
    },
  });
  return { events, invoker };
}

const T0 = Date.UTC(2026, 10, 21, 20, 0, 30); // 20:00:30

describe('Scheduler', () => {
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
    const scheduler = new Scheduler(targets, { clock, region: 'us-west-2' });
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
    });
    clock.advance(10 * MINUTE_MS);
    await scheduler.fireDue();
    expect(events.map((e) => (e as { time: string }).time)).toEqual(['2026-11-21T20:10:00Z']);
    expect(scheduler.nextFireTimes()['pacer-schedule']).toBe(Date.UTC(2026, 10, 21, 20, 11));
  });

  it('runs on real timers with a scaled minute', async () => {
    const { events, invoker } = capture();
    const scheduler = new Scheduler(
      scheduleTargets('pacer', { rateMinutes: 1, instances: [{ id: 'a', input: { a: 1 } }] }, invoker),
      {
        msPerMinute: 40,
      },
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
