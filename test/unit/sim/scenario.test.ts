/**
 * The simulator's scenario format: every shipped scenario parses; bad input is refused with an
 * error naming the field (JSON path) and saying what to do; the slots baseline's curve.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { dayWindowOf } from '../../../shared/budget/time-zone.js';
import { evaluateCurve } from '../../../shared/pacing/types.js';
import { renderHtml } from '../../../sim/html.js';
import { main } from '../../../sim/main.js';
import { type ScenarioRegion, trafficAt } from '../../../sim/regions/scenario.js';
import { parseScenario, ScenarioError } from '../../../sim/scenario.js';
import { slotsCurve } from '../../../sim/strategies.js';

const DIR = join(import.meta.dirname, '..', '..', '..', 'sim', 'scenarios');

const minimal = () => ({
  name: 'unit',
  timeZone: 'America/New_York',
  start: '2026-03-03',
  traffic: { requestsPerDay: 1000 },
  accounts: [{ id: 'a', campaigns: [{ id: 'c', dailyBudget: 1 }] }],
});

type Json = Record<string, unknown>;

/** An instant of the minimal scenario's day (2026-03-03, New York), `h` hours after midnight. */
const AT = (h: number) =>
  new Date(Date.parse('2026-03-03T00:00:00-05:00') + h * 3_600_000).toISOString().replace('.000Z', 'Z');

/** Two regions: 90/10 flipping at noon, the second lagging 5 s and lost 14:00–14:30. */
const twoRegions = (): Json[] => [
  { name: 'us-east-1', traffic: 0.9, shifts: [{ at: '2026-03-03T12:00:00-05:00', traffic: 0.1 }] },
  {
    name: 'us-west-2',
    traffic: 0.1,
    shifts: [{ at: '2026-03-03T12:00:00-05:00', traffic: 0.9 }],
    replicationLagSeconds: 5,
    faults: [{ kind: 'region-lost', from: '2026-03-03T14:00:00-05:00', to: '2026-03-03T14:30:00-05:00' }],
  },
];

function errorOf(mutate: (s: Record<string, unknown>) => void): ScenarioError {
  const s = minimal() as Record<string, unknown>;
  mutate(s);
  try {
    parseScenario(s);
  } catch (error) {
    expect(error).toBeInstanceOf(ScenarioError);
    return error as ScenarioError;
  }
  throw new Error('expected a ScenarioError');
}

