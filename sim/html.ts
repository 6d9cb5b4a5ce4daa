/**
 * `--html OUT`: one self-contained page (no network: Chart.js's UMD build is inlined from
 * node_modules, the machine running it may be offline) with
 * - cumulative spend vs the published target E(t) per campaign-day, one chart per campaign with a
 *   line per strategy (the first {@link MAX_CAMPAIGN_CHARTS} campaigns);
 * - per strategy, the distribution of utilisation and of overspend over campaign-days;
 * - the summary table.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { SimJson } from './report.js';
import type { StrategyRun } from './runner.js';

/** Campaign charts drawn (a 1,000-campaign day would make an unreadable page). */
export const MAX_CAMPAIGN_CHARTS = 16;

const COLORS: Record<string, string> = {
  paceline: '#1f77b4',
  asap: '#d62728',
  slots: '#2ca02c',
  linear: '#9467bd',
};

function chartJs(): string {
  const require = createRequire(import.meta.url);
  // The package exports no subpath for its UMD build: find it beside the main entry (dist/).
  return readFileSync(join(dirname(require.resolve('chart.js')), 'chart.umd.js'), 'utf8');
}

function histogram(values: readonly number[], edges: readonly number[]): number[] {
  const out = new Array<number>(edges.length).fill(0);
  for (const v of values) {
    let i = edges.length - 1;
    while (i > 0 && v < (edges[i] as number)) i--;
    out[i] = (out[i] as number) + 1;
  }
  return out;
}

const escapeHtml = (s: string) => s.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);

/** The page (runs must have been made with `series: true` for the spend charts). */
export function renderHtml(json: SimJson, runs: readonly StrategyRun[]): string {
  const campaignIds = [
    ...new Set(runs[0]?.plans.filter((p) => p.level === 'campaign' && p.scored).map((p) => p.plan) ?? []),
  ].slice(0, MAX_CAMPAIGN_CHARTS);
  const spendCharts = campaignIds.map((plan) => ({
    title: plan,
    datasets: runs.flatMap((run) => {
      const rows = run.plans.filter((p) => p.plan === plan && p.scored);
      const pts = rows.flatMap((r) => r.series ?? []);
      const budget = rows[0]?.budgetMicros ?? 1;
      return [
        {
          label: `${run.strategy} spend`,
          data: pts.map(([t, s]) => ({ x: t, y: s / budget })),
          borderColor: COLORS[run.strategy],
          pointRadius: 0,
          borderWidth: 1.5,
        },
        {
          label: `${run.strategy} target E(t)`,
          data: pts.map(([t, , e]) => ({ x: t, y: e / budget })),
          borderColor: COLORS[run.strategy],
          borderDash: [4, 3],
          pointRadius: 0,
          borderWidth: 1,
        },
      ];
    }),
  }));
  const utilEdges = [0, 0.5, 0.8, 0.9, 0.95, 0.98, 0.99, 1, 1.005];
  const overEdges = [0, 0.0001, 0.001, 0.005, 0.01, 0.05];
  const dist = (field: 'utilisation' | 'overspend', edges: number[]) =>
    runs.map((run) => {
      const values = run.plans
        .filter((p) => p.level === 'campaign' && p.scored)
        .map((p) =>
          field === 'utilisation'
            ? p.spentMicros / p.budgetMicros
            : Math.max(0, (p.spentMicros - p.budgetMicros) / p.budgetMicros),
        );
      return { label: run.strategy, data: histogram(values, edges), backgroundColor: COLORS[run.strategy] };
    });
  const table = runs
    .map((run) => {
      // The summary the JSON holds (simJson: with the scenario's ceiling-only campaigns left out).
      const s = json.strategies[run.strategy];
      if (!s) throw new Error(`no summary of strategy ${run.strategy} in the run's JSON`);
      const pct = (x: number | null) => (x === null ? '—' : `${(x * 100).toFixed(2)} %`);
      return `<tr><td>${run.strategy}</td><td>${pct(s.utilisationMinFillable)}</td><td>${s.campaignsUnder95Fillable}</td><td>${pct(
        s.utilisationMean,
      )}</td><td>${pct(s.overspendMax)}</td><td>${s.campaignsOverBudget}</td><td>${pct(s.deviationMax)}</td><td>${
        s.costPerImpression
      }</td></tr>`;
    })
    .join('\n');
  const data = {
    spendCharts,
    util: {
      labels: utilEdges.map((e) => `≥ ${(e * 100).toFixed(1)} %`),
      datasets: dist('utilisation', utilEdges),
    },
    over: {
      labels: overEdges.map((e) => `≥ ${(e * 100).toFixed(2)} %`),
      datasets: dist('overspend', overEdges),
    },
  };
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Paceline simulation: ${escapeHtml(json.scenario)}</title>
<style>body{font-family:system-ui,sans-serif;margin:1.5rem;max-width:1200px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(360px,1fr));gap:1rem}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:right}
td:first-child,th:first-child{text-align:left}</style>
<script>${chartJs()}</script></head><body>
<h1>Scenario ${escapeHtml(json.scenario)} (seed ${json.seed})</h1>
<p>${json.requests.toLocaleString('en')} requests auctioned, ${json.auctionsPerSec.toLocaleString('en')} per second of wall time.
Fillable = campaign-days ASAP brings to their cap in the same run.</p>
<table><tr><th>strategy</th><th>min utilisation (fillable)</th><th>fillable under 95 %</th><th>mean utilisation</th>
<th>max overspend</th><th>over budget &gt; 0.5 %</th><th>max deviation (fillable)</th><th>cost / impression (µ$)</th></tr>
${table}</table>
<h2>Distributions per strategy (campaign-days)</h2>
<div class="grid"><div><canvas id="util"></canvas></div><div><canvas id="over"></canvas></div></div>
<h2>Cumulative spend vs target, fraction of the budget</h2>
<div class="grid" id="spend"></div>
<script id="data" type="application/json">${JSON.stringify(data).replace(/</g, '\\u003c')}</script>
<script>
const data = JSON.parse(document.getElementById('data').textContent);
const time = (v) => new Date(v).toISOString().slice(5, 16).replace('T', ' ');
new Chart(document.getElementById('util'), {type: 'bar', data: data.util,
  options: {animation: false, plugins: {title: {display: true, text: 'Utilisation (spent / budget)'}}}});
new Chart(document.getElementById('over'), {type: 'bar', data: data.over,
  options: {animation: false, plugins: {title: {display: true, text: 'Overspend (over budget / budget)'}}}});
for (const c of data.spendCharts) {
  const div = document.createElement('div');
  const canvas = document.createElement('canvas');
  div.appendChild(canvas);
  document.getElementById('spend').appendChild(div);
  new Chart(canvas, {type: 'line', data: {datasets: c.datasets}, options: {animation: false, parsing: true,
    scales: {x: {type: 'linear', ticks: {callback: time, maxTicksLimit: 6}}, y: {min: 0}},
    plugins: {title: {display: true, text: c.title}, legend: {labels: {boxWidth: 10, font: {size: 10}}}}}});
}
</script></body></html>
`;
}
