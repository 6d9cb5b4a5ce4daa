/**
 * The region share rule (shared/pacing/regions/shares.ts): shares follow demand, never hand out
 * more than what is left while the lag is within the window (Σ shares ≤ B + the peers' unseen
 * spend), a vanished region keeps only its floor's part, quantisation holds small moves, and the
 * demand window / published minimum behave as documented.
 */
import { describe, expect, it } from 'vitest';
import {
  DemandWindow,
  defaultShareConfig,
  PublishedMinimum,
  regionShare,
  ShareConfigError,
  shareConfig,
} from '../../../shared/pacing/regions/shares.js';
import { prng } from '../../../shared/random/prng.js';

const B = 10_000_000;
const DAY = 86_400_000;

describe('regionShare', () => {
  it('splits what is left by demand (70/30) on top of each region’s spend', () => {
    const a = regionShare({
      budgetMicros: B,
      dayLengthMs: DAY,
      ownSpentMicros: 2_000_000,
      ownDemandMicrosPerSec: 700,
      peers: [{ region: 'b', spentMicros: 1_000_000, demandMicrosPerSec: 300 }],
    });
    expect(a.remainingMicros).toBe(7_000_000);
    expect(a.weight).toBeGreaterThan(0.69);
    expect(a.weight).toBeLessThan(0.7);
    expect(a.shareMicros).toBe(Math.floor(2_000_000 + a.weight * 7_000_000));
  });

  it('never hands out more than the budget when every region sees the others late (random lag within the window)', () => {
    const random = prng(3);
    for (let trial = 0; trial < 2_000; trial++) {
      const n = 2 + Math.floor(random() * 3);
      // True figures now, and what each region published within the window (the peers see one of them).
      const spent = Array.from({ length: n }, () => Math.floor(random() * B * 0.2));
      const figures = Array.from({ length: n }, () => [random() * 1000, random() * 1000]);
      const unseen = Array.from({ length: n }, () => Math.floor(random() * 100_000));
      let total = 0;
      let unseenTotal = 0;
      for (let r = 0; r < n; r++) {
        const peers = [];
        for (let q = 0; q < n; q++) {
          if (q === r) continue;
          peers.push({
            region: String(q),
            spentMicros: Math.max(0, (spent[q] as number) - (unseen[q] as number)),
            demandMicrosPerSec: (figures[q] as number[])[Math.floor(random() * 2)] as number,
          });
        }
        total += regionShare({
          budgetMicros: B,
          dayLengthMs: DAY,
          ownSpentMicros: spent[r] as number,
          ownDemandMicrosPerSec: Math.min(...(figures[r] as number[])),
          peers,
        }).shareMicros;
        unseenTotal += unseen[r] as number;
      }
      expect(total).toBeLessThanOrEqual(B + unseenTotal);
    }
  });

  it('leaves a region whose demand vanished only its floor’s part of what is left', () => {
    const d = regionShare({
      budgetMicros: B,
      dayLengthMs: DAY,
      ownSpentMicros: 4_000_000,
      ownDemandMicrosPerSec: 0,
      peers: [{ region: 'b', spentMicros: 3_000_000, demandMicrosPerSec: 200 }],
    });
    const floor = (defaultShareConfig.floorFraction * B) / (DAY / 1000);
    expect(d.weight).toBeCloseTo(floor / (2 * floor + 200), 9);
    expect(d.weight).toBeLessThan(0.03);
    expect(d.shareMicros - 4_000_000).toBeLessThanOrEqual(Math.ceil(d.weight * d.remainingMicros));
  });

  it('holds a share through small moves and applies large ones (and every cut beyond the small quantum)', () => {
    const base = { budgetMicros: B, dayLengthMs: DAY, ownSpentMicros: 1_000_000, peers: [] as never[] };
    const first = regionShare({ ...base, ownDemandMicrosPerSec: 1 });
    expect(first.shareMicros).toBe(B);
    const peers = [{ region: 'b', spentMicros: 0, demandMicrosPerSec: 100 }];
    const cut = regionShare({ ...base, peers, ownDemandMicrosPerSec: 100, previousMicros: B });
    expect(cut.held).toBe(false);
    const tiny = regionShare({
      ...base,
      peers,
      ownDemandMicrosPerSec: 100.5,
      previousMicros: cut.shareMicros,
    });
    expect(tiny.held).toBe(true);
    expect(tiny.shareMicros).toBe(cut.shareMicros);
  });

  it('never goes below what the region already spent, nor above the budget', () => {
    const over = regionShare({
      budgetMicros: B,
      dayLengthMs: DAY,
      ownSpentMicros: 6_000_000,
      ownDemandMicrosPerSec: 10,
      peers: [{ region: 'b', spentMicros: 6_000_000, demandMicrosPerSec: 10 }],
    });
    expect(over.remainingMicros).toBe(0);
    expect(over.shareMicros).toBe(6_000_000);
    const all = regionShare({
      budgetMicros: B,
      dayLengthMs: DAY,
      ownSpentMicros: 0,
      ownDemandMicrosPerSec: 5,
      peers: [],
    });
    expect(all.shareMicros).toBe(B);
  });

  it('rejects settings out of range with the setting’s name', () => {
    expect(() => shareConfig({ floorFraction: 0 })).toThrow(ShareConfigError);
    expect(() => shareConfig({ demandWindowTicks: 0 })).toThrow(/demandWindowTicks/);
  });
});

