// The dashboard page: one section per region, Chart.js line charts fed by server-sent events.
// The server sends the whole bounded history on connect (`history`), then one `sample` per region
// and poll with the points it adds (the server computes them: one definition of every series).
/* global Chart, EventSource */

const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777'];
const charts = new Map(); // `${region}/${chart}` → Chart
let maxPoints = 900;

const fmtTime = (ms) => new Date(ms).toISOString().slice(11, 19);
const dollars = (micros) => micros / 1e6;

/**
 * Which chart a series goes to and how it is drawn: each campaign's spend and target share one
 * chart of their own (its own dollar scale: an asap plan's E(t) is the whole budget at once and
 * would flatten every other campaign's curves on a shared axis); the other kinds share a chart.
 */
function seriesStyle(name, colorIndex) {
  const [kind, ...rest] = name.split('/');
  const id = rest.join('/');
  const color = COLORS[colorIndex % COLORS.length];
  switch (kind) {
    case 'spent':
      return {
        chart: `spend:${id}`,
        label: 'confirmed spend',
        color: COLORS[0],
        scale: dollars,
        campaign: id,
      };
    case 'target':
      return {
        chart: `spend:${id}`,
        label: 'target E(t) (region share)',
        color: COLORS[4],
        dash: [6, 4],
        scale: dollars,
        campaign: id,
      };
    case 'throttle':
      return { chart: 'throttle', label: id, color };
    case 'multiplier':
      return { chart: 'multiplier', label: id, color };
    case 'age':
      return { chart: 'age', label: `shard ${id}`, color, scale: (ms) => ms / 1000 };
    case 'deadLetters':
      return { chart: 'deadLetters', label: id, color };
    default:
      return undefined;
  }
}

const CHARTS = [
  [
    'throttle',
    'Throttle (share of eligible requests bid on)',
    'Published by the pacer each tick (campaign plan).',
  ],
  ['multiplier', 'Bid multiplier', 'Published by the pacer each tick (campaign plan).'],
  [
    'age',
    'Parameter age per shard (s)',
    'Now minus the shard’s last published claim, as `paceline status` shows it.',
  ],
  ['deadLetters', 'Dead letters per source', 'Quarantined records in the dead-letter table.'],
];

