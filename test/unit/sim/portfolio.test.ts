/**
 * Generated portfolios (sim/portfolio.ts, the scenario field `portfolio`): deterministic for a
 * seed and different across seeds; budgets spread like exp(Gamma(k)); reach capped; campaigns
 * created at a local time on the first scored day; bad fields refused with their path.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { dayWindowOf } from '../../../shared/budget/time-zone.js';
import { prng } from '../../../shared/random/prng.js';
import { gammaDeviate, spendPerRequest } from '../../../sim/portfolio.js';
import { parseScenario, ScenarioError } from '../../../sim/scenario.js';

const shipped = (name: string) =>
  JSON.parse(readFileSync(new URL(`../../../sim/scenarios/${name}.json`, import.meta.url), 'utf8')) as Record<
    string,
    unknown
  >;

describe('generated portfolios', () => {
  it('the same seed gives the same portfolio, another seed another one', () => {
    const raw = shipped('portfolio-first-price');
    const a = parseScenario(raw, { seed: 3 });
    const b = parseScenario(raw, { seed: 3 });
    const c = parseScenario(raw, { seed: 4 });
    expect(a.campaigns).toEqual(b.campaigns);
    expect(a.accounts).toEqual(b.accounts);
    expect(c.campaigns.map((x) => x.budgetMicros)).not.toEqual(a.campaigns.map((x) => x.budgetMicros));
    // The input is not modified by the expansion.
    expect(raw.accounts).toBeUndefined();
  });

  it('budgets spread like exp(Gamma(3.77)): ln(budget) has the Gamma mean and variance', () => {
    const raw = shipped('portfolio-first-price');
    const logs: number[] = [];
    for (const seed of [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]) {
      const s = parseScenario(raw, { seed });
      expect(s.campaigns).toHaveLength(100);
      for (const c of s.campaigns) logs.push(Math.log(c.budgetMicros / 1_000_000));
      // Many small, a few huge, and some the market cannot fill (reach at its cap).
      const budgets = s.campaigns.map((c) => c.budgetMicros / 1_000_000).sort((x, y) => x - y);
      expect(budgets[50]).toBeLessThan(100);
      expect(budgets[99]).toBeGreaterThan(1000);
      expect(s.campaigns.every((c) => c.reach > 0 && c.reach <= 0.25)).toBe(true);
      expect(s.campaigns.filter((c) => c.reach === 0.25).length).toBeGreaterThan(2);
      expect(new Set(s.accounts.map((x) => x.timeZone)).size).toBeGreaterThanOrEqual(3);
    }
    const mean = logs.reduce((a, b) => a + b, 0) / logs.length;
    const variance = logs.reduce((a, b) => a + (b - mean) ** 2, 0) / logs.length;
    // Gamma(3.77, 1): mean 3.77, variance 3.77 (1,000 draws: ±0.12 and ±0.5 are > 3 standard errors).
    expect(Math.abs(mean - 3.77)).toBeLessThan(0.2);
    expect(Math.abs(variance - 3.77)).toBeLessThan(0.8);
  });

  it('the Gamma sampler has its mean and variance for several shapes', () => {
    const random = prng(42);
    for (const k of [1, 2.5, 3.77, 10]) {
      const xs = Array.from({ length: 20_000 }, () => gammaDeviate(k, random));
      const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
      const variance = xs.reduce((a, b) => a + (b - mean) ** 2, 0) / xs.length;
      expect(Math.abs(mean - k) / k).toBeLessThan(0.03);
      expect(Math.abs(variance - k) / k).toBeLessThan(0.06);
    }
  });

  it('creates the chosen share of campaigns at 17:00 local on the first scored day', () => {
    const s = parseScenario(shipped('portfolio-evening-new'), { seed: 2 });
    const created = s.campaigns.filter((c) => c.createdAtMs !== undefined);
    expect(created.length).toBeGreaterThan(25);
    expect(created.length).toBeLessThan(55);
    for (const c of created) {
      const zone = s.accounts.find((a) => a.id === c.accountId)?.timeZone as string;
      const start = dayWindowOf(s.scoredDays[0] as string, zone).startMs;
      expect(c.createdAtMs).toBe(start + 17 * 3_600_000);
    }
  });

  it('first price spends more per eligible request than second price on the same bids', () => {
    const ctx = {
      seed: 1,
      requestsPerDay: 1,
      segments: new Map([['all', 1]]),
      priceCampaign: '1458',
      microsPerUnit: 10,
      floorMicros: 0,
      firstScoredDay: '2026-03-04',
    };
    const first = spendPerRequest({ ...ctx, auction: 'first-price' }, 1500, 0.3);
    const second = spendPerRequest({ ...ctx, auction: 'second-price' }, 1500, 0.3);
    expect(second).toBeGreaterThan(0);
    expect(first).toBeGreaterThan(1.3 * second);
    expect(first).toBeLessThan(1500);
  });

  it.each([
    [
      'an unknown field',
      (p: Record<string, unknown>) => (p.campaign = 5),
      /^portfolio\.campaign: unknown field/,
    ],
    [
      'a bad zone',
      (p: Record<string, unknown>) => (p.timeZones = { 'Mars/Olympus': 1 }),
      /^portfolio\.timeZones\.Mars\/Olympus: .* IANA/,
    ],
    [
      'a bad creation time',
      (p: Record<string, unknown>) => (p.created = { share: 0.5, localTime: '5pm' }),
      /^portfolio\.created\.localTime: must be a local time HH:MM/,
    ],
    [
      'a Gamma shape below 1',
      (p: Record<string, unknown>) => (p.budget = { shape: 0.5 }),
      /^portfolio\.budget\.shape: must be ≥ 1/,
    ],
  ])('refuses %s with the field named', (_what, mutate, message) => {
    const raw = shipped('portfolio-first-price');
    mutate(raw.portfolio as Record<string, unknown>);
    expect(() => parseScenario(raw)).toThrow(ScenarioError);
    expect(() => parseScenario(raw)).toThrow(message);
  });
});
