/**
 * Competing prices from real RTB data: the clearing-price histograms of 9 iPinYou campaigns
 * (sim/data/ipinyou/, see its README for the source and licence). Sampling is from the histogram
 * itself, not a fitted curve, so the floor-price spikes of real markets stay in (13.7 % of
 * campaign 1458's prices sit at exactly 70).
 */

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { errorKind } from '../../shared/errors.js';
import type { Random } from '../../shared/random/prng.js';

/** The campaigns with a histogram in sim/data/ipinyou/. */
export const IPINYOU_CAMPAIGNS = [
  '1458',
  '2259',
  '2261',
  '2821',
  '2997',
  '3358',
  '3386',
  '3427',
  '3476',
] as const;

/** A histogram: `counts[i]` won impressions paid at price bin `i` (CPM, CNY fen). */
export interface PriceHistogram {
  readonly campaign: string;
  readonly counts: readonly number[];
}

/** Thrown for a histogram that does not exist or cannot be read. */
export class PriceDataError extends errorKind('PriceDataError', 'sim.price-data') {}

/**
 * `sim/data/ipinyou`, found from this module upwards: the module is `sim/market/prices.ts` under
 * `tsx`, or inside a bundle elsewhere in the repository (the simulator's process, cli/common.ts).
 */
const DATA_DIR = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = join(dir, 'sim', 'data', 'ipinyou');
    if (existsSync(candidate)) return candidate;
    const up = dirname(dir);
    if (up === dir) return join(dirname(fileURLToPath(import.meta.url)), '..', 'data', 'ipinyou');
    dir = up;
  }
})();

/** Loads the histogram of one iPinYou campaign. */
export function loadIpinyouHistogram(campaign: string): PriceHistogram {
  if (!(IPINYOU_CAMPAIGNS as readonly string[]).includes(campaign)) {
    throw new PriceDataError(
      `No iPinYou histogram for campaign ${JSON.stringify(campaign)}: use one of ${IPINYOU_CAMPAIGNS.join(', ')}.`,
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(join(DATA_DIR, `${campaign}.json`), 'utf8'));
  } catch (error) {
    throw new PriceDataError(`Cannot read the iPinYou histogram ${campaign}: ${String(error)}`, {
      cause: error,
    });
  }
  const counts = (parsed as { priceCounts?: unknown }).priceCounts;
  if (!Array.isArray(counts) || counts.some((c) => typeof c !== 'number' || !(c >= 0))) {
    throw new PriceDataError(`iPinYou histogram ${campaign} has no valid priceCounts array.`);
  }
  return { campaign, counts: counts as number[] };
}

/** Samples prices from a histogram. */
export interface PriceSampler {
  /** A competing price in micros per impression. */
  sample(random: Random): number;
  /** The price at quantile q ∈ [0, 1] (micros per impression). */
  quantile(q: number): number;
  /** Mean price, micros per impression. */
  readonly meanMicros: number;
}

/**
 * A sampler over `histogram` with bin i worth `i × microsPerUnit` micros per impression, times
 * `scale` (market shifts). With the default 10 micros per fen-CPM, the iPinYou prices land at
 * $0–3 CPM (a bin of 70 fen CPM → 700 micros ≈ $0.70 CPM).
 */
export function priceSampler(
  histogram: PriceHistogram,
  options: { microsPerUnit?: number; scale?: number } = {},
): PriceSampler {
  const unit = (options.microsPerUnit ?? 10) * (options.scale ?? 1);
  const cdf: number[] = [];
  let total = 0;
  let weighted = 0;
  histogram.counts.forEach((c, i) => {
    total += c;
    weighted += c * i;
    cdf.push(total);
  });
  if (total <= 0) throw new PriceDataError(`iPinYou histogram ${histogram.campaign} is empty.`);
  const binOf = (target: number) => {
    let lo = 0;
    let hi = cdf.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((cdf[mid] as number) > target) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  };
  return {
    sample: (random) => Math.round(binOf(random() * total) * unit),
    quantile: (q) => Math.round(binOf(Math.min(total - 1e-9, Math.max(0, q) * total)) * unit),
    meanMicros: (weighted / total) * unit,
  };
}
