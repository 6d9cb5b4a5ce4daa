import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryCheckpointStore } from '../../../local/esm/checkpoints.js';
import { LocalOnFailureDestination } from '../../../local/esm/on-failure.js';
import { KinesisPoller } from '../../../local/esm/poller.js';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { InProcessInvoker } from '../../../local/worker/in-process-invoker.js';
import type { InvokeResult, Invoker } from '../../../local/worker/invoker.js';
import { decodeRecord } from '../../../shared/counting/event-decode.js';
import { ActionStore } from '../../../shared/counting/store.js';
import { KinesisProducer } from '../../../shared/kinesis/producer.js';
import { connectRedis, type RedisClient, redisConfigFromEnv } from '../../../shared/redis/connect.js';
import { regionResources } from '../../../shared/region/resources.js';
import { DAY_MS, systemClock } from '../../../shared/time/clock.js';
import { readStream } from '../../support/kinesis.js';
import { type KinesisHandler, loadKinesisHandler } from '../../support/lambda.js';
import { compareCaps } from './cap-compare.js';
import { generateLog, prng, ReferenceCounter } from './fixtures.js';

/** Delivers every batch twice to the inner invoker and answers with the second response. */
class TwiceInvoker implements Invoker {
  deliveries = 0;
  constructor(private readonly inner: Invoker) {}
  get functionName() {
    return this.inner.functionName;
  }
  async invoke(event: unknown): Promise<InvokeResult> {
    this.deliveries++;
    await this.inner.invoke(event);
    return this.inner.invoke(event);
  }
  close() {
    return this.inner.close();
  }
}

const seed = Number(process.env.COUNTING_SEED ?? Math.floor(Math.random() * 2 ** 31));
let region: LocalRegion;
let handler: KinesisHandler;
let redis: RedisClient;
let store: ActionStore;

beforeAll(async () => {
  region = await startLocalRegion({ redisMode: 'standalone' });
  handler = await loadKinesisHandler(region, 'ingestActions');
  redis = connectRedis(redisConfigFromEnv(region.functionEnv('ingestActions')));
  store = new ActionStore({ redis, clock: systemClock });
});

afterAll(async () => {
  redis?.disconnect();
  await region?.stop();
});

async function mapping(invoker: Invoker) {
  const poller = new KinesisPoller({
    kinesis: region.kinesis,
    streamName: region.streamName('actions'),
    source: { ...regionResources.functions.ingestActions.source, maxBatchingWindowSeconds: 0 },
    invoker,
    onFailure: new LocalOnFailureDestination(),
    checkpoints: new MemoryCheckpointStore(),
    idlePollMs: 20,
  });
  await poller.start();
  return poller;
}

describe('ingest-actions through the local event-source mapping', () => {
  it(`counts each event identity once per dedup window however often batches are delivered (seed=${seed})`, async () => {
    const rand = prng(seed);
    const now = Date.now();
    // Exact duplicates and re-stamped copies inside, on the edge of and outside the one-day window.
    // KPL aggregates mix users, so one user's records reach the function over both shards in no
    // fixed order: each event gets at most one copy and its own insertion id, which makes the
    // counts independent of arrival order (the exact order is tested in differential.test.ts).
    const { records, userIds, restamps } = generateLog(rand, 3000, now - 29 * DAY_MS, now, {
      maxCopies: 1,
      insertionIds: 0,
      restampShare: 0.2,
    });
    expect(restamps.inside).toBeGreaterThan(150);
    expect(restamps.edge).toBeGreaterThan(75);
    expect(restamps.outside).toBeGreaterThan(75);
    const plain = new KinesisProducer({ client: region.kinesis, streamName: region.streamName('actions') });
    const aggregated = new KinesisProducer({
      client: region.kinesis,
      streamName: region.streamName('actions'),
      aggregate: { maxBytes: 8 * 1024 },
    });
    await Promise.all(
      records.map((data, i) =>
        (i % 2 ? aggregated : plain).put({ data, partitionKey: decodeRecord(data).userId }),
      ),
    );
    // Everything put is on the stream, once (the reference reads it back, in stream order).
    const reference = new ReferenceCounter(30 * DAY_MS, DAY_MS);
    const onStream = (await readStream(region.kinesis, region.streamName('actions'))).flatMap((s) => s.data);
    expect(onStream.length).toBe(records.length);
    reference.deliver(onStream, Date.now());
    const check = async (label: string) => {
      const horizon = Date.now() - 30 * DAY_MS;
      for (const userId of userIds) {
        const range = { from: now - 30 * DAY_MS, to: now + DAY_MS };
        const result = await store.count(userId, [{ ranges: [range], groupBy: ['campaign', 'action'] }]);
        const got = result[0]?.[0];
        const want = reference.count(userId, horizon, range, {}, ['campaign', 'action']);
        expect(got?.total, `${label} seed=${seed} user=${userId}`).toBe(want.total);
        expect(new Map((got?.groups ?? []).map((g) => [JSON.stringify(g.key), g.count])), label).toEqual(
          want.groups,
        );
      }
    };

    const twice = new TwiceInvoker(new InProcessInvoker({ functionName: 'ingest-actions', handler }));
    const first = await mapping(twice);
    await first.waitForIdle(60_000);
    await first.stop();
    expect(twice.deliveries).toBeGreaterThan(1);
    expect(first.history.every((h) => h.outcome === 'success')).toBe(true);
    await check('after double delivery');

    // A full replay of the stream (new mapping, fresh checkpoints, TRIM_HORIZON), again twice.
    const replay = await mapping(
      new TwiceInvoker(new InProcessInvoker({ functionName: 'ingest-actions', handler })),
    );
    await replay.waitForIdle(60_000);
    await replay.stop();
    expect(replay.history.length).toBeGreaterThan(0);
    await check('after full replay');
  });

  it(`caps of every kind on user, household, device and session keys agree with the reference through the stream (seed=${seed})`, async () => {
    const rand = prng(seed + 1);
    const now = Date.now();
    // Events with household and device ids, each counting in every identity's key group; exact
    // duplicates only (redelivered bytes): with copies re-stamped, which occurrence's time counts
    // would depend on the order the shards are read in, and windowed caps would see it.
    const log = generateLog(rand, 2500, now - 29 * DAY_MS, now, {
      insertionIds: 0,
      restampShare: 0,
      identities: true,
      idBase: 50_000,
    });
    const producer = new KinesisProducer({
      client: region.kinesis,
      streamName: region.streamName('actions'),
      aggregate: { maxBytes: 8 * 1024 },
    });
    await Promise.all(
      log.records.map((data) => producer.put({ data, partitionKey: decodeRecord(data).userId })),
    );
    const users = new Set(log.userIds);
    const onStream = (await readStream(region.kinesis, region.streamName('actions')))
      .flatMap((s) => s.data)
      .filter((data) => users.has(decodeRecord(data).userId));
    expect(onStream.length).toBe(log.records.length);
    const reference = new ReferenceCounter(30 * DAY_MS, DAY_MS).deliver(onStream, Date.now());
    const poller = await mapping(
      new TwiceInvoker(new InProcessInvoker({ functionName: 'ingest-actions', handler })),
    );
    await poller.waitForIdle(60_000);
    await poller.stop();
    const compared = await compareCaps({ store, reference, log, rand, rounds: 120, now: Date.now(), seed });
    expect(compared).toBeGreaterThan(8000);
  });
});
