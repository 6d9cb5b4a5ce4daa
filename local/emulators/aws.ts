/**
 * DynamoDB (dynalite), Kinesis (kinesalite) and S3 (s3rver) emulators on loopback, in-process.
 * All speak the real AWS wire protocols, so the real SDK clients are used against them unchanged.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
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
}

async function start(server: Server): Promise<RunningEmulator> {
  const { url, port } = await listenLoopback(server);
  return { url, port, stop: () => closeServer(server) };
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
  const server = new S3rver({ address: '127.0.0.1', port: 0, directory, silent: true });
  const { port } = await server.run();
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    async stop() {
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
