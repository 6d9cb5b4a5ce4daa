/**
 * The market simulator's scenario format (JSON; documented in docs/pacing-quality.md) and its
 * validation. Every error names the bad field by its JSON path and says what to do, so a scenario
 * author fixes a file without reading this code.
 *
 * Money is in US dollars in the file (`dailyBudget`, CPMs) and micros inside; instants are ISO 8601
 * strings with an offset (`2026-03-10T12:00:00-04:00`), never local wall-clock times, so a scenario
 * crossing a DST change is unambiguous.
 */
import { canonicalTimeZone, dayWindowOf, parseDay } from '../shared/budget/time-zone.js';
import type { PacingMode } from '../shared/pacing/modes.js';
import { type AuctionKind, IPINYOU_CAMPAIGNS, type NoticeOptions, SHAPES } from './market/index.js';
import { generatePortfolio, type PortfolioSpec } from './portfolio.js';
import { parseRegions, type ScenarioRegion } from './regions/scenario.js';
import { isObject, type Json, MAX_BUDGET_USD, Reader, ScenarioError } from './scenario-reader.js';

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

function ranges(r: Reader, k: string, window: TimeRange, factorMax: number): RangeFactor[] {
  return r.array(k).map((v, i) => {
    const e = r.item(k, i, v);
    e.only(['from', 'to', 'factor']);
    const fromMs = e.instant('from');
    const toMs = e.instant('to');
    if (toMs <= fromMs) throw new ScenarioError(e.at('to'), 'must be after `from`.');
    if (toMs <= window.fromMs || fromMs >= window.toMs)
      throw new ScenarioError(e.path, 'lies outside the scenario’s days: move it inside them or remove it.');
    return { fromMs, toMs, factor: e.number('factor', { min: 0, max: factorMax }) };
  });
}

function nextDay(day: string): string {
  const { y, m, d } = parseDay(day);
  const t = new Date(Date.UTC(y, m - 1, d + 1));
  return t.toISOString().slice(0, 10);
}

/** Options of {@link parseScenario}. */
export interface ParseOptions {
  /** Overrides the scenario's `seed` (market, bidding and a generated portfolio). */
  readonly seed?: number;
}

