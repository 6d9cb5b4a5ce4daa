/**
 * The market simulator's scenario format (JSON; documented in docs/pacing-quality.md) and its
 * validation. Every error names the bad field by its JSON path and says what to do, so a scenario
 * author fixes a file without reading this code.
 *
 * Money is in US dollars in the file (`dailyBudget`, CPMs) and micros inside; instants are ISO 8601
 * strings with an offset (`2026-03-10T12:00:00-04:00`), never local wall-clock times, so a scenario
 * crossing a DST change is unambiguous.
 */
import type { Daypart } from '../shared/budget/daypart.js';
import type { Flight } from '../shared/budget/flight.js';
import { addDays, dayWindowOf, parseDay } from '../shared/budget/time-zone.js';
import { findPacingMode, type PacingMode } from '../shared/pacing/modes.js';
import type { AuctionKind, NoticeOptions } from './market/index.js';
import { generatePortfolio } from './portfolio.js';
import { parseRegions, type ScenarioRegion } from './regions/scenario.js';
import { parseCurve, parseDaypart, parseFlight, refuseUnmetMode } from './scenario-plans.js';
import { type Json, Reader, ScenarioError } from './scenario-reader.js';
import {
  parseBudgetChanges,
  parseFaults,
  parseMarket,
  parseNotices,
  parseSegments,
  parseTraffic,
  portfolioSpec,
} from './scenario-sections.js';

export { ScenarioError } from './scenario-reader.js';

/** A time range [from, to) in epoch ms. */
export interface TimeRange {
  readonly fromMs: number;
  readonly toMs: number;
}

/** A multiplier over a time range (traffic spikes and outages, market shifts). */
export interface RangeFactor extends TimeRange {
  readonly factor: number;
}

/** An experiment arm of a campaign. */
export interface ScenarioArm {
  readonly id: string;
  /** Share of the campaign's eligible requests served by this arm (the arms' shares sum to 1). */
  readonly share: number;
  readonly budgetMicros: number;
  readonly pacingMode: PacingMode;
}

/** A campaign of a scenario. */
export interface ScenarioCampaign {
  readonly id: string;
  readonly accountId: string;
  readonly budgetMicros: number;
  readonly pacingMode: PacingMode;
  /** Dayparting of its campaign plan (undefined: it may bid all day). */
  readonly daypart?: Daypart;
  /** Its campaign plan's own curve (`pacingMode: "curve"`). */
  readonly curve?: readonly number[];
  /** When it appears in the budgets (undefined: before the scenario starts). */
  readonly createdAtMs: number | undefined;
  readonly arms: readonly ScenarioArm[];
  /** Segments of requests it targets ([] = every segment). */
  readonly segments: readonly string[];
  /** Share of the targeted requests it is eligible for (frequency caps, audiences, geo). */
  readonly reach: number;
  /** Median valuation (bid) per impression, micros; bids are lognormal around it. */
  readonly medianBidMicros: number;
  readonly bidSigma: number;
  /** Click-through rate of its impressions (cost per click). */
  readonly ctr: number;
  /**
   * A flight (docs/spend.md, "Flights"): `budgetMicros` is then the daily cap. Undefined: the same
   * daily budget every day.
   */
  readonly flight: Flight | undefined;
}

/** An account and its optional account-level plan. */
export interface ScenarioAccount {
  readonly id: string;
  readonly timeZone: string;
  readonly budgetMicros: number | undefined;
  readonly pacingMode: PacingMode;
}

/** A budget change at an instant (campaign, arm or account plan). */
export interface BudgetChange {
  readonly atMs: number;
  readonly accountId: string;
  readonly campaignId: string | undefined;
  readonly armId: string | undefined;
  readonly budgetMicros: number;
}

/** A fault injected at an instant. */
export type Fault =
  | { readonly kind: 'leader-killed'; readonly atMs: number }
  | { readonly kind: 'redis-restarted'; readonly atMs: number }
  | { readonly kind: 'region-flipped'; readonly atMs: number }
  | { readonly kind: 'notices-stalled'; readonly atMs: number; readonly untilMs: number };