describe('DemandWindow and PublishedMinimum', () => {
  it('estimates full-speed demand as Δspend ÷ (gain × Δt) and drops to 0 within the window when traffic stops', () => {
    const w = new DemandWindow(3);
    expect(w.demandMicrosPerSec()).toBeUndefined();
    let spent = 0;
    for (let i = 0; i <= 3; i++) {
      w.observe(i * 10_000, spent, 0.5);
      spent += 5_000; // 500 µ/s at gain 0.5 → 1,000 µ/s at full speed
    }
    expect(w.demandMicrosPerSec()).toBeCloseTo(1_000, 6);
    for (let i = 4; i <= 7; i++) w.observe(i * 10_000, spent, 0.5);
    expect(w.demandMicrosPerSec()).toBe(0);
  });

  it('reads a sparse plan over a longer window; a dense one that stops still reads 0 within 3 ticks', () => {
    // One impression of 1,500 µ$ every 6 ticks (60 s) at gain 1: 25 µ$/s.
    const sparse = new DemandWindow(3, 60);
    const short = new DemandWindow(3);
    let spent = 0;
    const readings: number[] = [];
    const shortReadings: number[] = [];
    for (let i = 0; i <= 120; i++) {
      if (i > 0 && i % 6 === 0) spent += 1_500;
      sparse.observe(i * 10_000, spent, 1);
      short.observe(i * 10_000, spent, 1);
      if (i >= 60) {
        readings.push(sparse.demandMicrosPerSec() as number);
        shortReadings.push(short.demandMicrosPerSec() as number);
      }
    }
    // Three ticks read 0 or one impression over 30 s (0 or 50 µ$/s); the long window reads the rate.
    expect(new Set(shortReadings.map((x) => Math.round(x)))).toEqual(new Set([0, 50]));
    for (const r of readings) {
      expect(r).toBeGreaterThanOrEqual(15);
      expect(r).toBeLessThanOrEqual(35);
    }
    // A dense plan (spend every tick) keeps the short window: 0 three ticks after it stops.
    const dense = new DemandWindow(3, 60);
    spent = 0;
    for (let i = 0; i <= 30; i++) {
      spent += 5_000;
      dense.observe(i * 10_000, spent, 1);
    }
    expect(dense.demandMicrosPerSec()).toBeCloseTo(500, 6);
    for (let i = 31; i <= 33; i++) dense.observe(i * 10_000, spent, 1);
    expect(dense.demandMicrosPerSec()).toBe(0);
  });

  it('keeps the minimum of what peers may still hold: a figure stays until a later one is a window old', () => {
    const m = new PublishedMinimum(15_000);
    m.publish(0, 100);
    m.publish(10_000, 500);
    expect(m.min(10_000)).toBe(100);
    expect(m.min(24_999)).toBe(100);
    expect(m.min(25_000)).toBe(500);
    expect(m.min(100_000)).toBe(500);
  });
});
