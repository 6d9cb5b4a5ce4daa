/**
 * DynamoDB (dynalite) and Kinesis (kinesalite) emulators on loopback, in-process. Both speak the
 * real AWS wire protocols, so the real SDK clients are used against them unchanged.
 */
import { Server } from 'node:http';
import dynalite from 'dynalite';
import kinesalite from 'kinesalite';
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