describe('scenario format', () => {
  it('parses every shipped scenario (twelve of one region, four generated portfolios, three of several regions)', () => {
    const files = readdirSync(DIR).filter((f) => f.endsWith('.json'));
    expect(files.sort()).toEqual(
      [
        'daypart-week',
        'dst-day',
        'evening-peak-day',
        'fault-day',
        'flight-modes',
        'flight-week',
        'mid-day-budget-cut',
        'modes-day',
        'normal-day',
        'portfolio-evening-new',
        'portfolio-first-day',
        'portfolio-first-price',
        'portfolio-no-loss-notices',
        'regions-flip',
        'regions-home-unreachable',
        'regions-lost',
        'tiny-budgets',
        'traffic-spike',
        'unspendable-budgets',
      ].map((n) => `${n}.json`),
    );
    for (const f of files) {
      const s = parseScenario(JSON.parse(readFileSync(join(DIR, f), 'utf8')));
      expect(s.name).toBe(f.replace('.json', ''));
      expect(s.scoredDays.length).toBeGreaterThan(0);
      expect(s.campaigns.length).toBeGreaterThan(0);
    }
  });

  it('applies defaults and converts dollars to micros', () => {
    const s = parseScenario(minimal());
    expect(s.historyDays).toEqual(['2026-03-03']);
    expect(s.scoredDays).toEqual(['2026-03-04']);
    expect(s.startMs).toBe(dayWindowOf('2026-03-03', 'America/New_York').startMs);
    expect(s.scoredStartMs).toBe(dayWindowOf('2026-03-04', 'America/New_York').startMs);
    expect(s.campaigns[0]?.budgetMicros).toBe(1_000_000);
    expect(s.campaigns[0]?.medianBidMicros).toBe(1500);
    expect(s.market.auction).toBe('second-price');
    expect(s.notices.lossNoticeRate).toBe(1);
    expect(s.guards).toBe(2);
  });

  it('simulates every zone’s days whole (an account east of the scenario zone starts earlier)', () => {
    const s = parseScenario({
      ...minimal(),
      accounts: [{ id: 'a', timeZone: 'Asia/Tokyo', campaigns: [{ id: 'c', dailyBudget: 1 }] }],
    });
    expect(s.startMs).toBe(dayWindowOf('2026-03-03', 'Asia/Tokyo').startMs);
    expect(s.endMs).toBe(dayWindowOf('2026-03-04', 'America/New_York').endMs);
  });

  it.each([
    ['a typo in a field name', (s: Record<string, unknown>) => (s.trafic = {}), /^trafic: unknown field/],
    ['a missing name', (s: Record<string, unknown>) => delete s.name, /^name: must be a non-empty string/],
    ['a bad time zone', (s: Record<string, unknown>) => (s.timeZone = 'Mars/Olympus'), /^timeZone: .* IANA/],
    [
      'a bad start day',
      (s: Record<string, unknown>) => (s.start = '03/03/2026'),
      /^start: must be a local date/,
    ],
    [
      'a zero budget',
      (s: Record<string, unknown>) => (s.accounts = [{ id: 'a', campaigns: [{ id: 'c', dailyBudget: 0 }] }]),
      /^accounts\[0\]\.campaigns\[0\]\.dailyBudget: daily budget in USD must be > 0/,
    ],
    [
      'an empty string where a number goes',
      (s: Record<string, unknown>) => (s.traffic = { requestsPerDay: '' }),
      /^traffic\.requestsPerDay: must be a finite number/,
    ],
    [
      'a negative request count',
      (s: Record<string, unknown>) => (s.traffic = { requestsPerDay: -5 }),
      /^traffic\.requestsPerDay: must be ≥ 0/,
    ],
    [
      'a shape of 23 hours',
      (s: Record<string, unknown>) => (s.traffic = { requestsPerDay: 1, shape: new Array(23).fill(1) }),
      /^traffic\.shape: must be a named shape or 24 numbers/,
    ],
    [
      'an unknown named shape',
      (s: Record<string, unknown>) => (s.traffic = { requestsPerDay: 1, shape: 'weekendPeak' }),
      /^traffic\.shape: unknown shape "weekendPeak": use flat, noonPeak, eveningPeak/,
    ],
    [
      'segment shares not summing to 1',
      (s: Record<string, unknown>) => (s.segments = { a: 0.5, b: 0.4 }),
      /^segments: shares must sum to 1/,
    ],
    [
      'targeting an undeclared segment',
      (s: Record<string, unknown>) =>
        (s.accounts = [
          { id: 'a', campaigns: [{ id: 'c', dailyBudget: 1, targeting: { segments: ['x'] } }] },
        ]),
      /^accounts\[0\]\.campaigns\[0\]\.targeting\.segments\[0\]: unknown segment "x": declare it/,
    ],
    [
      'arm shares not summing to 1',
      (s: Record<string, unknown>) =>
        (s.accounts = [
          {
            id: 'a',
            campaigns: [{ id: 'c', dailyBudget: 1, arms: [{ id: 'A', share: 0.3, dailyBudget: 1 }] }],
          },
        ]),
      /^accounts\[0\]\.campaigns\[0\]\.arms: arm shares must sum to 1/,
    ],
    [
      'a duplicate campaign id',
      (s: Record<string, unknown>) =>
        (s.accounts = [
          { id: 'a', campaigns: [{ id: 'c', dailyBudget: 1 }] },
          { id: 'b', campaigns: [{ id: 'c', dailyBudget: 1 }] },
        ]),
      /^accounts\[1\]\.campaigns\[0\]\.id: duplicate campaign id c/,
    ],
    [
      'an unknown auction',
      (s: Record<string, unknown>) => (s.market = { auction: 'vickrey' }),
      /^market\.auction: must be "second-price" or "first-price"/,
    ],
    [
      'an unknown price histogram',
      (s: Record<string, unknown>) => (s.market = { priceCampaign: '9999' }),
      /^market\.priceCampaign: no iPinYou histogram 9999: use one of 1458/,
    ],
    [
      'a loss rate above 1',
      (s: Record<string, unknown>) => (s.notices = { winNoticeLoss: 1.5 }),
      /^notices\.winNoticeLoss: must be ≤ 1/,
    ],
    [
      'a local time without an offset',
      (s: Record<string, unknown>) => (s.faults = [{ kind: 'leader-killed', at: '2026-03-04T08:00:00' }]),
      /^faults\[0\]\.at: must be an ISO 8601 instant with an offset/,
    ],
    [
      'a fault in 2200',
      (s: Record<string, unknown>) => (s.faults = [{ kind: 'redis-restarted', at: '2200-01-01T00:00:00Z' }]),
      /^faults\[0\]\.at: must lie inside the scenario’s days/,
    ],
    [
      'an unknown fault',
      (s: Record<string, unknown>) => (s.faults = [{ kind: 'meteor', at: '2026-03-04T08:00:00-05:00' }]),
      /^faults\[0\]\.kind: unknown fault "meteor": use leader-killed, redis-restarted, notices-stalled or region-flipped/,
    ],
    [
      'a stall that ends before it starts',
      (s: Record<string, unknown>) =>
        (s.faults = [
          { kind: 'notices-stalled', from: '2026-03-04T08:00:00-05:00', to: '2026-03-04T07:00:00-05:00' },
        ]),
      /^faults\[0\]\.to: must be after `from`/,
    ],
    [
      'a budget change of an unknown campaign',
      (s: Record<string, unknown>) =>
        (s.budgetChanges = [{ at: '2026-03-04T12:00:00-05:00', campaign: 'nope', dailyBudget: 1 }]),
      /^budgetChanges\[0\]\.campaign: no campaign "nope"/,
    ],
    [
      'an account change of an account without a plan',
      (s: Record<string, unknown>) =>
        (s.budgetChanges = [{ at: '2026-03-04T12:00:00-05:00', account: 'a', dailyBudget: 1 }]),
      /^budgetChanges\[0\]\.account: account a has no account plan: give it a "dailyBudget" first/,
    ],
    [
      'a traffic event outside the days',
      (s: Record<string, unknown>) =>
        (s.traffic = {
          requestsPerDay: 1,
          events: [{ from: '2027-01-01T00:00:00Z', to: '2027-01-02T00:00:00Z', factor: 2 }],
        }),
      /^traffic\.events\[0\]: lies outside the scenario’s days/,
    ],
    ['not an object', (s: Record<string, unknown>) => (s.market = 5), /^market: must be a JSON object/],
    [
      'a flight that ends before it starts',
      (s: Record<string, unknown>) =>
        (s.accounts = [
          {
            id: 'a',
            campaigns: [
              { id: 'c', dailyBudget: 2, flight: { start: '2026-03-04', end: '2026-03-03', budget: 3 } },
            ],
          },
        ]),
      /^accounts\[0\]\.campaigns\[0\]\.flight\.end: 2026-03-03 is before the start/,
    ],
    [
      'a daily cap above the flight',
      (s: Record<string, unknown>) =>
        (s.accounts = [
          {
            id: 'a',
            campaigns: [
              { id: 'c', dailyBudget: 5, flight: { start: '2026-03-03', end: '2026-03-04', budget: 3 } },
            ],
          },
        ]),
      /^accounts\[0\]\.campaigns\[0\]\.dailyBudget: the daily cap .* is above the flight budget/,
    ],
    [
      'a flight field typo',
      (s: Record<string, unknown>) =>
        (s.accounts = [
          {
            id: 'a',
            campaigns: [
              { id: 'c', dailyBudget: 2, flight: { start: '2026-03-03', ends: '2026-03-04', budget: 3 } },
            ],
          },
        ]),
      /^accounts\[0\]\.campaigns\[0\]\.flight\.ends: unknown field/,
    ],
  ])('refuses %s, naming the field', (_what, mutate, message) => {
    expect(errorOf(mutate).message).toMatch(message);
  });

  it('several regions: shares over time, lag, faults', () => {
    const s = parseScenario({ ...minimal(), historyDays: 0, regions: twoRegions() });
    const [a, b] = s.regions ?? [];
    expect(a).toMatchObject({ name: 'us-east-1', traffic: 0.9, replicationLagMs: 1_000, lost: [] });
    expect(b?.shifts).toEqual([{ atMs: Date.parse('2026-03-03T12:00:00-05:00'), traffic: 0.9 }]);
    expect(b?.replicationLagMs).toBe(5_000);
    expect(b?.lost).toEqual([
      { fromMs: Date.parse('2026-03-03T14:00:00-05:00'), toMs: Date.parse('2026-03-03T14:30:00-05:00') },
    ]);
    expect(trafficAt(b as ScenarioRegion, Date.parse('2026-03-03T11:59:59-05:00'))).toBe(0.1);
    expect(trafficAt(b as ScenarioRegion, Date.parse('2026-03-03T12:00:00-05:00'))).toBe(0.9);
    // without the field: one region, the single-region engine
    expect(parseScenario(minimal()).regions).toBeUndefined();
  });

  it.each([
    ['one region only', (r: Json[]) => r.splice(1), /^regions: give 2–5 regions \(got 1\)/],
    [
      'a bad region name',
      (r: Json[]) => ((r[0] as Json).name = 'east'),
      /^regions\[0\]\.name: "east" is not a region name/,
    ],
    [
      'a region twice',
      (r: Json[]) => ((r[1] as Json).name = 'us-east-1'),
      /^regions\[1\]\.name: region us-east-1 is listed twice/,
    ],
    ['a share above 1', (r: Json[]) => ((r[0] as Json).traffic = 1.5), /^regions\[0\]\.traffic: must be ≤ 1/],
    [
      'shares not summing to 1 after a shift',
      (r: Json[]) => ((r[0] as Json).shifts = []),
      /^regions: traffic shares sum to 1\.8 at 2026-03-03T17:00:00\.000Z: make them sum to 1/,
    ],
    [
      'a shift outside the days',
      (r: Json[]) => ((r[1] as Json).shifts = [{ at: '2027-01-01T00:00:00Z', traffic: 0.9 }]),
      /^regions\[1\]\.shifts\[0\]\.at: must lie inside the scenario’s days/,
    ],
    [
      'a negative lag',
      (r: Json[]) => ((r[1] as Json).replicationLagSeconds = -1),
      /^regions\[1\]\.replicationLagSeconds: must be ≥ 0/,
    ],
    [
      'an unknown region fault',
      (r: Json[]) => ((r[1] as Json).faults = [{ kind: 'region-flooded', from: AT(10), to: AT(11) }]),
      /^regions\[1\]\.faults\[0\]\.kind: unknown region fault "region-flooded": use region-lost or home-region-unreachable/,
    ],
    [
      'the home cut off on a region that is not the home',
      (r: Json[]) =>
        ((r[1] as Json).faults = [{ kind: 'home-region-unreachable', from: AT(10), to: AT(11) }]),
      /^regions\[1\]\.faults\[0\]\.kind: home-region-unreachable applies to the home region: regions\[0\]/,
    ],
    [
      'a fault that ends before it starts',
      (r: Json[]) => ((r[1] as Json).faults = [{ kind: 'region-lost', from: AT(11), to: AT(10) }]),
      /^regions\[1\]\.faults\[0\]\.to: must be after `from`/,
    ],
    [
      'overlapping faults of a region',
      (r: Json[]) =>
        ((r[1] as Json).faults = [
          { kind: 'region-lost', from: AT(10), to: AT(12) },
          { kind: 'region-lost', from: AT(11), to: AT(13) },
        ]),
      /^regions\[1\]\.faults\[1\]: overlaps another fault of this region: merge them/,
    ],
    [
      'every region lost at once',
      (r: Json[]) => {
        (r[0] as Json).faults = [{ kind: 'region-lost', from: AT(14), to: AT(15) }];
        (r[1] as Json).faults = [{ kind: 'region-lost', from: AT(14), to: AT(14.5) }];
      },
      /^regions: every region is lost at 2026-03-03T19:00:00\.000Z: keep one region up/,
    ],
    [
      'an unknown field',
      (r: Json[]) => ((r[0] as Json).lag = 1),
      /^regions\[0\]\.lag: unknown field; allowed here: name, traffic/,
    ],
  ])('refuses %s in regions, naming the field', (_what, mutate, message) => {
    const regions = twoRegions();
    mutate(regions);
    expect(errorOf((s) => Object.assign(s, { historyDays: 0, regions })).message).toMatch(message);
  });

  it('refuses the single-region faults beside regions', () => {
    expect(
      errorOf((s) =>
        Object.assign(s, {
          historyDays: 0,
          regions: twoRegions(),
          faults: [{ kind: 'leader-killed', at: AT(9) }],
        }),
      ).message,
    ).toMatch(
      /^faults: the single-region faults are not simulated with several regions: give region faults in regions\[\]\.faults/,
    );
  });

  it('slots baseline: equal steps at each hour slot (25 on a fall-back day), ending at the budget', () => {
    const day = dayWindowOf('2026-11-01', 'America/New_York');
    const curve = slotsCurve('America/New_York', day, 25_000_000);
    expect(curve.atMs.length).toBe(2 * 25 + 1);
    expect(evaluateCurve(curve, day.startMs + 2)).toBe(1_000_000);
    expect(evaluateCurve(curve, day.startMs + 3_600_000 + 2)).toBe(2_000_000);
    expect(evaluateCurve(curve, day.endMs)).toBe(25_000_000);
    for (let i = 1; i < curve.atMs.length; i++)
      expect(curve.atMs[i] as number).toBeGreaterThan(curve.atMs[i - 1] as number);
  });
});

