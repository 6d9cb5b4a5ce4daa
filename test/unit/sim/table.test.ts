/**
 * The pacing-quality table (sim/table.ts): runs of the same scenario and seed merge into one row
 * group (strategies run separately, e.g. only Paceline again after a controller change), and each
 * strategy is marked against the acceptance bounds.
 */
import { describe, expect, it } from 'vitest';
import type { SimJson, StrategySummary } from '../../../sim/report.js';
import { mergeRuns, qualityTable } from '../../../sim/table.js';

function summary(over: Partial<StrategySummary>): StrategySummary {
  return {
    utilisationMinFillable: 0.995,
    campaignsUnder95Fillable: 0,
    fillableCampaignDays: 3,
    campaignDays: 7,
    utilisationMean: 0.85,
    overspendMax: 0,
    campaignsOverBudget: 0,
    deviationMax: 0.03,
    deviationMaxAll: 0.3,
    deviationRmsMean: 0.1,
    aheadMedianFillable: 0.004,
    aheadMaxFillable: 0.02,
    minutesAliveMean: 1439,
    impressions: 1000,
    costPerImpression: 500,
    costPerImpressionFillable: 450,
    costPerClick: null,
    lostToOwnShareFillable: 0.2,
    lostToMarketShareFillable: 0.3,
    countersMatch: true,
    errors: 0,
    ...over,
  };
}

function line(scenario: string, seed: number, strategies: SimJson['strategies']): SimJson {
  const base = {
    auctionsPerSec: 1,
    requests: 1,
    auctions: 1,
    wallSeconds: 1,
    cpuSeconds: 1,
    redisCpuSeconds: 1,
  };
  return { scenario, seed, ...base, strategies };
}

describe('quality table', () => {
  it('merges runs of the same scenario and seed, keeps other seeds apart', () => {
    const asap = summary({ costPerImpression: 700, deviationMax: 1 });
    const merged = mergeRuns([
      line('s', 1, { paceline: summary({}), asap }),
      line('s', 1, { slots: summary({ deviationMax: 0.12, costPerImpression: 690 }), asap }),
      line('s', 2, { linear: summary({}), asap }),
    ]);
    expect(merged.map((j) => [j.seed, Object.keys(j.strategies).sort()])).toEqual([
      [1, ['asap', 'paceline', 'slots']],
      [2, ['asap', 'linear']],
    ]);
  });

  it('marks each strategy against the bounds: Paceline in bold when not met, ASAP never met', () => {
    const asap = summary({ costPerImpression: 700, deviationMax: 1 });
    const table = qualityTable([
      line('s', 1, {
        paceline: summary({ deviationMax: 0.0521 }),
        asap,
        slots: summary({ deviationMax: 0.12 }),
        linear: summary({ costPerImpression: 650 }),
      }),
      line('t', 1, {
        paceline: summary({ aheadMedianFillable: 0.0101 }),
        asap,
        linear: summary({ costPerImpression: 650 }),
      }),
    ]);
    const rows = table.split('\n').slice(2);
    expect(rows.map((r) => r.split('|').at(-2)?.trim())).toEqual([
      '**not met**',
      'not met',
      'not met',
      'met',
      '**not met**',
      'not met',
      'met',
    ]);
  });

  it('compares the cost per impression with ASAP over all campaigns and over the fillable ones', () => {
    const asap = summary({ costPerImpression: 700, costPerImpressionFillable: 900, deviationMax: 1 });
    const table = qualityTable([line('s', 1, { paceline: summary({}), asap })]);
    const cells = (table.split('\n')[2] as string).split('|').map((c) => c.trim());
    const header = (table.split('\n')[0] as string).split('|').map((c) => c.trim());
    expect(cells[header.indexOf('vs ASAP')]).toBe('-29 %');
    expect(cells[header.indexOf('vs ASAP (fillable)')]).toBe('-50 %');
  });
});
