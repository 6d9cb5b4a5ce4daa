/**
 * The market model of sim/market: real iPinYou prices (floor spikes kept), traffic from an hourly
 * shape, auctions, notices; deterministic for a seed.
 */
import { describe, expect, it } from 'vitest';
import { prng } from '../../../shared/random/prng.js';
import {
  assertShape,
  IPINYOU_CAMPAIGNS,
  loadIpinyouHistogram,
  localHourOf,
  Market,
  outcomeOf,
  PriceDataError,
  plannedNotices,
  poisson,
  priceSampler,
  runAuction,
  SHAPES,
  shapeAt,
  TrafficModel,
  TrafficShapeError,
} from '../../../sim/market/index.js';

describe('prices (iPinYou histograms)', () => {
  it('loads every shipped campaign; unknown ones are refused with the list', () => {
    for (const c of IPINYOU_CAMPAIGNS) expect(loadIpinyouHistogram(c).counts.length).toBeGreaterThan(100);
    expect(() => loadIpinyouHistogram('9999')).toThrow(PriceDataError);
    expect(() => loadIpinyouHistogram('9999')).toThrow(/1458/);
  });

  it('samples the histogram itself: 13.7 % of campaign 1458 prices sit at the floor price 70', () => {
    const s = priceSampler(loadIpinyouHistogram('1458'));
    const random = prng(1);
    let at70 = 0;
    const n = 100_000;
    for (let i = 0; i < n; i++) if (s.sample(random) === 700) at70++;
    expect(at70 / n).toBeCloseTo(0.137, 2);
    expect(s.quantile(0.5)).toBeGreaterThan(0);
    expect(s.meanMicros).toBeGreaterThan(s.quantile(0.05));
  });
});

describe('traffic', () => {
  it('follows the hourly shape (no steps at hour boundaries) and the daily volume', () => {
    expect(shapeAt(SHAPES.noonPeak, 12.5)).toBeCloseTo(SHAPES.noonPeak[12] as number, 12);
    expect(shapeAt(SHAPES.flat, 23.9)).toBe(1);
    const t = new TrafficModel(
      { requestsPerDay: 144_000, shape: SHAPES.noonPeak, minuteNoise: 0, dayNoise: 0 },
      prng(3),
    );
    const day = Date.parse('2026-11-21T00:00:00Z');
    let total = 0;
    for (let m = 0; m < 1440; m++) total += t.expected(day + m * 60_000);
    expect(total).toBeCloseTo(144_000, -2);
    expect(t.expected(day + 12 * 3_600_000) / t.expected(day + 3 * 3_600_000)).toBeGreaterThan(8);
  });

  it('uses the local hours of its time zone and honours outage / spike events', () => {
    expect(localHourOf(Date.parse('2026-11-21T20:00:00Z'), 'America/Los_Angeles')).toBeCloseTo(12, 9);
    const at = Date.parse('2026-11-21T12:00:00Z');
    const t = new TrafficModel(
      { requestsPerDay: 1440, shape: SHAPES.flat, events: [{ fromMs: at, toMs: at + 60_000, factor: 0 }] },
      prng(1),
    );
    expect(t.requests(at)).toBe(0);
  });

  it('rejects unusable shapes', () => {
    expect(() => assertShape([1, 2, 3])).toThrow(TrafficShapeError);
    expect(() => assertShape(Array.from({ length: 24 }, () => 0))).toThrow(/at least one/);
  });

  it('samples Poisson counts with the right mean, small and large', () => {
    const random = prng(9);
    for (const mean of [0.3, 4, 250]) {
      let sum = 0;
      for (let i = 0; i < 20_000; i++) sum += poisson(mean, random);
      expect(sum / 20_000).toBeCloseTo(mean, mean < 1 ? 1 : 0);
    }
  });
});

describe('auctions', () => {
  it('second price: the winner pays the larger of the competing bid, the runner-up and the floor', () => {
    expect(runAuction('second-price', [{ key: 'a', bidMicros: 1000 }], 600)).toEqual({
      winner: 'a',
      priceMicros: 600,
    });
    expect(runAuction('second-price', [{ key: 'a', bidMicros: 1000 }], 600, 800)).toEqual({
      winner: 'a',
      priceMicros: 800,
    });
    expect(
      runAuction(
        'second-price',
        [
          { key: 'a', bidMicros: 1000 },
          { key: 'b', bidMicros: 900 },
        ],
        600,
      ),
    ).toEqual({ winner: 'a', priceMicros: 900 });
    expect(runAuction('second-price', [{ key: 'a', bidMicros: 600 }], 600)).toEqual({
      winner: undefined,
      priceMicros: 0,
    });
  });

  it('tells a losing bid lost to another of ours from one lost to the market', () => {
    const bids = [
      { key: 'a', bidMicros: 1000 },
      { key: 'b', bidMicros: 900 },
    ];
    const ours = runAuction('first-price', bids, 600);
    expect([outcomeOf(ours, 'a'), outcomeOf(ours, 'b')]).toEqual(['won', 'own']);
    const market = runAuction('first-price', bids, 1000);
    expect([outcomeOf(market, 'a'), outcomeOf(market, 'b')]).toEqual(['market', 'market']);
    const floor = runAuction('second-price', bids, 0, 1200);
    expect(outcomeOf(floor, 'a')).toBe('market');
  });

  it('first price: the winner pays its bid', () => {
    expect(runAuction('first-price', [{ key: 'a', bidMicros: 1000 }], 600)).toEqual({
      winner: 'a',
      priceMicros: 1000,
    });
  });
});

describe('notices', () => {
  it('are delayed up to the deadline, sometimes lost, sometimes doubled; losses only when the exchange sends them', () => {
    const random = prng(5);
    let wins = 0;
    let dup = 0;
    let losses = 0;
    for (let i = 0; i < 10_000; i++) {
      const w = plannedNotices(
        true,
        0,
        { winNoticeLoss: 0.1, duplicateRate: 0.05, maxDelayMs: 30_000 },
        random,
      );
      wins += w.length > 0 ? 1 : 0;
      dup += w.length === 2 ? 1 : 0;
      for (const n of w) expect(n.at).toBeLessThanOrEqual(60_000);
      losses += plannedNotices(false, 0, { lossNoticeRate: 0.3 }, random).length > 0 ? 1 : 0;
    }
    expect(wins / 10_000).toBeCloseTo(0.9, 1);
    expect(dup / wins).toBeCloseTo(0.05, 1);
    expect(losses / 10_000).toBeCloseTo(0.3, 1);
  });
});

describe('market', () => {
  it('is deterministic for a seed and sorted in time', () => {
    const opts = {
      traffic: { requestsPerDay: 100_000, shape: SHAPES.flat },
      auction: 'second-price' as const,
      seed: 42,
    };
    const at = Date.parse('2026-11-21T10:00:00Z');
    const a = new Market(opts).minute(at);
    expect(new Market(opts).minute(at)).toEqual(a);
    expect(a.length).toBeGreaterThan(30);
    for (let i = 1; i < a.length; i++) expect((a[i]?.at ?? 0) >= (a[i - 1]?.at ?? 0)).toBe(true);
    expect(a.every((r) => r.at >= at && r.at < at + 60_000)).toBe(true);
  });
});
