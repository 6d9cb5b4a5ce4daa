/**
 * DynamoDB (dynalite), Kinesis (kinesalite) and S3 (s3rver) emulators on loopback, in-process.
 * All speak the real AWS wire protocols, so the real SDK clients are used against them unchanged.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { Server } from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import dynalite from 'dynalite';
import kinesalite from 'kinesalite';
import S3rver from 's3rver';
import { closeServer, listenLoopback } from './net.js';

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
}

async function start(server: Server): Promise<RunningEmulator> {
  const { url, port } = await listenLoopback(server);
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
      const deadline = Date.now() + 2_000;
      while (inflight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      await closeServer(server);
    },
    suspend: () =>
      new Promise<void>((resolve) => {
        Server.prototype.close.call(server, () => resolve());
        server.closeAllConnections();
      }),
    resume: () =>
      new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        Server.prototype.listen.call(server, { port, host: '127.0.0.1' }, () => {
          server.off('error', reject);
          resolve();
        });
      }),
  };
}

/** dynalite, in memory, tables ACTIVE immediately. Known gaps: no transactions, no TTL deletion. */
export function startDynalite(): Promise<RunningEmulator> {
  return start(dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 }));
}

/** Options of {@link startKinesalite}. */
export interface KinesaliteOptions {
  /** Region written into stream ARNs (`eventSourceARN` of the events). @default 'us-east-1' */
  readonly region?: string;
}

/** kinesalite, in memory, streams ACTIVE immediately (`MillisBehindLatest` is always 0 there). */
export function startKinesalite(options: KinesaliteOptions = {}): Promise<RunningEmulator> {
  // kinesalite reads the ARN region from AWS_REGION once, synchronously, when it is created: set
  // it for that call only, so two local regions in one process get their own ARNs.
  const saved = process.env.AWS_REGION;
  process.env.AWS_REGION = options.region ?? 'us-east-1';
  try {
    return start(kinesalite({ createStreamMs: 0, deleteStreamMs: 0, updateStreamMs: 0, shardLimit: 1000 }));
  } finally {
    if (saved === undefined) delete process.env.AWS_REGION;
    else process.env.AWS_REGION = saved;
  }
}

/**
 * s3rver: the S3 REST protocol over a temporary folder (deleted on stop). Clients must use
 * path-style addressing (`s3Client` does when given an endpoint). It accepts and ignores the
 * server-side-encryption headers the functions send, which AWS enforces.
 */
export async function startS3(): Promise<RunningEmulator> {
  // s3rver checks signatures against its one hard-coded key pair (S3RVER/S3RVER); register the
  // fixed local credentials every Paceline client uses against the emulators as well.
  const account = createRequire(import.meta.url)('s3rver/lib/models/account.js') as {
    DUMMY_ACCOUNT: { createKeyPair(id: string, secret: string): void };
  };
  account.DUMMY_ACCOUNT.createKeyPair('local', 'local');
  const directory = mkdtempSync(join(tmpdir(), 'paceline-s3-'));
  let server = new S3rver({ address: '127.0.0.1', port: 0, directory, silent: true });
  const { port } = await server.run();
  let running = true;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    async stop() {
      if (running) await server.close();
      running = false;
      rmSync(directory, { recursive: true, force: true });
    },
    // The objects live in the folder: a new server on the same port and folder serves them again.
    async suspend() {
      if (running) await server.close();
      running = false;
    },
    async resume() {
      if (running) return;
      server = new S3rver({ address: '127.0.0.1', port, directory, silent: true });
      await server.run();
      running = true;
    },
  };
}