/** A validated scenario (what the runner takes). */
export interface Scenario {
  readonly name: string;
  readonly description: string;
  /** Zone of the scenario's days (traffic shape hours, `start`, the scored days). */
  readonly timeZone: string;
  /** Local days of `timeZone`: the history (warm-up, not scored) days first, then the scored ones. */
  readonly historyDays: readonly string[];
  readonly scoredDays: readonly string[];
  /** First instant simulated: the earliest local midnight of the first day over the zones used. */
  readonly startMs: number;
  /** The same for the first scored day (baselines, which learn nothing, start here). */
  readonly scoredStartMs: number;
  readonly endMs: number;
  readonly seed: number;
  readonly traffic: {
    readonly requestsPerDay: number;
    readonly shape: readonly number[];
    readonly minuteNoise: number;
    readonly dayNoise: number;
    readonly events: readonly RangeFactor[];
  };
  /** Request segments and their shares of traffic (sum 1). */
  readonly segments: ReadonlyMap<string, number>;
  readonly market: {
    readonly auction: AuctionKind;
    readonly priceCampaign: string;
    /** Micros per impression per histogram unit (fen CPM): 10 × priceScale. */
    readonly microsPerUnit: number;
    readonly floorMicros: number;
    readonly shifts: readonly RangeFactor[];
  };
  readonly notices: Required<NoticeOptions>;
  readonly accounts: readonly ScenarioAccount[];
  readonly campaigns: readonly ScenarioCampaign[];
  readonly budgetChanges: readonly BudgetChange[];
  readonly faults: readonly Fault[];
  /** Ad-server processes (each its own BudgetGuard and PacingReader). */
  readonly guards: number;
  /** How long the pacer publishes nothing after its leader is killed (lease expiry). */
  readonly leaseTtlMs: number;
  /**
   * Several regions (`sim/regions/`): each its own cache, pacer and ad servers, one budget per
   * plan-day across them under strict allocations. Undefined: one region (`sim/runner.ts`).
   */
  readonly regions?: readonly ScenarioRegion[];
}

function nextDay(day: string): string {
  return addDays(day, 1);
}

/** Options of {@link parseScenario}. */
export interface ParseOptions {
  /** Overrides the scenario's `seed` (market, bidding and a generated portfolio). */
  readonly seed?: number;
}

/** What the accounts' section needs of the sections before it. */
interface AccountsContext {
  /** The scenario's zone (an account's default). */
  readonly timeZone: string;
  readonly window: TimeRange;
  readonly seed: number;
  readonly requestsPerDay: number;
  readonly segments: ReadonlyMap<string, number>;
  readonly market: Scenario['market'];
  readonly firstScoredDay: string;
}

/** `accounts` (hand-written, then a generated `portfolio`'s) and their campaigns. */
function parseAccounts(
  r: Reader,
  ctx: AccountsContext,
): { accounts: ScenarioAccount[]; campaigns: ScenarioCampaign[] } {
  const accounts: ScenarioAccount[] = [];
  const campaigns: ScenarioCampaign[] = [];
  const campaignIds = new Set<string>();
  const rawAccounts = [...r.array('accounts', !r.has('portfolio'))];
  if (r.has('portfolio')) {
    // A generated portfolio: its accounts follow the hand-written ones and are validated alike.
    rawAccounts.push(
      ...generatePortfolio(portfolioSpec(r), {
        seed: ctx.seed,
        requestsPerDay: ctx.requestsPerDay,
        segments: ctx.segments,
        auction: ctx.market.auction,
        priceCampaign: ctx.market.priceCampaign,
        microsPerUnit: ctx.market.microsPerUnit,
        floorMicros: ctx.market.floorMicros,
        firstScoredDay: ctx.firstScoredDay,
      }),
    );
  }
  if (rawAccounts.length === 0)
    throw new ScenarioError('accounts', 'needs at least one account with a campaign.');
  rawAccounts.forEach((v, i) => {
    const a = r.item('accounts', i, v);
    a.only(['id', 'timeZone', 'dailyBudget', 'pacingMode', 'campaigns']);
    const id = a.id('id');
    if (accounts.some((x) => x.id === id)) throw new ScenarioError(a.at('id'), `duplicate account id ${id}.`);
    const account: ScenarioAccount = {
      id,
      timeZone: a.timeZone('timeZone', ctx.timeZone),
      budgetMicros: a.has('dailyBudget') ? a.budget('dailyBudget') : undefined,
      pacingMode: a.mode('pacingMode', 'even'),
    };
    refuseUnmetMode(a.at('pacingMode'), account.pacingMode);
    accounts.push(account);
    const rawCampaigns = a.array('campaigns', true);
    if (rawCampaigns.length === 0) throw new ScenarioError(a.at('campaigns'), 'needs at least one campaign.');
    rawCampaigns.forEach((cv, j) => {
      campaigns.push(parseCampaign(a.item('campaigns', j, cv), id, campaignIds, ctx));
    });
  });
  return { accounts, campaigns };
}