function portfolioSpec(r: Reader): PortfolioSpec {
  const p = r.child('portfolio');
  p.only([
    'campaigns',
    'accounts',
    'timeZones',
    'budget',
    'demand',
    'reachMax',
    'segments',
    'valuation',
    'created',
  ]);
  const zonesRaw = p.raw('timeZones');
  if (!isObject(zonesRaw) || Object.keys(zonesRaw).length === 0)
    throw new ScenarioError(p.at('timeZones'), 'must be an object of IANA zone → share of accounts.');
  const zr = new Reader(zonesRaw, p.at('timeZones'));
  const timeZones: Record<string, number> = {};
  for (const z of Object.keys(zonesRaw)) {
    let zone: string;
    try {
      zone = canonicalTimeZone(z);
    } catch {
      throw new ScenarioError(
        zr.at(z),
        `${JSON.stringify(z)} is not an IANA time zone (e.g. "America/New_York").`,
      );
    }
    timeZones[zone] = zr.number(z, { min: 0 });
  }
  const b = p.child('budget');
  b.only(['shape', 'scale', 'min', 'max']);
  const d = p.child('demand');
  d.only(['median', 'sigma']);
  const sg = p.child('segments');
  sg.only(['min', 'max']);
  const v = p.child('valuation');
  v.only(['medianCpm', 'sigma', 'spread']);
  const spec: PortfolioSpec = {
    campaigns: p.number('campaigns', { min: 1, max: 10_000, integer: true }),
    accounts: p.number('accounts', { min: 1, max: 10_000, integer: true }),
    timeZones,
    budget: {
      shape: b.number('shape', { min: 1, max: 100 }),
      scale: b.number('scale', { min: 0.01, max: 10, fallback: 1 }),
      min: b.number('min', { min: 0.000001, max: MAX_BUDGET_USD, fallback: 1 }),
      max: b.number('max', { min: 0.000001, max: MAX_BUDGET_USD, fallback: MAX_BUDGET_USD }),
    },
    demand: {
      median: d.number('median', { min: 0.01, max: 1000 }),
      sigma: d.number('sigma', { min: 0, max: 3 }),
    },
    reachMax: p.number('reachMax', { min: 0.0001, max: 1, fallback: 1 }),
    segments: {
      min: sg.number('min', { min: 0, max: 100, integer: true, fallback: 0 }),
      max: sg.number('max', { min: 0, max: 100, integer: true, fallback: 0 }),
    },
    valuation: {
      medianCpm: v.number('medianCpm', { min: 0.001, max: 1000, fallback: 1.5 }),
      sigma: v.number('sigma', { min: 0, max: 2, fallback: 0.3 }),
      spread: v.number('spread', { min: 0, max: 2, fallback: 0 }),
    },
  };
  if (spec.budget.min > spec.budget.max) throw new ScenarioError(b.at('min'), 'must not exceed `max`.');
  if (spec.segments.min > spec.segments.max) throw new ScenarioError(sg.at('min'), 'must not exceed `max`.');
  if (p.has('created')) {
    const c = p.child('created');
    c.only(['share', 'localTime']);
    const localTime = c.string('localTime');
    if (!/^([01]\d|2[0-3]):[0-5]\d$/.test(localTime))
      throw new ScenarioError(
        c.at('localTime'),
        `must be a local time HH:MM (got ${JSON.stringify(localTime)}).`,
      );
    return { ...spec, created: { share: c.share('share'), localTime } };
  }
  return spec;
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

  const t = r.child('traffic');
  t.only(['requestsPerDay', 'shape', 'minuteNoise', 'dayNoise', 'events']);
  const requestsPerDay = t.number('requestsPerDay', { min: 0, max: 1e9 });
  let shape: readonly number[];
  const rawShape = t.raw('shape') ?? 'noonPeak';
  if (typeof rawShape === 'string') {
    const named = (SHAPES as Record<string, readonly number[]>)[rawShape];
    if (!named)
      throw new ScenarioError(
        t.at('shape'),
        `unknown shape ${JSON.stringify(rawShape)}: use ${Object.keys(SHAPES).join(', ')} or 24 numbers.`,
      );
    shape = named;
  } else if (
    Array.isArray(rawShape) &&
    rawShape.length === 24 &&
    rawShape.every((v) => typeof v === 'number' && Number.isFinite(v) && v >= 0) &&
    rawShape.some((v) => (v as number) > 0)
  ) {
    shape = rawShape as number[];
  } else {
    throw new ScenarioError(
      t.at('shape'),
      'must be a named shape or 24 numbers ≥ 0 (local hours 0–23), one > 0.',
    );
  }
  const traffic = {
    requestsPerDay,
    shape,
    minuteNoise: t.number('minuteNoise', { min: 0, max: 2, fallback: 0.1 }),
    dayNoise: t.number('dayNoise', { min: 0, max: 2, fallback: 0.05 }),
    events: ranges(t, 'events', window, 100),
  };

  const segments = new Map<string, number>();
  const rawSeg = r.raw('segments') ?? { all: 1 };
  if (!isObject(rawSeg))
    throw new ScenarioError('segments', 'must be an object of segment name → share of traffic.');
  const segReader = new Reader(rawSeg, 'segments');
  for (const k of Object.keys(rawSeg)) segments.set(k, segReader.share(k));
  const segTotal = [...segments.values()].reduce((a, b) => a + b, 0);
  if (segments.size === 0 || Math.abs(segTotal - 1) > 1e-6)
    throw new ScenarioError('segments', `shares must sum to 1 (got ${segTotal}).`);

  const m = r.child('market');
  m.only(['auction', 'priceCampaign', 'priceScale', 'floorCpm', 'shifts']);
  const auction = m.string('auction', 'second-price');
  if (auction !== 'second-price' && auction !== 'first-price')
    throw new ScenarioError(
      m.at('auction'),
      `must be "second-price" or "first-price" (got ${JSON.stringify(auction)}).`,
    );
  const priceCampaign = m.string('priceCampaign', '1458');
  if (!(IPINYOU_CAMPAIGNS as readonly string[]).includes(priceCampaign))
    throw new ScenarioError(
      m.at('priceCampaign'),
      `no iPinYou histogram ${priceCampaign}: use one of ${IPINYOU_CAMPAIGNS.join(', ')}.`,
    );
  const market = {
    auction: auction as AuctionKind,
    priceCampaign,
    microsPerUnit: 10 * m.number('priceScale', { min: 0.01, max: 1000, fallback: 1 }),
    floorMicros: Math.round(m.number('floorCpm', { min: 0, max: 1000, fallback: 0 }) * 1000),
    shifts: ranges(m, 'shifts', window, 100),
  };

  const n = r.child('notices');
  n.only(['meanDelayMs', 'maxDelayMs', 'winNoticeLoss', 'duplicateRate', 'lossNoticeRate']);
  const notices: Required<NoticeOptions> = {
    meanDelayMs: n.number('meanDelayMs', { min: 0, max: 600_000, fallback: 2_000 }),
    maxDelayMs: n.number('maxDelayMs', { min: 0, max: 3_600_000, fallback: 60_000 }),
    winNoticeLoss: n.share('winNoticeLoss', 0),
    duplicateRate: n.share('duplicateRate', 0.01),
    lossNoticeRate: n.share('lossNoticeRate', 1),
  };

  const accounts: ScenarioAccount[] = [];
  const campaigns: ScenarioCampaign[] = [];
  const campaignIds = new Set<string>();
  const rawAccounts = [...r.array('accounts', !r.has('portfolio'))];
  if (r.has('portfolio')) {
    // A generated portfolio: its accounts follow the hand-written ones and are validated alike.
    rawAccounts.push(
      ...generatePortfolio(portfolioSpec(r), {
        seed,
        requestsPerDay,
        segments,
        auction: market.auction,
        priceCampaign: market.priceCampaign,
        microsPerUnit: market.microsPerUnit,
        floorMicros: market.floorMicros,
        firstScoredDay: days[history] as string,
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
      timeZone: a.timeZone('timeZone', timeZone),
      budgetMicros: a.has('dailyBudget') ? a.budget('dailyBudget') : undefined,
      pacingMode: a.mode('pacingMode', 'even'),
    };
    accounts.push(account);
    const rawCampaigns = a.array('campaigns', true);
    if (rawCampaigns.length === 0) throw new ScenarioError(a.at('campaigns'), 'needs at least one campaign.');
    rawCampaigns.forEach((cv, j) => {
      const c = a.item('campaigns', j, cv);
      c.only(['id', 'dailyBudget', 'pacingMode', 'createdAt', 'arms', 'targeting', 'valuation', 'ctr']);
      const cid = c.id('id');
      if (campaignIds.has(cid)) throw new ScenarioError(c.at('id'), `duplicate campaign id ${cid}.`);
      campaignIds.add(cid);
      const tg = c.child('targeting');
      tg.only(['segments', 'reach']);
      const segs = tg.array('segments').map((s, k) => {
        if (typeof s !== 'string' || !segments.has(s))
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
      if (createdAtMs !== undefined && (createdAtMs < startMs || createdAtMs >= endMs))
        throw new ScenarioError(
          c.at('createdAt'),
          'must lie inside the scenario’s days (omit it for a campaign that exists from the start).',
        );
      campaigns.push({
        id: cid,
        accountId: id,
        budgetMicros: c.budget('dailyBudget'),
        pacingMode: c.mode('pacingMode', 'even'),
        createdAtMs,
        arms,
        segments: segs,
        reach: tg.share('reach', 1),
        medianBidMicros: Math.round(val.number('medianCpm', { min: 0.001, max: 1000, fallback: 1.5 }) * 1000),
        bidSigma: val.number('sigma', { min: 0, max: 2, fallback: 0.3 }),
        ctr: c.share('ctr', 0.002),
      });
    });
  });

  const budgetChanges: BudgetChange[] = r.array('budgetChanges').map((v, i) => {
    const b = r.item('budgetChanges', i, v);
    b.only(['at', 'account', 'campaign', 'arm', 'dailyBudget']);
    const atMs = b.instant('at');
    if (atMs < startMs || atMs >= endMs)
      throw new ScenarioError(b.at('at'), 'must lie inside the scenario’s days.');
    const budgetMicros = b.budget('dailyBudget');
    if (b.has('campaign')) {
      const cid = b.string('campaign');
      const c = campaigns.find((x) => x.id === cid);
      if (!c) throw new ScenarioError(b.at('campaign'), `no campaign ${JSON.stringify(cid)} in "accounts".`);
      const armId = b.has('arm') ? b.string('arm') : undefined;
      if (armId !== undefined && !c.arms.some((x) => x.id === armId))
        throw new ScenarioError(b.at('arm'), `campaign ${cid} has no arm ${JSON.stringify(armId)}.`);
      return { atMs, accountId: c.accountId, campaignId: cid, armId, budgetMicros };
    }
    if (!b.has('account'))
      throw new ScenarioError(b.path, 'name the plan: "campaign" (and optionally "arm") or "account".');
    const aid = b.string('account');
    const a = accounts.find((x) => x.id === aid);
    if (!a) throw new ScenarioError(b.at('account'), `no account ${JSON.stringify(aid)}.`);
    if (a.budgetMicros === undefined)
      throw new ScenarioError(
        b.at('account'),
        `account ${aid} has no account plan: give it a "dailyBudget" first.`,
      );
    return { atMs, accountId: aid, campaignId: undefined, armId: undefined, budgetMicros };
  });
  budgetChanges.sort((x, y) => x.atMs - y.atMs);

  const faults: Fault[] = r.array('faults').map((v, i) => {
    const f = r.item('faults', i, v);
    const kind = f.string('kind');
    if (kind === 'notices-stalled') {
      f.only(['kind', 'from', 'to']);
      const atMs = f.instant('from');
      const untilMs = f.instant('to');
      if (untilMs <= atMs) throw new ScenarioError(f.at('to'), 'must be after `from`.');
      if (atMs < startMs || untilMs > endMs)
        throw new ScenarioError(f.path, 'must lie inside the scenario’s days.');
      return { kind, atMs, untilMs };
    }
    if (kind !== 'leader-killed' && kind !== 'redis-restarted' && kind !== 'region-flipped')
      throw new ScenarioError(
        f.at('kind'),
        `unknown fault ${JSON.stringify(kind)}: use leader-killed, redis-restarted, notices-stalled or region-flipped.`,
      );
    f.only(['kind', 'at']);
    const atMs = f.instant('at');
    if (atMs < startMs || atMs >= endMs)
      throw new ScenarioError(f.at('at'), 'must lie inside the scenario’s days.');
    return { kind, atMs };
  });
  faults.sort((x, y) => x.atMs - y.atMs);
  const regions = parseRegions(r, window);
  if (regions && faults.length > 0)
    throw new ScenarioError(
      'faults',
      'the single-region faults are not simulated with several regions: give region faults in regions[].faults.',
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
