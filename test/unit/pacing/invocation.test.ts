/**
 * The cadence of one invocation on a manual clock: the ticks of the minute after its start plus
 * the delivery-delay overlap, each on its boundary; late starts, overruns, timeouts, failed
 * ticks; and the plan's coverage for every rule second and delivery delay.
 */
import { describe, expect, it } from 'vitest';
import {
  invocationOverlapMs,
  invocationWindowMs,
  planInvocation,
  runInvocation,
  TickFailedError,
} from '../../../shared/pacing/invocation.js';
import { tickOf } from '../../../shared/pacing/types.js';
import { regionDescription } from '../../../shared/region/resources.js';
import { SCHEDULE_DELIVERY_DELAY_MAX_MS } from '../../../shared/region/schedule-delivery.js';
import { ManualClock } from '../../../shared/time/clock.js';

const MINUTE = 60_000;
const TICK = 10_000;
const M0 = Date.UTC(2026, 10, 21, 15, 7, 0);
const T0 = M0 / TICK;

/** One invocation on a manual clock; `failure(tick)` makes that tick throw (after its cost). */
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
  it('runs the ticks of the minute after its start plus the 20 s overlap, each on its wall-clock boundary', async () => {
    const { clock, ranAt, run } = harness(M0 + 120); // delivered 120 ms after the rule's second (:00)
    const summary = await run;
    // Ticks at +0 (its start's), +10 … +80 s: boundaries up to start + 60 s + 20 s.
    expect(ranAt.map(([t]) => t - T0)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect(ranAt.slice(1).map(([t, at]) => at - t * TICK)).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
    expect(summary).toMatchObject({ ticksSkipped: 0, ticksLate: 0, ticksRunElsewhere: 0 });
    expect(summary.plan).toEqual({ firstTick: T0, lastTick: T0 + 8, endMs: M0 + 90_000 });
    expect(clock.now()).toBeLessThan(summary.plan.endMs);
  });

  it('starts at its own second, not the clock minute: a rule at :37 runs its current tick late, then every boundary to :37 + 80 s', async () => {
    const { ranAt, run } = harness(M0 + 37_000);
    const summary = await run;
    expect(ranAt[0]).toEqual([T0 + 3, M0 + 37_000]);
    // 1:57 is the last boundary at or before 0:37 + 80 s.
    expect(ranAt.map(([t]) => t - T0)).toEqual([3, 4, 5, 6, 7, 8, 9, 10, 11]);
    expect(summary).toMatchObject({ ticksSkipped: 0, ticksLate: 1 });
  });

  it('skips a tick whose whole window passed during an overrun', async () => {
    const { ranAt, run } = harness(M0, (tick) => (tick === T0 + 1 ? 21_500 : 50));
    const summary = await run;
    // tick 1 ran 10.0–31.5 s: tick 2’s window [20, 30) passed, tick 3 starts late at 31.5 s.
    expect(ranAt.map(([t]) => t - T0)).toEqual([0, 1, 3, 4, 5, 6, 7, 8]);
    expect(summary.ticksSkipped).toBe(1);
    expect(summary.ticksLate).toBe(1);
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
    expect(summary.ticksSkipped).toBe(6);
    expect(summary.trailingSkipped).toBe(6); // reported apart: no later tick carries them
  });

  it('a tick that throws does not end the invocation: the later ticks run on their boundaries, then it fails naming it', async () => {
    const stall = new Error('Redis at 10.0.0.5:6379 sent nothing for 1000 ms');
    const { ranAt, published, run } = harness(
      M0,
      (tick) => (tick === T0 + 1 ? 1_000 : 50),
      (tick) => (tick === T0 + 1 ? stall : undefined),
    );
    const error = await run.then(
      () => undefined,
      (e: unknown) => e as TickFailedError,
    );
    expect(error).toBeInstanceOf(TickFailedError);
    expect(error?.cause).toBe(stall);
    expect(error?.failures.map((f) => f.tick)).toEqual([T0 + 1]);
    expect(error?.message).toMatch(
      /1 of the invocation's ticks failed \(\d+; 8 ran\); first: Redis at 10.0.0.5:6379/,
    );
    // All nine ran, each on its own boundary; eight published.
    expect(ranAt.map(([t, at]) => [t - T0, at - M0])).toEqual(
      [0, 1, 2, 3, 4, 5, 6, 7, 8].map((k) => [k, k * TICK]),
    );
    expect(published).toEqual([0, 2, 3, 4, 5, 6, 7, 8].map((k) => T0 + k));
  });

  it('ends once a newer invocation of its instance covers the rest of the window (superseded)', async () => {
    const clock = new ManualClock(M0 + 500);
    const ran: number[] = [];
    const summary = await runInvocation({
      clock,
      sleep: async (ms) => clock.advance(ms),
      tickMs: TICK,
      minuteMs: MINUTE,
      // The next invocation of this instance starts at 1:02 (its first tick registers it).
      superseded: () => clock.now() >= M0 + 62_000,
      runTick: async (tick) => {
        ran.push(tick - T0);
        clock.advance(50);
        return tick;
      },
    });
    // Ran through the tick at 1:10 (when it learnt of the newer one: the lease is read at a tick).
    expect(ran).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(summary.ticksHandedOver).toBe(1);
    expect(summary.ticksSkipped).toBe(0);
  });

  it('plans scaled-down minutes for fast runs (1 s ticks in a 6 s minute: a 2 s overlap)', () => {
    expect(invocationOverlapMs(6_000)).toBe(2_000);
    expect(planInvocation(12_345, 1_000, 6_000)).toEqual({ firstTick: 12, lastTick: 20, endMs: 21_000 });
  });
});

