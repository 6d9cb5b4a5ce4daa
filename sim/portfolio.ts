/**
 * Generated portfolios (the scenario field `portfolio`, docs/pacing-quality.md): accounts and
 * campaigns drawn from the scenario's seed the way real portfolios look — daily budgets spread
 * like exp(Gamma(k, θ)) dollars (many small, a few huge), a full-speed demand per campaign drawn
 * as a multiple of its budget (lognormal: most can fill, some cannot), targeting reach derived
 * from that demand and the market (capped: the largest budgets are unfillable), accounts in
 * several time zones, valuations spread around a median, and optionally a share of campaigns
 * created on the first scored day at a local time (new campaigns beside ones with history).
 *
 * Pure and deterministic for (section, scenario fields, seed): the same seed gives the same
 * portfolio, another seed another one — the acceptance runs on several seeds, not one tuned.
 * The output is the JSON of `accounts`, validated by `parseScenario` like hand-written ones.
 */
import { dayWindowOf } from '../shared/budget/time-zone.js';
import { prng, type Random } from '../shared/random/prng.js';
import { gaussian, loadIpinyouHistogram, priceSampler } from './market/index.js';

/** The `portfolio` section of a scenario (all fields documented in docs/pacing-quality.md). */
export interface PortfolioSpec {
  readonly campaigns: number;
  readonly accounts: number;
  /** IANA zone → share of accounts. */
  readonly timeZones: Readonly<Record<string, number>>;
  /** Budget in dollars = exp(Gamma(shape, scale)), clamped to [min, max]. */
  readonly budget: {
    readonly shape: number;
    readonly scale: number;
    readonly min: number;
    readonly max: number;
  };
  /** Full-speed daily spend ÷ budget per campaign: lognormal(ln median, sigma). */
  readonly demand: { readonly median: number; readonly sigma: number };
  /** Largest share of a segment's requests a campaign reaches. */
  readonly reachMax: number;
  /** Each campaign targets this many of the scenario's segments (uniform in [min, max]); 0 = all. */
  readonly segments: { readonly min: number; readonly max: number };
  /** Bid valuation: per campaign a median CPM lognormal around `medianCpm` (σ `spread`), bids σ `sigma`. */
  readonly valuation: { readonly medianCpm: number; readonly sigma: number; readonly spread: number };
  /** A share of campaigns created on the first scored day at a local time (`HH:MM`, account's zone). */
  readonly created?: { readonly share: number; readonly localTime: string };
}

/** What the generator needs from the rest of the scenario. */
export interface PortfolioContext {
  readonly seed: number;
  readonly requestsPerDay: number;
  readonly segments: ReadonlyMap<string, number>;
  readonly auction: 'first-price' | 'second-price';
  readonly priceCampaign: string;
  readonly microsPerUnit: number;
  readonly floorMicros: number;
  /** The first scored local day (`YYYY-MM-DD`). */
  readonly firstScoredDay: string;
}