describe('npm run sim (usage errors, no Redis needed)', () => {
  it('prints help (exit 0) and refuses bad usage or a bad scenario in one line (exit 2)', async () => {
    const lines: string[] = [];
    const log = console.log;
    const error = console.error;
    console.log = (l: string) => lines.push(`out ${l}`);
    console.error = (l: string) => lines.push(`err ${l}`);
    try {
      expect(await main(['--help'])).toBe(0);
      expect(await main([])).toBe(2);
      expect(await main(['--scenario', join(DIR, 'normal-day.json'), '--strategy', 'fastest'])).toBe(2);
      expect(await main(['--scenario', join(DIR, 'normal-day.json'), '--seed', '-1'])).toBe(2);
      expect(await main(['--scenario', '/nonexistent/scenario.json'])).toBe(2);
    } finally {
      console.log = log;
      console.error = error;
    }
    expect(lines[0]).toMatch(/^out Usage: npm run sim -- --scenario FILE/);
    expect(lines.slice(1)).toEqual([
      'err sim: --scenario FILE is required (see --help).',
      'err sim: unknown strategy fastest: use paceline, asap, slots, linear.',
      'err sim: --seed must be an integer in [0, 2^31 − 1].',
      expect.stringMatching(/^err sim: cannot read \/nonexistent\/scenario.json: ENOENT/),
    ]);
  }, 60_000);
});

describe('--html page', () => {
  it('is self-contained: Chart.js inlined, nothing loaded from the network', () => {
    const html = renderHtml(
      {
        scenario: 'x',
        seed: 1,
        auctionsPerSec: 0,
        requests: 0,
        auctions: 0,
        wallSeconds: 0,
        cpuSeconds: 0,
        redisCpuSeconds: 0,
        strategies: {},
      },
      [],
    );
    expect(html).toContain('Chart.js v4.6.1');
    expect(html).not.toMatch(/<script[^>]+src=|<link[^>]+href=|https?:\/\/cdn/);
  });
});
