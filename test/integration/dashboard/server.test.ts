/**
 * The dashboard server on real stores (no browser): `npm start` prints its URL with the
 * endpoints and serves the page, Chart.js from node_modules and the history; samples carry the
 * injected clock's time and reach open pages over server-sent events; a paused Redis (SIGSTOP)
 * fails a round within the command timeout instead of freezing the dashboard, and the next round
 * after SIGCONT is whole again.
 */
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDashboard } from '../../../local/dashboard/server.js';
import { seedDemo } from '../../../local/demo/traffic.js';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { repoRoot } from '../../../local/worker/process-invoker.js';
import { BudgetRepository } from '../../../shared/budget/repository.js';
import { regionResources } from '../../../shared/region/resources.js';
import { ManualClock } from '../../../shared/time/clock.js';

/** Reads server-sent events from a streaming fetch body. */
function sseReader(body: ReadableStream<Uint8Array>): () => Promise<{ event: string; data: unknown }> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  return async () => {
    for (;;) {
      const end = buffer.indexOf('\n\n');
      if (end >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (block.startsWith(':')) continue; // keep-alive comment
        const event = /^event: (.*)$/m.exec(block)?.[1] ?? 'message';
        const data = JSON.parse(/^data: (.*)$/m.exec(block)?.[1] ?? 'null') as unknown;
        return { event, data };
      }
      const { value, done } = await reader.read();
      if (done) throw new Error('event stream ended');
      buffer += decoder.decode(value, { stream: true });
    }
  };
}

describe('dashboard server on a local region', () => {
  let region: LocalRegion;
  const T0 = Date.UTC(2026, 10, 23, 15, 0, 0);

  beforeAll(async () => {
    region = await startLocalRegion({ region: 'us-east-1' });
    const repo = new BudgetRepository({
      client: region.dynamodb,
      tableName: region.tableName('budgets'),
      pacerShards: region.description.settings.pacer.shards,
    });
    await seedDemo(repo, { prefix: 'srv' }, T0);
  });
  afterAll(async () => {
    for (const pid of region?.redis.pids ?? []) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {}
    }
    await region?.stop();
  });

  it('samples on the injected clock, streams them, and survives a paused Redis', async () => {
    const clock = new ManualClock(T0);
    // A long interval: only the explicit polls below take samples.
    const dashboard = await startDashboard({
      regions: [{ region: 'us-east-1', env: region.clientEnv }],
      port: 0,
      clock,
      intervalMs: 3_600_000,
    });
    try {
      const page = await fetch(dashboard.url);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('<script src="/chart.umd.js">');
      const chart = await fetch(new URL('/chart.umd.js', dashboard.url));
      expect(chart.headers.get('content-type')).toMatch(/javascript/);
      expect(await chart.text()).toContain('Chart.js v4.6.1');
      expect((await fetch(new URL('/nope', dashboard.url))).status).toBe(404);
      expect((await fetch(dashboard.url, { method: 'POST' })).status).toBe(405);

      const controller = new AbortController();
      const events = await fetch(new URL('/events', dashboard.url), { signal: controller.signal });
      expect(events.headers.get('content-type')).toBe('text/event-stream');
      const next = sseReader(events.body as ReadableStream<Uint8Array>);
      expect((await next()).event).toBe('history');

      clock.set(T0 + 60_000);
      await dashboard.poll();
      let e = await next();
      while (e.event !== 'sample' || (e.data as { sample: { atMs: number } }).sample.atMs !== T0 + 60_000)
        e = await next();
      const { sample, points } = e.data as {
        sample: {
          atMs: number;
          campaigns: { campaignId: string; publish: string; spentMicros: number | null }[];
          shards: { shard: number; leader: string | null }[];
          deadLetters: Record<string, number>;
          errors: string[];
        };
        points: Record<string, number>;
      };
      expect(sample.errors).toEqual([]);
      // The five largest of the nine seeded budgets; nothing published, counters not initialised.
      expect(sample.campaigns).toHaveLength(5);
      expect(sample.campaigns.every((c) => c.campaignId.startsWith('srv-') && c.publish === 'missing')).toBe(
        true,
      );
      expect(sample.campaigns.every((c) => c.spentMicros === null)).toBe(true);
      expect(sample.shards.map((s) => s.shard)).toEqual([0, 1, 2, 3]);
      expect(sample.shards.every((s) => s.leader === null)).toBe(true);
      expect(sample.deadLetters).toEqual({ 'ingest-actions': 0, 'track-spend': 0 });
      expect(points).toEqual({ 'deadLetters/ingest-actions': 0, 'deadLetters/track-spend': 0 });

      // Redis paused: the round ends within the command timeout with the failure named.
      const [pid] = region.redis.pids as [number];
      process.kill(pid, 'SIGSTOP');
      clock.set(T0 + 120_000);
      const started = Date.now();
      try {
        await dashboard.poll();
      } finally {
        process.kill(pid, 'SIGCONT');
      }
      expect(Date.now() - started).toBeLessThan(15_000);
      const paused = dashboard.histories.get('us-east-1')?.latest;
      expect(paused?.atMs).toBe(T0 + 120_000);
      expect(paused?.errors.join('\n')).toMatch(/campaigns|pacer shards/);
      expect(paused?.deadLetters).toEqual({ 'ingest-actions': 0, 'track-spend': 0 });
      expect((await fetch(dashboard.url)).status).toBe(200);

      // Resumed: the next round is whole again; the history holds both instants.
      clock.set(T0 + 180_000);
      await dashboard.poll();
      expect(dashboard.histories.get('us-east-1')?.latest?.errors).toEqual([]);
      const history = (await (await fetch(new URL('/api/history', dashboard.url))).json()) as {
        regions: { region: string; series: Record<string, [number, number][]> }[];
      };
      // The round taken at start (T0), then the three above.
      expect(history.regions[0]?.series['deadLetters/track-spend']?.map((p) => p[0])).toEqual([
        T0,
        T0 + 60_000,
        T0 + 120_000,
        T0 + 180_000,
      ]);
      controller.abort();
    } finally {
      await dashboard.stop();
    }
  }, 60_000);
});