/** A Gamma(k, 1) deviate (Marsaglia–Tsang; k ≥ 1). */
export function gammaDeviate(k: number, random: Random): number {
  const d = k - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (;;) {
    let x: number;
    let v: number;
    do {
      x = gaussian(random);
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const u = random();
    if (u < 1 - 0.0331 * x ** 4) return d * v;
    if (Math.log(u) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v;
  }
}

/**
 * Expected spend per eligible request of a campaign bidding at full speed (multiplier 1) against
 * the market's best competing bid, micros: the win probability times the price paid, by Monte
 * Carlo over a fixed sample (deterministic). Our own campaigns competing with each other are left
 * out: demand multiples are nominal.
 */
export function spendPerRequest(ctx: PortfolioContext, medianBidMicros: number, sigma: number): number {
  const prices = priceSampler(loadIpinyouHistogram(ctx.priceCampaign), { microsPerUnit: ctx.microsPerUnit });
  const random = prng(0x5eed1);
  const n = 20_000;
  let total = 0;
  for (let i = 0; i < n; i++) {
    const competing = prices.sample(random);
    const bid = medianBidMicros * Math.exp(sigma * gaussian(random));
    const bar = Math.max(competing, ctx.floorMicros);
    if (bid > bar) total += ctx.auction === 'first-price' ? bid : bar;
  }
  return total / n;
}

const round2 = (x: number) => Math.round(x * 100) / 100;

/** The `accounts` JSON of a generated portfolio. */
export function generatePortfolio(spec: PortfolioSpec, ctx: PortfolioContext): Record<string, unknown>[] {
  const random = prng(Math.imul(ctx.seed ^ 0x706f7274, 0x9e3779b1) >>> 0);
  const zones = Object.entries(spec.timeZones);
  const zoneTotal = zones.reduce((a, [, w]) => a + w, 0);
  const pickZone = () => {
    let x = random() * zoneTotal;
    for (const [z, w] of zones) {
      x -= w;
      if (x < 0) return z;
    }
    return (zones[zones.length - 1] as [string, number])[0];
  };
  const accounts = Array.from({ length: spec.accounts }, (_, i) => ({
    id: `acct-${String(i + 1).padStart(3, '0')}`,
    timeZone: pickZone(),
    campaigns: [] as Record<string, unknown>[],
  }));
  const segmentNames = [...ctx.segments.keys()];
  const perRequest = new Map<number, number>();
  for (let i = 0; i < spec.campaigns; i++) {
    const account = accounts[
      i < accounts.length ? i : Math.floor(random() * accounts.length)
    ] as (typeof accounts)[number];
    const budget = Math.min(
      spec.budget.max,
      Math.max(spec.budget.min, Math.exp(spec.budget.scale * gammaDeviate(spec.budget.shape, random))),
    );
    const medianCpm = spec.valuation.medianCpm * Math.exp(spec.valuation.spread * gaussian(random));
    const demand = spec.demand.median * Math.exp(spec.demand.sigma * gaussian(random));
    // Targeted segments: a random subset (0 = every segment).
    const k =
      spec.segments.max === 0
        ? 0
        : spec.segments.min + Math.floor(random() * (spec.segments.max - spec.segments.min + 1));
    const chosen: string[] = [];
    const pool = [...segmentNames];
    for (let j = 0; j < Math.min(k, pool.length); j++) {
      const at = Math.floor(random() * pool.length);
      chosen.push(pool.splice(at, 1)[0] as string);
    }
    const share = chosen.length === 0 ? 1 : chosen.reduce((a, s) => a + (ctx.segments.get(s) ?? 0), 0);
    // The reach that gives the drawn demand, capped: budgets too large for the market stay unfillable.
    const bucket = Math.round(medianCpm * 4);
    let spr = perRequest.get(bucket);
    if (spr === undefined) {
      spr = spendPerRequest(ctx, (bucket / 4) * 1000, spec.valuation.sigma);
      perRequest.set(bucket, spr);
    }
    const wanted = (demand * budget * 1_000_000) / Math.max(1, ctx.requestsPerDay * share * spr);
    const reach = Math.min(spec.reachMax, Math.max(0.0001, wanted));
    const campaign: Record<string, unknown> = {
      id: `c-${String(i + 1).padStart(3, '0')}`,
      dailyBudget: round2(budget),
      targeting: { segments: chosen, reach: Math.round(reach * 1e6) / 1e6 },
      valuation: { medianCpm: round2(bucket / 4), sigma: spec.valuation.sigma },
    };
    if (spec.created && random() < spec.created.share) {
      const [hh, mm] = spec.created.localTime.split(':').map(Number) as [number, number];
      const start = dayWindowOf(ctx.firstScoredDay, account.timeZone).startMs;
      // The local wall-clock time on that day (a DST change before it would shift it by an hour;
      // the scenarios' creation days have none).
      campaign.createdAt = new Date(start + (hh * 60 + mm) * 60_000).toISOString();
    }
    account.campaigns.push(campaign);
  }
  return accounts.filter((a) => a.campaigns.length > 0);
}
