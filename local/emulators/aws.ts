/**
 * DynamoDB (dynalite), Kinesis (kinesalite) and S3 (s3rver) emulators on loopback, in-process.
 * All speak the real AWS wire protocols, so the real SDK clients are used against them unchanged.
 *
 * Each can keep its data on disk (`path`: dynalite and kinesalite in LevelDB, s3rver in its
 * folder) and listen on a fixed port, so a restarted runner keeps its state and its endpoints.
 * Each is supervised: a server that stops listening without being asked to is reported and
 * listens again on the same port (its data lives in this process or on disk, so it is intact).
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { Server } from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import dynalite from 'dynalite';
import kinesalite from 'kinesalite';
import S3rver from 's3rver';
import { closeServer, listenLoopback } from './net.js';
import { restartDelayMs, type SupervisionListener, superviseHttpServer } from './supervision.js';

/** A running emulator. */
export interface RunningEmulator {
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
  /**
   * Fault injection: stops listening and drops every open connection (clients get "connection
   * refused") while keeping the emulator's data; {@link resume} listens on the same port again.
   */
  suspend(): Promise<void>;
  resume(): Promise<void>;
  /**
   * Fault injection: the server stops listening as if it had crashed (not a suspend): the
   * supervisor reports it and listens again on the same port.
   */
  crash(): void;
}

/** Where and how an emulator runs (common to dynalite, kinesalite and s3rver). */
export interface EmulatorOptions {
  /** Loopback port. @default a free port */
  readonly port?: number;
  /** Keep the data on disk in this directory (created if missing). @default in memory / a temporary folder */
  readonly path?: string;
  /** Supervision reports (died, restarted). @default none (the restart still happens) */
  readonly onEvent?: SupervisionListener;
  /**
   * Called with the emulator's http server before it serves a request (the local IAM gate
   * wraps its request listeners: local/iam/gate.ts). @default none
   */
  readonly guard?: (server: Server) => void;
}

async function start(server: Server, component: string, options: EmulatorOptions): Promise<RunningEmulator> {
  options.guard?.(server);
  const { url, port } = await listenLoopback(server, options.port);
  const supervision = superviseHttpServer(server, { ...options, component, port });
  // Requests being handled: stopping waits for them, since closing the store under a request
  // (e.g. a stopping function releasing its lease) fails inside the emulator, unhandled.
  let inflight = 0;
  server.on('request', (_req, res) => {
    inflight++;
    res.once('close', () => inflight--);
  });
  // The plain http.Server methods: dynalite wraps close()/listen() to close and recreate its
  // store, and an outage must not lose the tables.
  return {
    url,
    port,
    async stop() {
      supervision.setIntended(true);
      const deadline = Date.now() + 2_000;
      while (inflight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      await closeServer(server);
    },
    suspend: () =>
      new Promise<void>((resolve) => {
        supervision.setIntended(true);
        Server.prototype.close.call(server, () => resolve());
        server.closeAllConnections();
      }),
    resume: () =>
      new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        Server.prototype.listen.call(server, { port, host: '127.0.0.1' }, () => {
          server.off('error', reject);
          supervision.setIntended(false);
          resolve();
        });
      }),
    crash() {
      Server.prototype.close.call(server);
      server.closeAllConnections();
    },
  };
}

function dataPath(path: string | undefined): string | undefined {
  if (path !== undefined) mkdirSync(path, { recursive: true });
  return path;
}

/**
 * dynalite, in memory (or LevelDB in `path`), tables ACTIVE immediately. Known gaps: no
 * transactions, no TTL deletion.
 */
export function startDynalite(options: EmulatorOptions = {}): Promise<RunningEmulator> {
  const path = dataPath(options.path);
  return start(
    dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0, ...(path ? { path } : {}) }),
    'dynalite (DynamoDB)',
    options,
  );
}

/** Options of {@link startKinesalite}. */
export interface KinesaliteOptions extends EmulatorOptions {
  /** Region written into stream ARNs (`eventSourceARN` of the events). @default 'us-east-1' */
  readonly region?: string;
}

