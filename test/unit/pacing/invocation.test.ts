/** The cadence of one invocation on a manual clock: six ticks on boundaries, late starts, overruns. */
import { describe, expect, it } from 'vitest';
import { planMinute, runInvocation, TickFailedError } from '../../../shared/pacing/invocation.js';
import { tickOf } from '../../../shared/pacing/types.js';

const tickOfMinute = (ms: number) => tickOf(ms, 10_000);

import { ManualClock } from '../../../shared/time/clock.js';

const MINUTE = 60_000;
const TICK = 10_000;
const M0 = Date.UTC(2026, 10, 21, 15, 7, 0);

/** A minute on a manual clock; `failure(tick)` makes that tick throw (after its cost). */
function harness(
  startMs: number,
  tickCostMs: (tick: number) => number = () => 50,
  failure: (tick: number) => Error | undefined = () => undefined,
) {
  const clock = new ManualClock(startMs);
  const ranAt: [number, number][] = [];
  const published: number[] = [];
  const run = runInvocation({
    clock,
    sleep: async (ms) => clock.advance(ms),
    tickMs: TICK,
    minuteMs: MINUTE,
    runTick: async (tick) => {
      ranAt.push([tick, clock.now()]);
      clock.advance(tickCostMs(tick));
      const error = failure(tick);
      if (error) throw error;
      return tick;
    },
    onTick: (tick) => published.push(tick),
  });
  return { clock, ranAt, published, run };
}

describe('pacer invocation cadence', () => {
  it('runs the six ticks of its minute on their wall-clock boundaries and returns inside the minute', async () => {
    const { clock, ranAt, run } = harness(M0 + 120); // EventBridge delivered 120 ms late
    const summary = await run;
    expect(ranAt.map(([t]) => t)).toEqual([0, 1, 2, 3, 4, 5].map((i) => M0 / TICK + i));
    expect(ranAt.slice(1).map(([t, at]) => at - t * TICK)).toEqual([0, 0, 0, 0, 0]);
    expect(summary).toMatchObject({ ticksSkipped: 0, ticksLate: 0 });
    expect(clock.now()).toBeLessThan(M0 + MINUTE); // before the next invocation's first tick
  });

  it('derives tick ids from time: a late start runs the current tick and counts the earlier ones skipped', async () => {
    const { ranAt, run } = harness(M0 + 23_000);
    const summary = await run;
    expect(ranAt[0]).toEqual([M0 / TICK + 2, M0 + 23_000]);
    expect(ranAt).toHaveLength(4);
    expect(summary).toMatchObject({ ticksSkipped: 2, ticksLate: 1 });
  });

  it('skips a tick whose whole window passed during an overrun, and never starts past the minute', async () => {
    const first = M0 / TICK;
    const { clock, ranAt, run } = harness(M0, (tick) => (tick === first + 1 ? 21_500 : 50));
    const summary = await run;
    // tick 1 ran 10.0–31.5 s: tick 2’s window [20, 30) passed, tick 3 starts late at 31.5 s.
    expect(ranAt.map(([t]) => t - first)).toEqual([0, 1, 3, 4, 5]);
    expect(summary.ticksSkipped).toBe(1);
    expect(summary.ticksLate).toBe(1);
    expect(clock.now()).toBeLessThan(M0 + MINUTE);
  });

  it('does not start a tick without a tick of time left before the invocation timeout', async () => {
    const clock = new ManualClock(M0);
    const deadline = M0 + 35_000;
    const summary = await runInvocation({
      clock,
      sleep: async (ms) => clock.advance(ms),
      tickMs: TICK,
      minuteMs: MINUTE,
      remainingMs: () => deadline - clock.now(),
      runTick: async (t) => t,
    });
    expect(summary.outcomes).toHaveLength(3);
    expect(summary.ticksSkipped).toBe(3);
    expect(summary.trailingSkipped).toBe(3); // reported apart: no later tick carries them
  });

  it('a tick that throws does not end the minute: the later ticks run on their boundaries, then the invocation fails naming it', async () => {
    const stall = new Error('Redis at 10.0.0.5:6379 sent nothing for 1000 ms');
    const first = tickOfMinute(M0);
    const { ranAt, published, run } = harness(
      M0,
      (tick) => (tick === first + 1 ? 1_000 : 50),
      (tick) => (tick === first + 1 ? stall : undefined),
    );
    const error = await run.then(
      () => undefined,
      (e: unknown) => e as TickFailedError,
    );
    expect(error).toBeInstanceOf(TickFailedError);
    expect(error?.cause).toBe(stall);
    expect(error?.failures.map((f) => f.tick)).toEqual([first + 1]);
    expect(error?.message).toMatch(
      /1 of the minute's ticks failed \(\d+; 5 ran\); first: Redis at 10.0.0.5:6379/,
    );
    // All six ran, each on its own boundary; five published.
    expect(ranAt.map(([t, at]) => [t - first, at - M0])).toEqual(
      [0, 1, 2, 3, 4, 5].map((k) => [k, k * TICK]),
    );
    expect(published).toEqual([0, 2, 3, 4, 5].map((k) => first + k));
  });

  it('plans scaled-down minutes for fast runs (1 s ticks in a 6 s minute)', () => {
    expect(planMinute(12_345, 1_000, 6_000)).toEqual({
      firstTick: 12,
      lastTick: 17,
      currentTick: 12,
      minuteEndMs: 18_000,
    });
  });
});