function el(tag, attrs = {}, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function regionSection(region) {
  let section = document.getElementById(`region-${region}`);
  if (section) return section;
  section = el('section', { class: 'region', id: `region-${region}` });
  section.append(el('h2', {}, `Region ${region}`));
  section.append(el('h3', { class: 'sub' }, 'Spend vs target — top campaigns (largest campaign budgets)'));
  section.append(el('div', { class: 'grid', id: `spend-${region}` }));
  const grid = el('div', { class: 'grid' });
  for (const [key, title, note] of CHARTS) {
    const card = el('div', { class: 'card' });
    card.append(el('h3', {}, title));
    const box = el('div', { class: 'chart' });
    const canvas = el('canvas', { id: `${key}-${region}`, 'data-chart': key, 'data-region': region });
    box.append(canvas);
    card.append(box, el('p', { class: 'note' }, note));
    grid.append(card);
    charts.set(`${region}/${key}`, newChart(canvas, key));
  }
  const publishing = el('div', { class: 'card' });
  publishing.append(
    el('h3', {}, 'Publish switch'),
    el('p', { id: `switch-${region}`, class: 'switch' }, '–'),
    el(
      'p',
      { class: 'note' },
      'Which region’s pacer publishes into this region’s cache (SSM publisher-region; its version is the fence’s generation). `paceline failover` / `failback` move it.',
    ),
  );
  // The tables span the whole row: beside a chart, 9 columns of campaign ids, dollars and ages
  // did not fit a 1400 px window (the multiplier and params columns were cut off).
  const leaders = el('div', { class: 'card wide' });
  leaders.append(el('h3', {}, 'Leader per shard'), el('table', { id: `shards-${region}` }));
  const campaigns = el('div', { class: 'card wide' });
  campaigns.append(el('h3', {}, 'Top campaigns now'), el('table', { id: `campaigns-${region}` }));
  grid.append(publishing, leaders, campaigns);
  section.append(grid, el('div', { class: 'errors', id: `errors-${region}` }));
  document.getElementById('regions').append(section);
  return section;
}

/** The spend chart of one campaign, created on its first point. */
function spendChart(region, campaign) {
  const key = `${region}/spend:${campaign}`;
  let chart = charts.get(key);
  if (chart) return chart;
  const card = el('div', { class: 'card' });
  card.append(el('h3', {}, `${campaign} — spend vs target ($, today)`));
  const box = el('div', { class: 'chart small' });
  const canvas = el('canvas', {
    id: `spend-${region}-${campaign}`,
    'data-chart': 'spend',
    'data-campaign': campaign,
    'data-region': region,
  });
  box.append(canvas);
  card.append(
    box,
    el(
      'p',
      { class: 'note' },
      'Solid: confirmed spend (live counters). Dashed: E(t) published for the campaign plan — it ends at this region’s share of the budget.',
    ),
  );
  document.getElementById(`spend-${region}`).append(card);
  chart = newChart(canvas, 'spend');
  charts.set(key, chart);
  return chart;
}

function newChart(canvas, key) {
  return new Chart(canvas, {
    type: 'line',
    data: { datasets: [] },
    options: {
      animation: false,
      maintainAspectRatio: false,
      parsing: false,
      normalized: true,
      elements: { point: { radius: 0 }, line: { borderWidth: 2, tension: 0 } },
      interaction: { mode: 'nearest', intersect: false },
      scales: {
        x: { type: 'linear', ticks: { callback: (v) => fmtTime(v), maxTicksLimit: 6 } },
        y: { beginAtZero: key !== 'multiplier', ...(key === 'throttle' ? { max: 1 } : {}) },
      },
      plugins: { legend: { labels: { boxWidth: 12, font: { size: 11 } } } },
    },
  });
}

/** Adds points to a series' dataset, creating it on first sight. */
function addPoints(region, name, points) {
  const probe = seriesStyle(name, 0);
  if (!probe) return;
  const chart =
    probe.campaign !== undefined
      ? spendChart(region, probe.campaign)
      : charts.get(`${region}/${probe.chart}`);
  let ds = chart.data.datasets.find((d) => d.series === name);
  if (!ds) {
    // Spent and target of one campaign share a colour: colour by the id, in order of appearance.
    const id = name.slice(name.indexOf('/') + 1);
    const ids = [...new Set(chart.data.datasets.map((d) => d.series.slice(d.series.indexOf('/') + 1)))];
    const style = seriesStyle(name, ids.includes(id) ? ids.indexOf(id) : ids.length);
    ds = {
      series: name,
      label: style.label,
      borderColor: style.color,
      backgroundColor: style.color,
      borderDash: style.dash ?? [],
      scaleValue: style.scale ?? ((v) => v),
      data: [],
    };
    chart.data.datasets.push(ds);
  }
  for (const [t, v] of points) ds.data.push({ x: t, y: ds.scaleValue(v) });
  if (ds.data.length > maxPoints) ds.data.splice(0, ds.data.length - maxPoints);
}

function cell(v) {
  return v === null || v === undefined ? '–' : String(v);
}

/** The publish switch of a region: who publishes into its cache, its version, since when. */
function renderSwitch(sample) {
  const p = sample.publishSwitch;
  const node = document.getElementById(`switch-${sample.region}`);
  if (!p || p.publisherRegion === null) {
    node.textContent = 'publisher-region parameter missing';
    return;
  }
  const who = p.publisherRegion === p.region ? 'its own pacer' : `${p.publisherRegion}’s pacer (failed over)`;
  const since = p.sinceMs === null ? '' : ` · since ${fmtTime(p.sinceMs)} UTC`;
  node.textContent = `cache of ${p.region} ← published by ${who} · version ${cell(p.version)}${since}`;
}

function renderTables(sample) {
  renderSwitch(sample);
  const shards = document.getElementById(`shards-${sample.region}`);
  shards.replaceChildren();
  const head = el('tr');
  for (const h of [
    'shard',
    'lease holder',
    'epoch',
    'last tick',
    'age',
    'override',
    'publishing region',
    'publisher',
  ])
    head.append(el('th', {}, h));
  shards.append(head);
  for (const s of sample.shards) {
    const tr = el('tr');
    tr.append(el('td', {}, cell(s.shard)));
    tr.append(el('td', s.leader === null ? { class: 'none' } : {}, s.leader === null ? 'none' : s.leader));
    tr.append(el('td', {}, cell(s.epoch)), el('td', {}, cell(s.lastTick)));
    tr.append(el('td', {}, s.ageMs === null ? '–' : `${(s.ageMs / 1000).toFixed(1)} s`));
    tr.append(el('td', {}, cell(s.override)), el('td', {}, cell(s.publishingRegion)));
    tr.append(el('td', {}, cell(s.publisher)));
    shards.append(tr);
  }
  const campaigns = document.getElementById(`campaigns-${sample.region}`);
  campaigns.replaceChildren();
  const ch = el('tr');
  // The plan's budget, this region's share of it (what its pacer aims at: soft) and its
  // allocation (what its guards may lease: hard), labelled apart.
  for (const h of [
    'campaign',
    'day',
    'budget $ (plan)',
    'share $ (region, soft)',
    'allocation $ (region, cap)',
    'allocated until',
    'authority',
    'spent $',
    'target $',
    'in flight $',
    'throttle',
    'multiplier',
    'delivery',
    'params',
  ])
    ch.append(el('th', {}, h));
  campaigns.append(ch);
  const money = (m) => (m === null ? '–' : dollars(m).toFixed(2));
  for (const c of sample.campaigns) {
    const tr = el('tr');
    for (const v of [
      c.campaignId,
      c.day,
      money(c.budgetMicros),
      money(c.shareMicros),
      money(c.allocationMicros),
      c.allocationUntilMs === null ? '–' : fmtTime(c.allocationUntilMs),
      c.authority === null ? '–' : `${c.authority.home} (fence ${c.authority.fence})`,
      money(c.spentMicros),
      money(c.targetMicros),
      money(c.inFlightMicros),
      cell(c.throttle),
      cell(c.bidMultiplier),
    ])
      tr.append(el('td', {}, v));
    // Spent + in flight against E(now), the band buyers watch (behind < 90 %, ahead > 110 %)
    // and, on a second line, why when behind (the pacing report's rule).
    const d = c.delivery;
    tr.append(
      el(
        'td',
        { class: `band ${d.band}`, 'data-band': d.band },
        d.ratio === null
          ? '–'
          : `${(d.ratio * 100).toFixed(1)} % ${d.band}${d.reason ? `\n${d.reason}` : ''}`,
      ),
    );
    tr.append(
      el(
        'td',
        c.publish === 'published' ? {} : { class: 'none' },
        c.publish === 'published' ? `${(c.publishedAgeMs / 1000).toFixed(1)} s old` : c.publish,
      ),
    );
    campaigns.append(tr);
  }
  document.getElementById(`errors-${sample.region}`).textContent = sample.errors.join('\n');
}

function onHistory(history) {
  maxPoints = history.maxPoints ?? maxPoints;
  for (const r of history.regions) {
    regionSection(r.region);
    for (const chart of charts.values())
      if (chart.canvas.dataset.region === r.region) chart.data.datasets = [];
    for (const [name, points] of Object.entries(r.series)) addPoints(r.region, name, points);
    if (r.latest) renderTables(r.latest);
  }
  for (const chart of charts.values()) chart.update('none');
}

function onSample({ sample, points }) {
  regionSection(sample.region);
  for (const [name, v] of Object.entries(points)) addPoints(sample.region, name, [[sample.atMs, v]]);
  renderTables(sample);
  for (const [key, chart] of charts) if (key.startsWith(`${sample.region}/`)) chart.update('none');
  document.getElementById('status').textContent = `live · last sample ${fmtTime(sample.atMs)} UTC`;
}

// `?snapshot`: the history once, no event stream — for screenshots (`chromium --headless
// --screenshot --virtual-time-budget=…`): headless chromium's virtual time does not advance while a
// fetch is pending, and the live page's event stream never ends, so its budget never runs out.
if (new URLSearchParams(window.location.search).has('snapshot')) {
  fetch('/api/history')
    .then((r) => r.json())
    .then((history) => {
      onHistory(history);
      const last = Math.max(0, ...history.regions.map((r) => r.latest?.atMs ?? 0));
      document.getElementById('status').textContent =
        `snapshot of ${last ? `${fmtTime(last)} UTC` : 'no sample yet'} · drop ?snapshot for live updates`;
    });
} else {
  const source = new EventSource('/events');
  source.addEventListener('history', (e) => onHistory(JSON.parse(e.data)));
  source.addEventListener('sample', (e) => onSample(JSON.parse(e.data)));
  source.onerror = () => {
    document.getElementById('status').textContent = 'disconnected: retrying… (is npm start still running?)';
  };
}
// For tests and the console: the Chart.js instances by `${region}/${chart}`.
window.pacelineCharts = charts;
