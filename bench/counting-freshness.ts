/**
 * Freshness of the counts: how long from an impression being sent to its being countable in a
 * cap check, through the local stream path as `npm start` runs it — the ad server's
 * KinesisProducer (`enqueue`, as the client sends), kinesalite, the event-source mapping with the
 * deployed settings (batch size, 1 s batching window), ingest-actions in its own process, Redis.
 * An event is countable once its user's log exists (what a cap check GETs); each event has its
 * own user, so the first write of the log is the event's.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type RegionRuntime, startRuntime } from '../local/runtime.js';
import { actionPartitionKey, encodeActionEvent } from '../shared/counting/event-encode.js';
import { ActionStore } from '../shared/counting/store.js';
import { KinesisProducer } from '../shared/kinesis/producer.js';
import { connectRedis, redisConfigFromEnv } from '../shared/redis/connect.js';
import { regionResources } from '../shared/region/resources.js';
import { systemClock } from '../shared/time/clock.js';
import { percentile, round } from './counting-workload.js';

/** Options of {@link freshnessPhase}. */
export interface FreshnessOptions {
  /** Events measured. @default 1,000 */
  readonly events?: number;
  /** Events sent per second. @default 200 */
  readonly ratePerSec?: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Sends events at a steady rate and times each until its user's log exists. */
async function measure(
  runtime: RegionRuntime,
  first: number,
  count: number,
  ratePerSec: number,
): Promise<number[]> {
  const redis = connectRedis(redisConfigFromEnv(runtime.region.functionEnv('ingestActions')));
  const store = new ActionStore({ redis, clock: systemClock });
  const producer = new KinesisProducer({
    client: runtime.region.kinesis,
    streamName: runtime.region.streamName('actions'),
  });
  const sentAt = new Map<string, number>();
  const freshness: number[] = [];
  const failures: unknown[] = [];
  try {
    let sending = true;
    const send = (async () => {
      const start = performance.now();
      for (let i = 0; i < count; i++) {
        const due = start + (i * 1000) / ratePerSec;
        const wait = due - performance.now();
        if (wait > 0) await sleep(wait);
        const userId = String(first + i);
        const event = {
          userId,
          timestamp: Date.now(),
          insertionId: Buffer.alloc(16, 1).fill((i % 250) + 1, 0, 1),
          action: 'impression' as const,
          ad: 11,
          adGroup: 7,
          campaign: 3,
          advertiser: 1,
        };
        sentAt.set(userId, performance.now());
        producer.enqueue({ data: encodeActionEvent(event), partitionKey: actionPartitionKey(event) }, (e) =>
          failures.push(e),
        );
      }
      sending = false;
    })();
    const deadline = performance.now() + (count / ratePerSec) * 1000 + 60_000;
    while ((sending || sentAt.size > 0) && performance.now() < deadline) {
      const pending = [...sentAt.keys()];
      if (pending.length > 0) {
        const pipeline = redis.pipeline();
        for (const u of pending) pipeline.exists(store.logKey(u));
        const replies = (await pipeline.exec()) ?? [];
        const seen = performance.now();
        pending.forEach((u, k) => {
          if (replies[k]?.[1] === 1) {
            freshness.push(seen - (sentAt.get(u) as number));
            sentAt.delete(u);
          }
        });
      }
      await sleep(5);
    }
    await send;
    if (failures.length > 0) throw new Error(`${failures.length} events were not put on the stream`);
    if (sentAt.size > 0) throw new Error(`${sentAt.size} events were never countable within 60 s`);
    return freshness.sort((a, b) => a - b);
  } finally {
    await producer.flush();
    redis.disconnect();
  }
}

/**
 * The freshness figures: P50 / P99 (ms) from `enqueue` to countable, after a warm-up (the first
 * invocation starts the function's process: a cold start, not the steady path).
 */
export async function freshnessPhase(options: FreshnessOptions = {}): Promise<Record<string, unknown>> {
  const events = options.events ?? 1000;
  const ratePerSec = options.ratePerSec ?? 200;
  const stateDir = mkdtempSync(join(tmpdir(), 'paceline-freshness-'));
  const [runtime] = (await startRuntime({
    regions: ['us-east-1'],
    redisMode: 'standalone',
    stateDir,
    functions: ['ingestActions'],
    functionOutput: 'ignore',
  })) as [RegionRuntime];
  try {
    await measure(runtime, 60_000_000, 100, 100);
    const freshness = await measure(runtime, 61_000_000, events, ratePerSec);
    const source = regionResources.functions.ingestActions.source;
    return {
      freshnessP50Ms: round(percentile(freshness, 50), 1),
      freshnessP99Ms: round(percentile(freshness, 99), 1),
      freshnessMaxMs: round(freshness[freshness.length - 1] ?? Number.NaN, 1),
      freshnessEvents: freshness.length,
      freshnessPath:
        `KinesisProducer.enqueue → kinesalite → local event-source mapping (deployed settings: batch ${source.batchSize}, ` +
        `batching window ${source.maxBatchingWindowSeconds} s) → ingest-actions (own process) → redis-server; ` +
        `${ratePerSec} events/s, each its own user`,
    };
  } finally {
    await runtime.stop();
    rmSync(stateDir, { recursive: true, force: true });
  }
}
