/**
 * The market phase of both simulation engines (`sim/runner.ts`, `sim/regions/engine.ts`): the
 * minute's requests (arrival, the market's best competing bid, segment), drawn from the minute's
 * own generator so that every strategy sees the same requests whichever day it starts on.
 */
import { prng, type Random } from '../../shared/random/prng.js';
import {
  gaussian,
  loadIpinyouHistogram,
  localHourOf,
  type PriceSampler,
  poisson,
  priceSampler,
  shapeAt,
  shapeMean,
} from '../market/index.js';
import type { Scenario } from '../scenario.js';

const MINUTE = 60_000;

/**
 * Requests per minute: the hourly shape (local hours of the scenario's zone) × a day level
 * (lognormal, one per UTC day) × minute noise (lognormal) × events, Poisson-sampled — each minute
 * from its own seeded generator, so a run starting on any day sees the same minutes.
 */
export function minuteRequests(
  scenario: Scenario,
  seed: number,
): (minuteMs: number, random: Random) => number {
  const t = scenario.traffic;
  const mean = shapeMean(t.shape);
  const levels = new Map<number, number>();
  return (minuteMs, random) => {
    const day = Math.floor(minuteMs / 86_400_000);
    let level = levels.get(day);
    if (level === undefined) {
      level = Math.exp(t.dayNoise * gaussian(prng(Math.floor(mix(day, seed ^ 0x64617973) * 4294967296))));
      levels.set(day, level);
    }
    let factor = 1;
    for (const e of t.events) if (minuteMs >= e.fromMs && minuteMs < e.toMs) factor *= e.factor;
    const hour = localHourOf(minuteMs + 30_000, scenario.timeZone);
    const noise = Math.exp(t.minuteNoise * gaussian(random));
    return poisson(
      (t.requestsPerDay / 1440) * (shapeAt(t.shape, hour) / mean) * level * noise * factor,
      random,
    );
  };
}

/** The (deterministic) 32-bit mix of a request number and a campaign's salt: eligibility draws. */
export function mix(a: number, b: number): number {
  let h = Math.imul(a ^ 0x9e3779b9, 0x85ebca6b) ^ b;
  h = Math.imul(h ^ (h >>> 16), 0xc2b2ae35);
  h ^= h >>> 13;
  h = Math.imul(h, 0x27d4eb2f);
  return ((h ^ (h >>> 16)) >>> 0) / 4294967296;
}

/**
 * The minute's requests in arrival order, as columns (no object per request): arrival instant,
 * the market's best competing bid, segment; request ids are `firstId` + position.
 */
export class MinuteQueue {
  at = new Float64Array(0);
  competing = new Float64Array(0);
  segment = new Uint32Array(0);
  length = 0;
  firstId = 0;
  /** Position of the next request to run. */
  next = 0;
  /** Requests drawn so far (the last id). */
  requests = 0;
  private readonly requestsOf: (minuteMs: number, random: Random) => number;
  private readonly prices: PriceSampler;
  /** Cumulative segment shares, in the scenario's order. */
  readonly segmentCdf: number[] = [];

  constructor(
    private readonly scenario: Scenario,
    private readonly seed: number,
  ) {
    this.requestsOf = minuteRequests(scenario, seed);
    this.prices = priceSampler(loadIpinyouHistogram(scenario.market.priceCampaign), {
      microsPerUnit: scenario.market.microsPerUnit,
    });
    let acc = 0;
    for (const share of scenario.segments.values()) {
      acc += share;
      this.segmentCdf.push(acc);
    }
  }

  /** Draws the requests of the minute starting at `now` (replacing the last minute's). */
  draw(now: number): void {
    const marketRandom = prng(Math.floor(mix(now / MINUTE, this.seed ^ 0x6d61726b) * 4294967296));
    const n = this.requestsOf(now, marketRandom);
    let shift = 1;
    for (const s of this.scenario.market.shifts) if (now >= s.fromMs && now < s.toMs) shift *= s.factor;
    const offset = new Float64Array(n);
    const competing = new Float64Array(n);
    const segment = new Uint32Array(n);
    // Sort key: offset in the minute × n + draw index (unique, exact below 2^53): arrival
    // order, ties in draw order (what a stable sort by arrival gives).
    const order = new Float64Array(n);
    const cdf = this.segmentCdf;
    for (let i = 0; i < n; i++) {
      const u = marketRandom();
      let seg = 0;
      while (seg < cdf.length - 1 && u >= (cdf[seg] as number)) seg++;
      const off = Math.floor(marketRandom() * MINUTE);
      offset[i] = off;
      competing[i] = Math.round(this.prices.sample(marketRandom) * shift);
      segment[i] = seg;
      order[i] = off * n + i;
    }
    order.sort();
    if (this.at.length < n) {
      this.at = new Float64Array(n);
      this.competing = new Float64Array(n);
      this.segment = new Uint32Array(n);
    }
    for (let k = 0; k < n; k++) {
      const key = order[k] as number;
      const i = key - Math.floor(key / n) * n;
      this.at[k] = now + (offset[i] as number);
      this.competing[k] = competing[i] as number;
      this.segment[k] = segment[i] as number;
    }
    this.length = n;
    this.firstId = this.requests + 1;
    this.requests += n;
    this.next = 0;
  }

  /** Whether a request of the minute arrives before `untilMs`. */
  hasBefore(untilMs: number): boolean {
    return this.next < this.length && (this.at[this.next] as number) < untilMs;
  }
}
