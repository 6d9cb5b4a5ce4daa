/**
 * Sections of the scenario format (sim/scenario.ts) validated on their own: traffic, segments,
 * market, notices, budget changes, faults and a generated portfolio's spec. Each throws a
 * {@link ScenarioError} naming the bad field by its JSON path.
 */

import { canonicalTimeZone } from '../shared/budget/time-zone.js';
import { type AuctionKind, IPINYOU_CAMPAIGNS, type NoticeOptions, SHAPES } from './market/index.js';
import type { PortfolioSpec } from './portfolio.js';
import type {
  BudgetChange,
  Fault,
  RangeFactor,
  Scenario,
  ScenarioAccount,
  ScenarioCampaign,
  TimeRange,
} from './scenario.js';
import { isObject, MAX_BUDGET_USD, Reader, ScenarioError } from './scenario-reader.js';

/** Time ranges with a factor (`events`, `shifts`), each inside `window`. */
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

/** `traffic`: requests per day, hourly shape, noise and events. */
export function parseTraffic(r: Reader, window: TimeRange): Scenario['traffic'] {
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
  return {
    requestsPerDay,
    shape,
    minuteNoise: t.number('minuteNoise', { min: 0, max: 2, fallback: 0.1 }),
    dayNoise: t.number('dayNoise', { min: 0, max: 2, fallback: 0.05 }),
    events: ranges(t, 'events', window, 100),
  };
}

/** `segments`: name → share of traffic (default: one segment `all`). */
export function parseSegments(r: Reader): Map<string, number> {
  const segments = new Map<string, number>();
  const rawSeg = r.raw('segments') ?? { all: 1 };
  if (!isObject(rawSeg))
    throw new ScenarioError('segments', 'must be an object of segment name → share of traffic.');
  const segReader = new Reader(rawSeg, 'segments');
  for (const k of Object.keys(rawSeg)) segments.set(k, segReader.share(k));
  const segTotal = [...segments.values()].reduce((a, b) => a + b, 0);
  if (segments.size === 0 || Math.abs(segTotal - 1) > 1e-6)
    throw new ScenarioError('segments', `shares must sum to 1 (got ${segTotal}).`);
  return segments;
}

/** `market`: auction kind, competing prices, floor and shifts. */
export function parseMarket(r: Reader, window: TimeRange): Scenario['market'] {
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
  return {
    auction: auction as AuctionKind,
    priceCampaign,
    microsPerUnit: 10 * m.number('priceScale', { min: 0.01, max: 1000, fallback: 1 }),
    floorMicros: Math.round(m.number('floorCpm', { min: 0, max: 1000, fallback: 0 }) * 1000),
    shifts: ranges(m, 'shifts', window, 100),
  };
}

/** `notices`: delay, loss and duplication of win and loss notices. */
export function parseNotices(r: Reader): Required<NoticeOptions> {
  const n = r.child('notices');
  n.only(['meanDelayMs', 'maxDelayMs', 'winNoticeLoss', 'duplicateRate', 'lossNoticeRate']);
  return {
    meanDelayMs: n.number('meanDelayMs', { min: 0, max: 600_000, fallback: 2_000 }),
    maxDelayMs: n.number('maxDelayMs', { min: 0, max: 3_600_000, fallback: 60_000 }),
    winNoticeLoss: n.share('winNoticeLoss', 0),
    duplicateRate: n.share('duplicateRate', 0.01),
    lossNoticeRate: n.share('lossNoticeRate', 1),
  };
}

/** `budgetChanges` of the accounts' and campaigns' plans, in time order. */
export function parseBudgetChanges(
  r: Reader,
  accounts: readonly ScenarioAccount[],
  campaigns: readonly ScenarioCampaign[],
  window: TimeRange,
): BudgetChange[] {
  const budgetChanges: BudgetChange[] = r.array('budgetChanges').map((v, i) => {
    const b = r.item('budgetChanges', i, v);
    b.only(['at', 'account', 'campaign', 'arm', 'dailyBudget']);
    const atMs = b.instant('at');
    if (atMs < window.fromMs || atMs >= window.toMs)
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
  return budgetChanges;
}

/** `faults` of a single-region scenario, in time order. */
export function parseFaults(r: Reader, window: TimeRange): Fault[] {
  const faults: Fault[] = r.array('faults').map((v, i) => {
    const f = r.item('faults', i, v);
    const kind = f.string('kind');
    if (kind === 'notices-stalled') {
      f.only(['kind', 'from', 'to']);
      const atMs = f.instant('from');
      const untilMs = f.instant('to');
      if (untilMs <= atMs) throw new ScenarioError(f.at('to'), 'must be after `from`.');
      if (atMs < window.fromMs || untilMs > window.toMs)
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
    if (atMs < window.fromMs || atMs >= window.toMs)
      throw new ScenarioError(f.at('at'), 'must lie inside the scenario’s days.');
    return { kind, atMs };
  });
  faults.sort((x, y) => x.atMs - y.atMs);
  return faults;
}

/** `portfolio`: the spec of a generated portfolio (sim/portfolio.ts). */
export function portfolioSpec(r: Reader): PortfolioSpec {
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
