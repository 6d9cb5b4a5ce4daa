/**
 * The live dashboard in a real browser (Debian's chromium through playwright-core), against two
 * running local regions: the `npm start` runtime (pacer, track-spend, ingest-actions as OS
 * processes, on a scaled-down minute; strict allocations, as with several regions), the
 * dashboard server on their stores, and the demo's traffic driver (`startDemoTraffic`, what
 * `npm run demo` runs) in the first region. The page must show curves with data points that
 * change over time, each region's publish switch, the plan's budget, the region's share and its
 * allocation labelled apart, and the allocation authority; in its first minutes the demo answers
 * no "no budget" its region's allocation caused to a campaign under 5 % of its budget. A screenshot is saved under
 * `test-output/dashboard/`.
 */
import { existsSync, mkdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Dashboard, startDashboard } from '../../../local/dashboard/server.js';
import { demoTargetFromEnv } from '../../../local/demo/target.js';
import { type DemoTraffic, startDemoTraffic } from '../../../local/demo/traffic.js';
import { type RegionRuntime, startRuntime } from '../../../local/runtime.js';
import { repoRoot } from '../../../local/worker/process-invoker.js';
import { runChild } from '../../support/child.js';
import { tempDir } from '../../support/tmp.js';
import { waitFor } from '../../support/wait.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
// TOOLCHAIN-NOTES: the flags that make Debian's chromium run headless on these machines.
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
];
const REGION = 'us-east-1';
const PEER = 'us-west-2';
const OUTPUT = join(repoRoot, 'test-output', 'dashboard');

let runtime: RegionRuntime | undefined;
let peer: RegionRuntime | undefined;
let traffic: DemoTraffic | undefined;
let dashboard: Dashboard | undefined;
let browser: Browser | undefined;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `${CHROMIUM} not found: apt-get install -y chromium (.ci/run does), or set CHROMIUM_PATH.`,
    );
  }
  [runtime, peer] = (await startRuntime({
    regions: [REGION, PEER],
    redisMode: 'standalone',
    stateDir: tempDir('paceline-dashboard-'),
    functions: ['pacer', 'trackSpend', 'ingestActions'],
    bundle: true,
    // 2 s ticks in 12 s "minutes": the first publish within seconds, not a minute.
    msPerMinute: 12_000,
    pacer: { shards: 2, instancesPerShard: 1, tickMs: 2_000, leaseTtlMs: 5_000 },
    functionOutput: 'ignore',
    extraEnv: { pacer: { POWERTOOLS_METRICS_DISABLED: 'true' } },
  })) as [RegionRuntime, RegionRuntime];
  await Promise.all([runtime.bundled, peer.bundled]);
  const env = runtime.region.clientEnv;
  traffic = await startDemoTraffic({
    target: demoTargetFromEnv(env),
    accounts: 2,
    campaignsPerAccount: 2,
    requestsPerSec: 40,
    poisonEverySec: 3,
    tickMs: 2_000,
    seed: 10,
  });
  dashboard = await startDashboard({
    regions: [
      { region: REGION, env },
      { region: PEER, env: peer.region.clientEnv },
    ],
    port: 0,
    intervalMs: 1_000,
  });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}, 300_000);

afterAll(async () => {
  await browser?.close();
  await dashboard?.stop();
  await traffic?.stop();
  await runtime?.stop();
  await peer?.stop();
});

/**
 * Per dataset of a chart: its series name and [x, y] points, read from the Chart.js instances
 * (`spend` merges every campaign's own spend chart).
 */
async function chartData(page: Page, chart: string): Promise<Record<string, [number, number][]>> {
  return page.evaluate(
    ([region, key]) => {
      type ChartLike = { data: { datasets: { series: string; data: { x: number; y: number }[] }[] } };
      const charts = (globalThis as unknown as { pacelineCharts?: Map<string, ChartLike> }).pacelineCharts;
      const out: Record<string, [number, number][]> = {};
      for (const [name, c] of charts ?? []) {
        if (name !== `${region}/${key}` && !name.startsWith(`${region}/${key}:`)) continue;
        for (const d of c.data.datasets) out[d.series] = d.data.map((p) => [p.x, p.y]);
      }
      return out;
    },
    [REGION, chart] as const,
  );
}

const last = (points: readonly [number, number][]) => points[points.length - 1] as [number, number];