describe('npm start', () => {
  it('prints the dashboard URL with the endpoints and serves it until stopped', async () => {
    const stub = 'test/fixtures/handlers/echo.ts';
    const args = [
      'local/main.ts',
      '--regions',
      'us-west-2',
      '--dashboard-port',
      '0',
      ...Object.values(regionResources.functions).flatMap((f) => ['--handler', `${f.name}=${stub}`]),
    ];
    // `node --import tsx` (what `npm start` runs, without the tsx CLI's signal relay, which
    // SIGKILLs a child that does not confirm a signal within 30 ms: flaky on a loaded machine).
    const proc = spawn(process.execPath, ['--import', 'tsx', ...args], {
      cwd: repoRoot,
      env: { ...process.env, POWERTOOLS_METRICS_DISABLED: 'true' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    proc.stdout?.on('data', (c: Buffer) => {
      output += c.toString();
    });
    const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
    try {
      const deadline = Date.now() + 40_000;
      while (!output.includes('Paceline local regions ready')) {
        if (Date.now() > deadline) throw new Error(`not ready:\n${output}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const lines = output.split('\n');
      const at = lines.findIndex((l) => l.startsWith('Dashboard: '));
      expect(at).toBeGreaterThan(lines.findIndex((l) => l.includes('Client env:')));
      const url = /^Dashboard: (http:\/\/127\.0\.0\.1:\d+\/)/.exec(lines[at] ?? '')?.[1] as string;
      expect(url).toBeDefined();
      expect((await fetch(url)).status).toBe(200);
      const history = (await (await fetch(new URL('/api/history', url))).json()) as {
        regions: { region: string }[];
      };
      expect(history.regions.map((r) => r.region)).toEqual(['us-west-2']);
      proc.kill('SIGINT');
      expect(await exited).toBe(0);
      await expect(fetch(url)).rejects.toThrow();
    } finally {
      if (proc.exitCode === null) proc.kill('SIGKILL');
    }
  }, 60_000);
});
