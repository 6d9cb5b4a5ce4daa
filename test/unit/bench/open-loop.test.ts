import { describe, expect, it } from 'vitest';
import { openLoop, openLoopWindows } from '../../../bench/open-loop.js';

/** Keeps the thread busy for `ms` (what a slow operation does to the event loop). */
function spin(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy
  }
}

describe('open-loop generator', () => {
  it('starts every operation once, in order, and measures from its scheduled instant', async () => {
    const started: number[] = [];
    const r = await openLoop({
      ratePerSec: 2000,
      total: 200,
      run: async (i) => {
        started.push(i);
      },
    });
    expect(started).toEqual(Array.from({ length: 200 }, (_, i) => i));
    expect(r.latenciesMs).toHaveLength(200);
    expect(r.failures).toBe(0);
    // Arrivals come from another thread: none is started before its instant.
    expect(r.generatorLateMs[0]).toBeGreaterThanOrEqual(0);
    expect(r.startLagMs[0]).toBeGreaterThanOrEqual(0);
  });

  it('counts queueing behind a busy thread against the operations that waited (no coordinated omission)', async () => {
    // Each operation holds the thread 3 ms while one arrives every 1 ms: operation k cannot start
    // before 3k ms, so it waits ≥ 2k ms past its instant. A closed loop would hide that wait.
    const total = 30;
    const r = await openLoop({
      ratePerSec: 1000,
      total,
      run: async () => spin(3),
    });
    const worst = r.latenciesMs[total - 1] as number;
    expect(worst).toBeGreaterThanOrEqual(2 * (total - 1));
    expect(r.achievedPerSec).toBeLessThan(1000 / 2.5);
  });

  it('counts a failed operation and keeps its latency', async () => {
    const r = await openLoop({
      ratePerSec: 1000,
      total: 10,
      run: async (i) => {
        if (i % 5 === 0) throw new Error('boom');
      },
    });
    expect(r.failures).toBe(2);
    expect(r.latenciesMs).toHaveLength(10);
  });

  it('runs the warm-up and the windows on one schedule, each window measured on its own', async () => {
    // Indexes continue across warm-up and windows (one generator); a failure is counted in the
    // window it happened in, and the warm-up's in none.
    const started: number[] = [];
    const results = await openLoopWindows({
      ratePerSec: 2000,
      warmup: 20,
      windows: [30, 40],
      run: async (i) => {
        started.push(i);
        if (i === 3 || i === 25 || i === 60 || i === 61) throw new Error('boom');
      },
    });
    expect(started).toEqual(Array.from({ length: 90 }, (_, i) => i));
    expect(results.map((r) => r.latenciesMs.length)).toEqual([30, 40]);
    expect(results.map((r) => r.failures)).toEqual([1, 2]);
    for (const r of results) {
      expect(r.achievedPerSec).toBeGreaterThan(0);
      expect(r.generatorLateMs[0]).toBeGreaterThanOrEqual(0);
    }
  });

  it('rejects windows or a warm-up that cannot be run', async () => {
    const run = async () => {};
    await expect(openLoopWindows({ ratePerSec: 10, windows: [], run })).rejects.toThrow(/window/);
    await expect(openLoopWindows({ ratePerSec: 10, windows: [5, 0], run })).rejects.toThrow(/window/);
    await expect(openLoopWindows({ ratePerSec: 10, warmup: -1, windows: [5], run })).rejects.toThrow(
      /warmup/,
    );
  });

  it('rejects a rate or count that is not positive', async () => {
    await expect(openLoop({ ratePerSec: 0, total: 1, run: async () => {} })).rejects.toThrow(/positive/);
    await expect(openLoop({ ratePerSec: 10, total: 0, run: async () => {} })).rejects.toThrow(/positive/);
  });
});
