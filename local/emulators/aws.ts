/**
 * DynamoDB (dynalite) and Kinesis (kinesalite) emulators on loopback, in-process. Both speak the
 * real AWS wire protocols, so the real SDK clients are used against them unchanged.
 */
import type { Server } from 'node:http';
import dynalite from 'dynalite';
import kinesalite from 'kinesalite';
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
