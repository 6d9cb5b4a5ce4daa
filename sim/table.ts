/**
 * `npx tsx sim/table.ts FILE.jsonl`: the pacing-quality table of docs/pacing-quality.md from the
 * final JSON lines of `npm run sim -- --scenario … --json` (one or more lines per scenario: lines of
 * the same scenario and seed are merged), in Markdown.
 */
import { readFileSync } from 'node:fs';
import type { SimJson, StrategySummary } from './report.js';
import { STRATEGIES } from './strategies.js';

const pct = (x: number | null | undefined, digits = 1) =>
  x === null || x === undefined ? '—' : `${(x * 100).toFixed(digits)} %`;

/**
 * Lines of the same scenario and seed merged into one (the union of their strategies; a later line
 * wins for a strategy both have — ASAP, which every run includes, is the same on the same seed).
 * So the strategies can be run separately, e.g. only `--strategy paceline` again after a
 * controller change.
 */
export function mergeRuns(lines: readonly SimJson[]): SimJson[] {
  const out = new Map<string, SimJson>();
  for (const j of lines) {
    const key = `${j.scenario}#${j.seed}`;
    const prev = out.get(key);
    out.set(key, prev ? { ...prev, strategies: { ...prev.strategies, ...j.strategies } } : j);
  }
  return [...out.values()];
}

/** The Markdown table (a row per scenario and strategy). */
export function qualityTable(lines: readonly SimJson[]): string {
  const out = [
    '| scenario | strategy | min util. fillable | fillable < 95 % | mean util. | max overspend | over > 0.5 % | max deviation (fillable) | RMS dev. (mean, all) | median max-ahead (fillable) | cost / imp. µ$ | vs ASAP | vs ASAP (fillable) | bounds |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const j of lines) {
    const asap = j.strategies.asap;
    for (const name of STRATEGIES) {
      const s = j.strategies[name] as StrategySummary | undefined;
      if (!s) continue;
      const vs = asap
        ? `${(((s.costPerImpression - asap.costPerImpression) / asap.costPerImpression) * 100).toFixed(0)} %`
        : '—';
      const vsFill =
        asap?.costPerImpressionFillable && s.costPerImpressionFillable
          ? `${(((s.costPerImpressionFillable - asap.costPerImpressionFillable) / asap.costPerImpressionFillable) * 100).toFixed(0)} %`
          : '—';
      // The acceptance bounds, for Paceline and (for comparison) each baseline; ASAP cannot be
      // cheaper than itself, so it never meets them. A line without the max-ahead figure (older
      // runs) is judged without it.
      const ok =
        (s.utilisationMinFillable ?? 0) >= 0.98 &&
        s.overspendMax <= 0.005 &&
        (s.deviationMax ?? 1) <= 0.05 &&
        (s.aheadMedianFillable ?? 0) <= 0.01 &&
        asap !== undefined &&
        s.costPerImpression < asap.costPerImpression;
      out.push(
        `| ${name === 'paceline' ? j.scenario : ''} | ${name} | ${pct(s.utilisationMinFillable)} (${s.fillableCampaignDays}) | ${
          s.campaignsUnder95Fillable
        } | ${pct(s.utilisationMean)} | ${pct(s.overspendMax, 2)} | ${s.campaignsOverBudget} | ${pct(s.deviationMax, 2)} | ${pct(
          s.deviationRmsMean,
          2,
        )} | ${pct(s.aheadMedianFillable, 2)} | ${s.costPerImpression} | ${name === 'asap' ? '' : vs} | ${name === 'asap' ? '' : vsFill} | ${ok ? 'met' : name === 'paceline' ? '**not met**' : 'not met'} |`,
      );
    }
  }
  return out.join('\n');
}

/**
 * The multi-region table: per scenario with regions, Paceline's combined row (Σ over regions: the
 * acceptance figures) and one row per region.
 */
export function regionsTable(lines: readonly SimJson[]): string {
  const out = [
    '| scenario | rows | min util. fillable | max overspend | max deviation (fillable) | spend share | allocation holds | allocation no-budget | authority age max | lost | granted $ | reclaimed $ |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const j of lines) {
    const p = j.strategies.paceline;
    if (!p?.regions) continue;
    out.push(
      `| ${j.scenario} | combined | ${pct(p.utilisationMinFillable)} (${p.fillableCampaignDays}) | ${pct(p.overspendMax, 2)} | ${pct(
        p.deviationMax,
        2,
      )} | 100 % | | | | | | |`,
    );
    for (const [region, r] of Object.entries(p.regions)) {
      out.push(
        `| | ${region} | | | ${pct(r.deviationMaxFillable, 2)} (own curve) | ${pct(r.spendShare)} | ${r.allocationHolds} | ${
          r.allocationRefusals
        } | ${r.authorityAgeMaxSeconds} s | ${r.lostMinutes} min | ${(r.grantedMicros / 1e6).toFixed(2)} | ${(
          r.reclaimedMicros / 1e6
        ).toFixed(2)} |`,
      );
    }
  }
  return out.join('\n');
}

if (process.argv[1]?.endsWith('table.ts')) {
  const file = process.argv[2];
  if (!file) {
    console.error('usage: npx tsx sim/table.ts FILE.jsonl (final lines of npm run sim -- … --json)');
    process.exit(2);
  }
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{"scenario"'))
    .map((l) => JSON.parse(l) as SimJson);
  const merged = mergeRuns(lines);
  console.log(qualityTable(merged));
  if (merged.some((j) => j.strategies.paceline?.regions)) console.log(`\n${regionsTable(merged)}`);
}
