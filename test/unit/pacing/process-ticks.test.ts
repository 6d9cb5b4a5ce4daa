/**
 * A shard's ticks in one process (shared warm state): one at a time, each at most once, and with
 * concurrent invocations the tick goes to the one with the highest held lease epoch. Driven by
 * runInvocation on virtual time (a manual clock that jumps to the next sleeper).
 */
import { describe, expect, it } from 'vitest';
import { runInvocation } from '../../../shared/pacing/invocation.js';
import { ProcessTicks } from '../../../shared/pacing/process-ticks.js';
import { ManualClock } from '../../../shared/time/clock.js';

const MINUTE = 60_000;
const TICK = 10_000;
const M0 = Date.UTC(2026, 10, 21, 15, 7, 0);
const T0 = M0 / TICK;

/** Virtual time: `sleep` parks until the clock reaches its time; `drive` moves the clock sleeper by sleeper. */
function virtualTime(startMs: number) {
  const clock = new ManualClock(startMs);
  const sleepers: { at: number; wake: () => void }[] = [];
  const sleep = (ms: number) =>
    new Promise<void>((wake) => {
      sleepers.push({ at: clock.now() + ms, wake });
    });
  const settle = () => new Promise<void>((r) => setImmediate(r));
  async function drive(done: Promise<unknown>): Promise<void> {
    let finished = false;
    void done.finally(() => {
      finished = true;
    });
    for (;;) {
      await settle();
      if (finished) return;
      sleepers.sort((a, b) => a.at - b.at);
      const next = sleepers.shift();
      if (!next) throw new Error('nothing left to wake, but the invocations have not finished');
      if (next.at > clock.now()) clock.set(next.at);
      next.wake();
    }
  }
  return { clock, sleep, drive };
}

describe('ProcessTicks', () => {
  it('a later invocation in the same process does not run the tick the previous one ran last', async () => {
    const ticks = new ProcessTicks();
    const clock = new ManualClock(M0);
    const ran: [string, number][] = [];
    const invocation = (name: string) =>
      runInvocation({
        clock,
        sleep: async (ms) => clock.advance(ms),
        tickMs: TICK,
        minuteMs: MINUTE,
        ticks: { process: ticks, rank: () => 0 },
        runTick: async (tick) => {
          ran.push([name, tick]);
          clock.advance(300);
          return tick;
        },
      });
    const first = await invocation('A');
    expect(first.plan.lastTick).toBe(T0 + 8);
    // The next invocation lands in this process 0.3 s into A's last tick (Lambda: one at a time).
    const second = await invocation('B');
    expect(ran.filter(([, t]) => t === T0 + 8)).toEqual([['A', T0 + 8]]);
    expect(second.ticksRunElsewhere).toBe(1);
    expect(second.outcomes[0]).toBe(T0 + 9);
    expect(ticks.last).toBe(T0 + 16);
  });

  it('concurrent invocations of a shard in one process: every tick once, one at a time, by the lease holder', async () => {
    const ticks = new ProcessTicks();
    const { clock, sleep, drive } = virtualTime(M0);
    const ran: [string, number][] = [];
    let running = 0;
    let overlapped = 0;
    // A holds the lease at epoch 5 for its whole window; B starts 30 s later and does not hold it
    // until A's window is over (the handler releases it then; here B takes epoch 6 when A is done).
    let aDone = false;
    const invocation = (name: string, rank: () => number) =>
      runInvocation({
        clock,
        sleep,
        tickMs: TICK,
        minuteMs: MINUTE,
        ticks: { process: ticks, rank },
        runTick: async (tick) => {
          running++;
          if (running > 1) overlapped++;
          ran.push([name, tick]);
          await sleep(2_000); // another invocation's boundary may come up meanwhile
          running--;
          return tick;
        },
      });
    const a = invocation('A', () => (aDone ? 0 : 5));
    const bStarted = sleep(30_000).then(() => invocation('B', () => (aDone ? 6 : 0)));
    const aEnded = a.then((summary) => {
      aDone = true;
      return summary;
    });
    const both = Promise.all([aEnded, bStarted]);
    await drive(both);
    const [sa, sb] = await both;
    expect(overlapped).toBe(0);
    const byTick = new Map<number, string[]>();
    for (const [name, t] of ran) byTick.set(t, [...(byTick.get(t) ?? []), name]);
    expect([...byTick.values()].filter((names) => names.length > 1)).toEqual([]);
    // A ran its whole window (0–80 s); B only its ticks after A's: 90 s to B's end (30 + 80 s).
    expect(ran.filter(([n]) => n === 'A').map(([, t]) => t - T0)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect(ran.filter(([n]) => n === 'B').map(([, t]) => t - T0)).toEqual([9, 10, 11]);
    expect(sa.ticksRunElsewhere).toBe(0);
    expect(sb.ticksRunElsewhere).toBe(6); // 30–80 s were A's
  });

  it('a newer invocation that took the lease runs the ticks; the older one, still in its window, yields them', async () => {
    const ticks = new ProcessTicks();
    const { clock, sleep, drive } = virtualTime(M0);
    const ran: [string, number][] = [];
    // B adopted the lease (epoch 6) at its start 30 s in; A's view says epoch 5 until its next renew fails.
    const inB = () => clock.now() >= M0 + 30_000;
    const invocation = (name: string, rank: () => number) =>
      runInvocation({
        clock,
        sleep,
        tickMs: TICK,
        minuteMs: MINUTE,
        ticks: { process: ticks, rank },
        runTick: async (tick) => {
          ran.push([name, tick]);
          return tick;
        },
      });
    const a = invocation('A', () => 5);
    const b = sleep(30_000).then(() => invocation('B', () => (inB() ? 6 : 0)));
    const both = Promise.all([a, b]);
    await drive(both);
    // From B's start (30 s, its first tick) every tick is B's, though A's window runs to 80 s.
    expect(ran.filter(([n]) => n === 'A').map(([, t]) => t - T0)).toEqual([0, 1, 2]);
    expect(ran.filter(([n]) => n === 'B').map(([, t]) => t - T0)).toEqual([3, 4, 5, 6, 7, 8, 9, 10, 11]);
  });

  it("a tick's error reaches its invocation and does not block the shard's later ticks", async () => {
    const ticks = new ProcessTicks();
    const turns = ticks.join(10, () => 0);
    await expect(turns.run(1, async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    await expect(turns.run(2, async () => 'ok')).resolves.toEqual({ ran: true, value: 'ok' });
    await expect(turns.run(2, async () => 'again')).resolves.toEqual({ ran: false });
    turns.leave();
  });
});
