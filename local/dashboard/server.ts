/**
 * The live dashboard's HTTP server (thin): polls every region's {@link RegionCollector} every
 * `intervalMs`, keeps a bounded {@link RegionHistory} per region and pushes each new sample to
 * the open pages over server-sent events. Serves the page, its script and Chart.js from
 * `node_modules` (the machine may be offline: no CDN).
 *
 * Routes: `/` page · `/app.js` · `/chart.umd.js` · `/api/history` (every region's history, JSON)
 * · `/events` (SSE: `history` once on connect, then `sample` per region and poll).
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Clock, systemClock } from '../../shared/time/clock.js';
import { RegionCollector } from './collect.js';
import {
  DEFAULT_MAX_POINTS,
  type HistoryOptions,
  RegionHistory,
  type RegionSample,
  samplePoints,
} from './model.js';

/** A region the dashboard shows: its name and client environment (`Client env` of `npm start`). */
export interface DashboardRegion {
  readonly region: string;
  readonly env: Readonly<Record<string, string | undefined>>;
}

/** Options of {@link startDashboard}. */
export interface DashboardOptions extends HistoryOptions {
  readonly regions: readonly DashboardRegion[];
  /** Port to listen on; 0 = any free port. @default 7400, or any free port when 7400 is taken */
  readonly port?: number;
  /** @default '127.0.0.1' (the dashboard has no authentication: local only) */
  readonly host?: string;
  /** Poll period, ms. @default 2_000 */
  readonly intervalMs?: number;
  /** Campaigns charted per region. @default 5 */
  readonly topCampaigns?: number;
  /** Time of each sample. @default systemClock */
  readonly clock?: Clock;
  /** Called with errors of the server itself (not of a store: those go on the page). */
  readonly onError?: (error: unknown) => void;
}

/** A running dashboard. */
export interface Dashboard {
  readonly url: string;
  readonly histories: ReadonlyMap<string, RegionHistory>;
  /** Takes one round of samples now, after any round in progress (tests; the timer does it every interval). */
  poll(): Promise<void>;
  stop(): Promise<void>;
}

/** The dashboard's default port. */
export const DEFAULT_DASHBOARD_PORT = 7400;

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

function staticFiles(): Map<string, { type: string; body: Buffer }> {
  // The package's exports hide package.json and the UMD build; both sit beside its main file.
  const chartDist = dirname(require.resolve('chart.js'));
  return new Map([
    ['/', { type: 'text/html; charset=utf-8', body: readFileSync(join(here, 'page', 'index.html')) }],
    ['/app.js', { type: 'text/javascript; charset=utf-8', body: readFileSync(join(here, 'page', 'app.js')) }],
    [
      '/chart.umd.js',
      { type: 'text/javascript; charset=utf-8', body: readFileSync(join(chartDist, 'chart.umd.js')) },
    ],
  ]);
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error) => reject(error);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

/** Starts the dashboard for `regions`; resolves once it listens. */
export async function startDashboard(options: DashboardOptions): Promise<Dashboard> {
  const clock = options.clock ?? systemClock;
  const host = options.host ?? '127.0.0.1';
  const files = staticFiles();
  const histories = new Map<string, RegionHistory>();
  const collectors = options.regions.map((r) => {
    histories.set(r.region, new RegionHistory(r.region, options));
    return new RegionCollector({
      region: r.region,
      env: r.env,
      ...(options.topCampaigns === undefined ? {} : { topCampaigns: options.topCampaigns }),
    });
  });
  const clients = new Set<ServerResponse>();

  const send = (res: ServerResponse, event: string, data: unknown) =>
    res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  const historyJson = () => ({
    intervalMs: options.intervalMs ?? 2_000,
    maxPoints: options.maxPoints ?? DEFAULT_MAX_POINTS,
    regions: [...histories.values()].map((h) => h.toJSON()),
  });

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const path = new URL(req.url ?? '/', 'http://local').pathname;
    if (req.method !== 'GET') {
      res.writeHead(405, { allow: 'GET' }).end('GET only\n');
      return;
    }
    const file = files.get(path === '/index.html' ? '/' : path);
    if (file) {
      res.writeHead(200, { 'content-type': file.type, 'cache-control': 'no-cache' }).end(file.body);
    } else if (path === '/api/history') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(historyJson()));
    } else if (path === '/events') {
      res.writeHead(200, {
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache',
        connection: 'keep-alive',
      });
      send(res, 'history', historyJson());
      clients.add(res);
      req.on('close', () => clients.delete(res));
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end(`No ${path} here: open /\n`);
    }
  };

  const server = createServer(handle);
  const port = options.port ?? DEFAULT_DASHBOARD_PORT;
  try {
    await listen(server, port, host);
  } catch (error) {
    // The default port is a convenience: when it is taken (a second checkout), any port will do.
    if (options.port !== undefined || (error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
    await listen(server, 0, host);
  }
  const address = server.address() as AddressInfo;

  let polling: Promise<void> | undefined;
  const round = (): Promise<void> => {
    polling = (async () => {
      const samples: RegionSample[] = await Promise.all(collectors.map((c) => c.collect(clock.now())));
      for (const sample of samples) {
        histories.get(sample.region)?.add(sample);
        const points = Object.fromEntries(samplePoints(sample));
        for (const res of clients) send(res, 'sample', { sample, points });
      }
    })().finally(() => {
      polling = undefined;
    });
    return polling;
  };
  const report = (error: unknown) => options.onError?.(error);
  // The timer skips a beat while a round is still running: a slow store must not pile up rounds.
  const timer = setInterval(() => {
    if (!polling) round().catch(report);
  }, options.intervalMs ?? 2_000);
  timer.unref();
  // A keep-alive comment, so proxies and browsers do not drop a quiet stream.
  const heartbeat = setInterval(() => {
    for (const res of clients) res.write(': keep-alive\n\n');
  }, 15_000);
  heartbeat.unref();
  round().catch(report);

  return {
    url: `http://${host}:${address.port}/`,
    histories,
    async poll() {
      // A fresh round after the one in progress, so its samples carry the clock's time now.
      while (polling) await polling.catch(() => {});
      await round();
    },
    async stop() {
      clearInterval(timer);
      clearInterval(heartbeat);
      for (const res of clients) res.end();
      clients.clear();
      await polling?.catch(() => {});
      await new Promise<void>((resolve) => server.close(() => resolve()));
      for (const c of collectors) c.close();
    },
  };
}