/**
 * kinesalite, in memory (or LevelDB in `path`), streams ACTIVE immediately (`MillisBehindLatest`
 * is always 0 there).
 */
export function startKinesalite(options: KinesaliteOptions = {}): Promise<RunningEmulator> {
  // kinesalite reads the ARN region from AWS_REGION once, synchronously, when it is created: set
  // it for that call only, so two local regions in one process get their own ARNs.
  const saved = process.env.AWS_REGION;
  process.env.AWS_REGION = options.region ?? 'us-east-1';
  try {
    const path = dataPath(options.path);
    return start(
      kinesalite({
        createStreamMs: 0,
        deleteStreamMs: 0,
        updateStreamMs: 0,
        shardLimit: 1000,
        ...(path ? { path } : {}),
      }),
      'kinesalite (Kinesis)',
      options,
    );
  } finally {
    if (saved === undefined) delete process.env.AWS_REGION;
    else process.env.AWS_REGION = saved;
  }
}

/**
 * s3rver: the S3 REST protocol over a folder (`path`, kept; else a temporary folder deleted on
 * stop). Clients must use path-style addressing (`s3Client` does when given an endpoint). It
 * accepts and ignores the server-side-encryption headers the functions send, which AWS enforces.
 */
export async function startS3(
  options: EmulatorOptions & {
    /** Access key ids (secret `local`) s3rver accepts signatures of, beside `local`. @default none */
    readonly accessKeys?: readonly string[];
  } = {},
): Promise<RunningEmulator> {
  // s3rver checks signatures against its one hard-coded key pair (S3RVER/S3RVER); register the
  // fixed local credentials every Paceline client uses against the emulators as well (the
  // operator's and each local principal's).
  const account = createRequire(import.meta.url)('s3rver/lib/models/account.js') as {
    DUMMY_ACCOUNT: { createKeyPair(id: string, secret: string): void };
  };
  for (const id of ['local', ...(options.accessKeys ?? [])]) account.DUMMY_ACCOUNT.createKeyPair(id, 'local');
  const directory = dataPath(options.path) ?? mkdtempSync(join(tmpdir(), 'paceline-s3-'));
  const report = options.onEvent ?? (() => {});
  const component = 's3rver (S3)';
  let running = false;
  let server!: S3rver;
  // The objects live in the folder: a new server on the same port and folder serves them again.
  const listen = async (requested: number) => {
    server = new S3rver({ address: '127.0.0.1', port: requested, directory, silent: true });
    const { port } = await server.run();
    // Synchronously after listening: no request is served before the gate is in place.
    if (server.httpServer) options.guard?.(server.httpServer);
    running = true;
    const current = server;
    current.httpServer?.once('close', () => {
      if (!running || server !== current) return;
      running = false;
      report({ type: 'died', component, address: `127.0.0.1:${port}`, reason: 'server stopped listening' });
      void revive(port, 0);
    });
    return port;
  };
  const revive = async (port: number, attempt: number): Promise<void> => {
    await new Promise((r) => setTimeout(r, restartDelayMs(attempt)).unref());
    if (running || stopped) return;
    try {
      await listen(port);
      report({
        type: 'restarted',
        component,
        address: `127.0.0.1:${port}`,
        state: 'objects intact (folder)',
      });
    } catch (error) {
      report({
        type: 'restart-failed',
        component,
        address: `127.0.0.1:${port}`,
        error: error instanceof Error ? error.message : String(error),
        retryInMs: restartDelayMs(attempt + 1),
      });
      await revive(port, attempt + 1);
    }
  };
  let stopped = false;
  const port = await listen(options.port ?? 0);
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    async stop() {
      stopped = true;
      const wasRunning = running;
      running = false;
      if (wasRunning) await server.close();
      if (options.path === undefined) rmSync(directory, { recursive: true, force: true });
    },
    async suspend() {
      const wasRunning = running;
      running = false;
      if (wasRunning) await server.close();
    },
    async resume() {
      if (running) return;
      await listen(port);
    },
    crash() {
      server.httpServer?.close();
      server.httpServer?.closeAllConnections();
    },
  };
}