describe('live dashboard in chromium', () => {
  it('shows spend vs target, throttle, multiplier, parameter age and dead letters that change over time', async () => {
    const page = await (browser as Browser).newPage({ viewport: { width: 1400, height: 1500 } });
    const pageErrors: string[] = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));
    await page.goto((dashboard as Dashboard).url);

    // Curves with data: at least one campaign with ≥ 3 spent points and ≥ 3 target points.
    const first = await waitFor(
      'spend and target curves with points',
      300_000,
      async () => {
        const spend = await chartData(page, 'spend');
        const campaign = Object.keys(spend)
          .filter((s) => s.startsWith('spent/'))
          .map((s) => s.slice('spent/'.length))
          .find(
            (id) => (spend[`spent/${id}`]?.length ?? 0) >= 3 && (spend[`target/${id}`]?.length ?? 0) >= 3,
          );
        return campaign === undefined ? undefined : { campaign, spend };
      },
      500,
    );
    for (const chart of ['throttle', 'multiplier', 'age'] as const) {
      const data = await chartData(page, chart);
      expect(
        Object.values(data).some((points) => points.length > 0),
        `${chart} has points`,
      ).toBe(true);
    }

    // Over time: later points on every curve; E(t) rises with the clock; some campaign's spend
    // grows as track-spend books the demo's wins. Bounds are generous: on a loaded 2-core machine
    // the consumers lag, and this test checks behaviour, not speed.
    const id = first.campaign;
    const before = last(first.spend[`target/${id}`] ?? []);
    const moved = await waitFor('the target curve to move', 120_000, async () => {
      const spend = await chartData(page, 'spend');
      const now = last(spend[`target/${id}`] ?? []);
      return now[0] > before[0] &&
        (spend[`spent/${id}`]?.length ?? 0) > (first.spend[`spent/${id}`]?.length ?? 0)
        ? spend
        : undefined;
    });
    expect(last(moved[`spent/${id}`] ?? [])[0]).toBeGreaterThan(last(first.spend[`spent/${id}`] ?? [])[0]);
    // The target is the region's share of the plan's curve (what its guards enforce): with several
    // regions it moves with the shares and may dip, so only its time axis is held to move here;
    // that E(t) rises somewhere is the next check.
    expect(last(moved[`target/${id}`] ?? [])[0]).toBeGreaterThan(before[0]);
    await waitFor('E(t) of some campaign to rise', 120_000, async () => {
      const spend = await chartData(page, 'spend');
      return Object.keys(spend).some(
        (s) => s.startsWith('target/') && new Set((spend[s] ?? []).map((p) => p[1])).size > 1,
      )
        ? true
        : undefined;
    });
    await waitFor('the spend of some campaign to grow', 180_000, async () => {
      const spend = await chartData(page, 'spend');
      return Object.keys(spend).some((s) => {
        const points = spend[s] ?? [];
        return (
          s.startsWith('spent/') && points.length > 1 && last(points)[1] > (points[0] as [number, number])[1]
        );
      })
        ? true
        : undefined;
    });

    // Poison records from the demo reach the dead-letter table and the chart.
    await waitFor('dead letters on the chart', 60_000, async () => {
      const data = await chartData(page, 'deadLetters');
      return Object.values(data).some((points) => points.length > 0 && last(points)[1] > 0)
        ? true
        : undefined;
    });
    // The leader table names a leader for every shard.
    await waitFor('a leader per shard', 30_000, async () => {
      const leaders = await page.$$eval(`#shards-${REGION} tr td:nth-child(2)`, (tds) =>
        tds.map((t) => t.textContent),
      );
      return leaders.length === 2 && leaders.every((l) => l !== 'none') ? true : undefined;
    });

    // The publish switch of each region: its own pacer publishes into its cache, version 1.
    for (const region of [REGION, PEER]) {
      const text = await page.textContent(`#switch-${region}`);
      expect(text, region).toMatch(
        new RegExp(
          `^cache of ${region} ← published by its own pacer · version 1 · since \\d\\d:\\d\\d:\\d\\d UTC$`,
        ),
      );
    }
    // The plan's budget, the region's share and its allocation are labelled apart; the authority
    // of every plan is the first region (fence 0); the allocation is written by the pacer.
    const headers = await page.$$eval(`#campaigns-${REGION} th`, (ths) => ths.map((t) => t.textContent));
    expect(headers).toEqual(
      expect.arrayContaining([
        'budget $ (plan)',
        'share $ (region, soft)',
        'allocation $ (region, cap)',
        'authority',
      ]),
    );
    const column = async (name: string) => {
      const index = headers.indexOf(name) + 1;
      return page.$$eval(`#campaigns-${REGION} tr td:nth-child(${index})`, (tds) =>
        tds.map((t) => t.textContent),
      );
    };
    await waitFor('allocations in the campaign table', 120_000, async () => {
      const allocations = await column('allocation $ (region, cap)');
      return allocations.length > 0 && allocations.every((a) => /^\d+\.\d\d$/.test(a ?? ''))
        ? true
        : undefined;
    });
    expect(new Set(await column('authority'))).toEqual(new Set([`${REGION} (fence 0)`]));
    // Each campaign's delivery against E(now) in the buyers' 90/110 % band (the pacing report's rule).
    expect(headers).toContain('delivery');
    await waitFor('delivery bands in the campaign table', 60_000, async () => {
      const bands = await column('delivery');
      const shaped = /^(–|\d+\.\d % (on-pace|ahead|behind(\n[a-z-]+)?))$/;
      return bands.length > 0 && bands.every((b) => shaped.test(b ?? '')) && bands.some((b) => b !== '–')
        ? true
        : undefined;
    });
    const shardHeaders = await page.$$eval(`#shards-${REGION} th`, (ths) => ths.map((t) => t.textContent));
    expect(shardHeaders).toEqual(expect.arrayContaining(['lease holder', 'publishing region']));
    const publishing = await page.$$eval(`#shards-${REGION} tr td:nth-child(7)`, (tds) =>
      tds.map((t) => t.textContent),
    );
    expect(new Set(publishing)).toEqual(new Set([REGION]));

    mkdirSync(OUTPUT, { recursive: true });
    await page.screenshot({ path: join(OUTPUT, `${REGION}.png`), fullPage: true });
    expect(existsSync(join(OUTPUT, `${REGION}.png`))).toBe(true);
    expect(pageErrors).toEqual([]);
    expect((traffic as DemoTraffic).stats.wins).toBeGreaterThan(0);
    // The demo's first minutes with two regions: no campaign under 5 % of its budget was refused
    // because of its region's allocation (the floor and the first grants cover it). Refusals by
    // E(t) — an even campaign created now starts its curve at its creation — are counted apart.
    const stats = (traffic as DemoTraffic).stats;
    console.log(JSON.stringify({ demo: stats }));
    expect(stats.requests).toBeGreaterThan(0);
    expect(stats.earlyAllocationNoBudget).toBe(0);
  }, 600_000);

  it('at 1400 px every column of the tables is on screen, none clipped', async () => {
    const page = await (browser as Browser).newPage({ viewport: { width: 1400, height: 1000 } });
    await page.goto((dashboard as Dashboard).url);
    await waitFor('campaign rows', 120_000, async () =>
      (await page.$$(`#campaigns-${REGION} tr`)).length > 1 ? true : undefined,
    );
    for (const table of [`#campaigns-${REGION}`, `#shards-${REGION}`]) {
      const fit = await page.$eval(table, (t) => {
        const card = t.parentElement as unknown as {
          scrollWidth: number;
          clientWidth: number;
          getBoundingClientRect(): { left: number; right: number };
        };
        const cardBox = card.getBoundingClientRect();
        const headers = [...t.querySelectorAll('th')].map((th) => {
          const b = th.getBoundingClientRect();
          return { text: th.textContent, left: b.left, right: b.right };
        });
        return {
          overflow: card.scrollWidth - card.clientWidth,
          cardRight: cardBox.right,
          viewport: (globalThis as unknown as { innerWidth: number }).innerWidth,
          hidden: headers.filter((h) => h.right > cardBox.right || h.left < cardBox.left).map((h) => h.text),
          headers: headers.map((h) => h.text),
        };
      });
      expect(fit.overflow, table).toBeLessThanOrEqual(0);
      expect(fit.hidden, table).toEqual([]);
      expect(fit.cardRight).toBeLessThanOrEqual(fit.viewport);
      if (table.startsWith('#campaigns'))
        expect(fit.headers).toEqual(expect.arrayContaining(['multiplier', 'params']));
    }
    mkdirSync(OUTPUT, { recursive: true });
    await page.screenshot({ path: join(OUTPUT, `${REGION}-1400.png`) });
  }, 180_000);

  it('a headless chromium --virtual-time-budget screenshot of ?snapshot finishes (the live page never idles)', async () => {
    mkdirSync(OUTPUT, { recursive: true });
    const shot = join(OUTPUT, `${REGION}-snapshot.png`);
    rmSync(shot, { force: true });
    const started = Date.now();
    const run = await runChild(
      CHROMIUM,
      [
        ...CHROMIUM_ARGS,
        '--window-size=1400,1000',
        '--virtual-time-budget=5000',
        `--screenshot=${shot}`,
        `${(dashboard as Dashboard).url}?snapshot`,
      ],
      { cwd: OUTPUT, env: process.env, timeoutMs: 90_000 },
    );
    expect(existsSync(shot), `${run.code}\n${run.stderr.slice(-2000)}`).toBe(true);
    expect(statSync(shot).size).toBeGreaterThan(10_000);
    console.log(`chromium --virtual-time-budget screenshot in ${Date.now() - started} ms`);
  }, 120_000);
});