/** One campaign of account `accountId` (its id added to `campaignIds`, which must not hold it). */
function parseCampaign(
  c: Reader,
  accountId: string,
  campaignIds: Set<string>,
  ctx: AccountsContext,
): ScenarioCampaign {
  c.only([
    'id',
    'dailyBudget',
    'pacingMode',
    'createdAt',
    'arms',
    'targeting',
    'valuation',
    'ctr',
    'flight',
    'daypart',
    'curve',
  ]);
  const cid = c.id('id');
  if (campaignIds.has(cid)) throw new ScenarioError(c.at('id'), `duplicate campaign id ${cid}.`);
  campaignIds.add(cid);
  const tg = c.child('targeting');
  tg.only(['segments', 'reach']);
  const segs = tg.array('segments').map((s, k) => {
    if (typeof s !== 'string' || !ctx.segments.has(s))
      throw new ScenarioError(
        `${tg.at('segments')}[${k}]`,
        `unknown segment ${JSON.stringify(s)}: declare it in "segments".`,
      );
    return s;
  });
  const val = c.child('valuation');
  val.only(['medianCpm', 'sigma']);
  const arms: ScenarioArm[] = c.array('arms').map((av, k) => {
    const ar = c.item('arms', k, av);
    ar.only(['id', 'share', 'dailyBudget', 'pacingMode']);
    return {
      id: ar.id('id'),
      share: ar.share('share'),
      budgetMicros: ar.budget('dailyBudget'),
      pacingMode: ar.mode('pacingMode', c.mode('pacingMode', 'even')),
    };
  });
  if (arms.length > 0) {
    const total = arms.reduce((x, y) => x + y.share, 0);
    if (Math.abs(total - 1) > 1e-6)
      throw new ScenarioError(c.at('arms'), `arm shares must sum to 1 (got ${total}).`);
    if (new Set(arms.map((x) => x.id)).size !== arms.length)
      throw new ScenarioError(c.at('arms'), 'arm ids must be unique within the campaign.');
  }
  const createdAtMs = c.has('createdAt') ? c.instant('createdAt') : undefined;
  if (createdAtMs !== undefined && (createdAtMs < ctx.window.fromMs || createdAtMs >= ctx.window.toMs))
    throw new ScenarioError(
      c.at('createdAt'),
      'must lie inside the scenario’s days (omit it for a campaign that exists from the start).',
    );
  const budgetMicros = c.budget('dailyBudget');
  const pacingMode = c.mode('pacingMode', 'even');
  if (!c.has('flight') && !findPacingMode(pacingMode)?.planCurve)
    refuseUnmetMode(c.at('pacingMode'), pacingMode);
  if (!c.has('curve') && findPacingMode(pacingMode)?.planCurve)
    refuseUnmetMode(c.at('pacingMode'), pacingMode);
  arms.forEach((arm, k) => {
    refuseUnmetMode(`${c.at('arms')}[${k}].pacingMode`, arm.pacingMode);
  });
  return {
    id: cid,
    accountId,
    budgetMicros,
    flight: c.has('flight') ? parseFlight(c, budgetMicros) : undefined,
    pacingMode,
    ...(c.has('daypart') ? { daypart: parseDaypart(c) } : {}),
    ...(c.has('curve') ? { curve: parseCurve(c, pacingMode) } : {}),
    createdAtMs,
    arms,
    segments: segs,
    reach: tg.share('reach', 1),
    medianBidMicros: Math.round(val.number('medianCpm', { min: 0.001, max: 1000, fallback: 1.5 }) * 1000),
    bidSigma: val.number('sigma', { min: 0, max: 2, fallback: 0.3 }),
    ctr: c.share('ctr', 0.002),
  };
}