/**
 * Every rule second s and every pair of delivery delays (d1 for one firing, d2 for the next):
 * invocation k starts at s + d1, invocation k + 1 at s + 60 s + d2. Covered means every tick from
 * k's first to k + 1's first is in k's window (k + 1 runs its own first tick, late if need be).
 */
function gapTicks(
  plan: (startMs: number) => { firstTick: number; lastTick: number },
  start: number,
  next: number,
): number {
  return Math.max(0, plan(next).firstTick - 1 - plan(start).lastTick);
}

describe('invocation plan under EventBridge timing (pure)', () => {
  const layouts = [
    { name: 'AWS: 10 s ticks, 60 s minute', tickMs: 10_000, minuteMs: 60_000 },
    { name: 'local tests: 2 s ticks, 12 s minute', tickMs: 2_000, minuteMs: 12_000 },
    { name: 'local tests: 1 s ticks, 6 s minute', tickMs: 1_000, minuteMs: 6_000 },
  ];

  for (const { name, tickMs, minuteMs } of layouts) {
    it(`leaves no gap between consecutive invocations of a rule for every second and delay (${name})`, () => {
      const second = minuteMs / 60;
      const maxDelay = invocationOverlapMs(minuteMs);
      const delayStep = maxDelay / 40; // 0.5 s steps in a 60 s minute
      const plan = (startMs: number) => planInvocation(startMs, tickMs, minuteMs);
      let pairs = 0;
      const gaps: string[] = [];
      let longest = 0;
      for (let s = 0; s < 60; s++) {
        // A few minutes into an arbitrary epoch offset, so boundaries are not all aligned with 0.
        const ruleAt = 1_000 * minuteMs + 7 * tickMs + s * second;
        for (let d1 = 0; d1 <= maxDelay; d1 += delayStep) {
          const start = ruleAt + d1;
          const p = plan(start);
          if (p.firstTick !== tickOf(start, tickMs)) gaps.push(`s=${s} d1=${d1}: first tick ${p.firstTick}`);
          longest = Math.max(longest, p.endMs - start);
          for (let d2 = 0; d2 <= maxDelay; d2 += delayStep) {
            const next = ruleAt + minuteMs + d2;
            const gap = gapTicks(plan, start, next);
            if (gap > 0) gaps.push(`s=${s} d1=${d1} d2=${d2}: ${gap} tick(s)`);
            pairs++;
          }
        }
      }
      expect(gaps).toEqual([]);
      expect(pairs).toBe(60 * 41 * 41);
      // Never longer than the window the Lambda timeout is derived from.
      expect(longest).toBeLessThanOrEqual(invocationWindowMs(tickMs, minuteMs));
    });
  }

  it('a window bound to the clock minute would leave gaps: a rule at :37 covers 2 of its minute’s 6 ticks', () => {
    // The counter-example the property above rejects: ticks of the start's clock minute only.
    const minuteBound = (startMs: number) => {
      const minuteStart = Math.floor(startMs / MINUTE) * MINUTE;
      return { firstTick: tickOf(startMs, TICK), lastTick: tickOf(minuteStart + MINUTE - 1, TICK) };
    };
    const start = M0 + 37_000;
    const p = minuteBound(start);
    expect(p.lastTick - p.firstTick + 1).toBe(3); // :30 (run late), :40, :50
    expect(p.lastTick - tickOf(start + TICK - 1, TICK) + 1).toBe(2); // on their boundaries: :40, :50
    // The next firing at 1:37 leaves 1:00–1:20 to nobody of this rule.
    expect(gapTicks(minuteBound, start, start + MINUTE)).toBe(3);
  });

  it('the overlap is the modelled delivery delay: delays beyond it (by two ticks) open a gap', () => {
    expect(invocationOverlapMs(MINUTE)).toBe(SCHEDULE_DELIVERY_DELAY_MAX_MS);
    const plan = (startMs: number) => planInvocation(startMs, TICK, MINUTE);
    // Wherever in its tick the start falls: the next firing 20 s late still overlaps; 20 s plus two
    // ticks late leaves a tick to nobody of this rule (the next invocation's late first tick is
    // the only slack, at most a tick).
    for (let into = 0; into < TICK; into += 500) {
      const start = M0 + into;
      expect(gapTicks(plan, start, start + MINUTE + SCHEDULE_DELIVERY_DELAY_MAX_MS)).toBe(0);
      expect(gapTicks(plan, start, start + MINUTE + SCHEDULE_DELIVERY_DELAY_MAX_MS + 2 * TICK)).toBe(1);
    }
  });

  it('the Lambda timeout covers the longest window plus its last tick (AWS and scaled layouts)', () => {
    const aws = regionDescription({}).functions.pacer;
    expect(invocationWindowMs(TICK, MINUTE)).toBe(90_000);
    expect(aws.timeoutSeconds * 1000).toBeGreaterThanOrEqual(invocationWindowMs(TICK, MINUTE) + TICK);
    const scaled = regionDescription({ pacer: { tickMs: 2_000, leaseTtlMs: 5_000, minuteMs: 12_000 } });
    expect(scaled.functions.pacer.timeoutSeconds * 1000).toBeGreaterThanOrEqual(
      invocationWindowMs(2_000, 12_000) + 2_000,
    );
  });
});