/** Validates a parsed scenario file. Throws {@link ScenarioError} naming the first bad field. */
export function parseScenario(input: unknown, options: ParseOptions = {}): Scenario {
  const r = new Reader(input as Json, '');
  r.only([
    '$schema',
    'name',
    'description',
    'timeZone',
    'start',
    'historyDays',
    'days',
    'seed',
    'traffic',
    'segments',
    'market',
    'notices',
    'accounts',
    'budgetChanges',
    'faults',
    'guards',
    'leaseTtlSeconds',
    'regions',
    'portfolio',
  ]);
  const name = r.id('name');
  const description = r.has('description') ? r.string('description') : '';
  const timeZone = r.timeZone('timeZone');
  const start = r.string('start');
  try {
    parseDay(start);
  } catch {
    throw new ScenarioError('start', `must be a local date YYYY-MM-DD (got ${JSON.stringify(start)}).`);
  }
  const history = r.number('historyDays', { min: 0, max: 7, integer: true, fallback: 1 });
  const scored = r.number('days', { min: 1, max: 7, integer: true, fallback: 1 });
  const days: string[] = [start];
  while (days.length < history + scored) days.push(nextDay(days[days.length - 1] as string));
  const startMs = dayWindowOf(start, timeZone).startMs;
  const endMs = dayWindowOf(days[days.length - 1] as string, timeZone).endMs;
  const window = { fromMs: startMs, toMs: endMs };
  const seed = options.seed ?? r.number('seed', { min: 0, max: 2 ** 31 - 1, integer: true, fallback: 1 });

  const traffic = parseTraffic(r, window);
  const segments = parseSegments(r);
  const market = parseMarket(r, window);
  const notices = parseNotices(r);
  const { accounts, campaigns } = parseAccounts(r, {
    timeZone,
    window,
    seed,
    requestsPerDay: traffic.requestsPerDay,
    segments,
    market,
    firstScoredDay: days[history] as string,
  });
  const budgetChanges = parseBudgetChanges(r, accounts, campaigns, window);
  const faults = parseFaults(r, window);
  const regions = parseRegions(r, window);
  if (regions && faults.length > 0)
    throw new ScenarioError(
      'faults',
      'the single-region faults are not simulated with several regions: give region faults in regions[].faults.',
    );
  if (regions && campaigns.some((c) => c.daypart))
    throw new ScenarioError(
      'regions',
      'dayparts are scored in one region (the several-region engine does not count spend outside windows): drop regions or the dayparts.',
    );
  if (regions && campaigns.some((c) => c.flight))
    throw new ScenarioError(
      'regions',
      'flights are simulated in one region (the several-region engine does not close flight days): drop regions or the flights.',
    );

  // Every zone's days are simulated whole: from the earliest first local midnight to the latest
  // last one (an account in Tokyo starts its day hours before one in New York).
  let runStart = startMs;
  let runEnd = endMs;
  const firstScored = days[history] as string;
  let scoredStartMs = dayWindowOf(firstScored, timeZone).startMs;
  for (const a of accounts) {
    runStart = Math.min(runStart, dayWindowOf(start, a.timeZone).startMs);
    scoredStartMs = Math.min(scoredStartMs, dayWindowOf(firstScored, a.timeZone).startMs);
    runEnd = Math.max(runEnd, dayWindowOf(days[days.length - 1] as string, a.timeZone).endMs);
  }
  return {
    name,
    description,
    timeZone,
    historyDays: days.slice(0, history),
    scoredDays: days.slice(history),
    startMs: runStart,
    scoredStartMs,
    endMs: runEnd,
    seed,
    traffic,
    segments,
    market,
    notices,
    accounts,
    campaigns,
    budgetChanges,
    faults,
    guards: r.number('guards', { min: 1, max: 16, integer: true, fallback: 2 }),
    leaseTtlMs: r.number('leaseTtlSeconds', { min: 0, max: 600, fallback: 30 }) * 1000,
    ...(regions ? { regions } : {}),
  };
}
