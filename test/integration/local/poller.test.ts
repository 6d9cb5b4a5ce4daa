/**
 * The local Kinesis event-source mapping against real kinesalite: each test proves one of
 * Lambda's semantics with a recording test handler (in-process, so the tests stay fast; the
 * process boundary is covered in process-poller.test.ts).
 */
import type { KinesisStreamBatchResponse } from 'aws-lambda';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MemoryCheckpointStore } from '../../../local/esm/checkpoints.js';
import { LocalOnFailureDestination } from '../../../local/esm/on-failure.js';
import { KinesisPoller, type PollerSourceSettings } from '../../../local/esm/poller.js';
import { InProcessInvoker } from '../../../local/worker/in-process-invoker.js';
import type { Clock } from '../../../shared/time/clock.js';
import { type Behaviour, recordingHandler } from '../../fixtures/handlers/recording.js';
import { createStream, type KinesisFixture, putRecords, startKinesis, testSource } from './support.js';

let k: KinesisFixture;
const running: KinesisPoller[] = [];

beforeAll(async () => {
  k = await startKinesis();
});
afterAll(async () => {
  await k.stop();
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => p.stop()));
});

async function mapping(
  streamName: string,
  behaviour: Behaviour,
  overrides: Partial<PollerSourceSettings> = {},
  extra: { clock?: Clock; checkpoints?: MemoryCheckpointStore } = {},
) {
  const recorder = recordingHandler(behaviour);
  const onFailure = new LocalOnFailureDestination();
  const poller = new KinesisPoller({
    kinesis: k.kinesis,
    streamName,
    source: { ...testSource, ...overrides },
    invoker: new InProcessInvoker({ functionName: 'test-fn', handler: recorder.handler }),
    onFailure,
    idlePollMs: 20,
    retryBaseDelayMs: 5,
    retryMaxDelayMs: 20,
    ...extra,
  });
  running.push(poller);
  await poller.start();
  return { poller, onFailure, invocations: recorder.invocations };
}

const values = (n: number, prefix = 'r') => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
const onePk = (data: string[]) => data.map((d) => ({ data: d, partitionKey: 'pk' }));

describe('KinesisPoller', () => {
  it('builds the exact Lambda KinesisStreamEvent', async () => {
    const stream = await createStream(k.kinesis, 1);
    let seen: unknown;
    const recorder = recordingHandler();
    const poller = new KinesisPoller({
      kinesis: k.kinesis,
      streamName: stream,
      source: testSource,
      region: 'us-west-2',
      invoker: new InProcessInvoker({
        functionName: 'shape-fn',
        handler: async (event: unknown) => {
          seen ??= event;
          return recorder.handler(event as never);
        },
      }),
      onFailure: new LocalOnFailureDestination(),
      idlePollMs: 20,
    });
    running.push(poller);
    await poller.start();
    const before = Date.now();
    const [put] = await putRecords(k.kinesis, stream, [{ data: 'hello', partitionKey: 'user-1' }]);
    await poller.waitForIdle();
    const record = (seen as { Records: Record<string, unknown>[] }).Records[0] as Record<string, unknown>;
    expect(record).toMatchObject({
      eventSource: 'aws:kinesis',
      eventVersion: '1.0',
      eventName: 'aws:kinesis:record',
      eventID: `${put?.shardId}:${put?.sequenceNumber}`,
      awsRegion: 'us-west-2',
      eventSourceARN: poller.eventSourceArn,
      kinesis: {
        kinesisSchemaVersion: '1.0',
        partitionKey: 'user-1',
        sequenceNumber: put?.sequenceNumber,
        data: Buffer.from('hello').toString('base64'),
      },
    });
    expect(poller.eventSourceArn).toMatch(/^arn:aws:kinesis:[^:]+:\d{12}:stream\//);
    const arrival = (record.kinesis as { approximateArrivalTimestamp: number }).approximateArrivalTimestamp;
    // Seconds, not milliseconds.
    expect(arrival).toBeGreaterThan(before / 1000 - 5);
    expect(arrival).toBeLessThan(Date.now() / 1000 + 1);
  });

  it('partial failure resumes at the lowest failed sequence number', async () => {
    const stream = await createStream(k.kinesis, 1);
    const { poller, invocations, onFailure } = await mapping(stream, (inv, call) =>
      call === 1
        ? // r6 and r3 fail (deliberately out of order): the retry must start at r3.
          {
            batchItemFailures: [
              { itemIdentifier: inv.sequenceNumbers[6] ?? '' },
              { itemIdentifier: inv.sequenceNumbers[3] ?? '' },
            ],
          }
        : undefined,
    );
    await putRecords(k.kinesis, stream, onePk(values(10)));
    await poller.waitForIdle();
    expect(invocations.map((i) => i.data)).toEqual([values(10), values(10).slice(3)]);
    expect(onFailure.records).toEqual([]);
  });

  it('an unknown or empty itemIdentifier fails the whole batch', async () => {
    const stream = await createStream(k.kinesis, 1);
    const { poller, invocations } = await mapping(stream, (_inv, call) =>
      call === 1
        ? ({ batchItemFailures: [{ itemIdentifier: '12345' }] } as KinesisStreamBatchResponse)
        : call === 2
          ? ({ batchItemFailures: [{ itemIdentifier: '' }] } as KinesisStreamBatchResponse)
          : undefined,
    );
    await putRecords(k.kinesis, stream, onePk(values(5)));
    await poller.waitForIdle();
    expect(invocations.map((i) => i.data)).toEqual([values(5), values(5), values(5)]);
  });

  it('bisect isolates a poison record: only it reaches the on-failure destination', async () => {
    const stream = await createStream(k.kinesis, 1);
    const { poller, invocations, onFailure } = await mapping(
      stream,
      (inv) => {
        if (inv.data.includes('r5')) throw new Error('poison record r5');
        return undefined;
      },
      { bisectBatchOnFunctionError: true, retryAttempts: 1, batchSize: 8 },
    );
    const puts = await putRecords(k.kinesis, stream, onePk(values(8)));
    await poller.waitForIdle();
    const succeeded = invocations.filter((i) => !i.data.includes('r5')).flatMap((i) => i.data);
    expect(succeeded).toEqual(['r0', 'r1', 'r2', 'r3', 'r4', 'r6', 'r7']);
    // [0..7] ✗ → [0..3] ✓, [4..7] ✗ → [4,5] ✗ → [4] ✓, [5] ✗, retry [5] ✗ (1 retry) → destination; [6,7] ✓
    expect(invocations.map((i) => i.data.join(','))).toEqual([
      'r0,r1,r2,r3,r4,r5,r6,r7',
      'r0,r1,r2,r3',
      'r4,r5,r6,r7',
      'r4,r5',
      'r4',
      'r5',
      'r5',
      'r6,r7',
    ]);
    expect(onFailure.records).toHaveLength(1);
    expect(onFailure.records[0]?.KinesisBatchInfo).toMatchObject({
      startSequenceNumber: puts[5]?.sequenceNumber,
      endSequenceNumber: puts[5]?.sequenceNumber,
      batchSize: 1,
    });
    expect(onFailure.records[0]?.requestContext.condition).toBe('RetryAttemptsExhausted');
    expect(onFailure.records[0]?.localErrorInfo?.errorMessage).toBe('poison record r5');
  });

  it('with bisect on, a partial failure retries only the remainder (no halving)', async () => {
    const stream = await createStream(k.kinesis, 1);
    const { poller, invocations } = await mapping(
      stream,
      (inv, call) =>
        call === 1 ? { batchItemFailures: [{ itemIdentifier: inv.sequenceNumbers[3] ?? '' }] } : undefined,
      { bisectBatchOnFunctionError: true },
    );
    await putRecords(k.kinesis, stream, onePk(values(10)));
    await poller.waitForIdle();
    expect(invocations.map((i) => i.data)).toEqual([values(10), values(10).slice(3)]);
  });

  it('a timed-out invocation is a function error and is bisected like a throw', async () => {
    const stream = await createStream(k.kinesis, 1);
    const recorder = recordingHandler(async (inv) => {
      if (inv.data.includes('slow')) await new Promise((r) => setTimeout(r, 1000));
      return undefined;
    });
    const onFailure = new LocalOnFailureDestination();
    const poller = new KinesisPoller({
      kinesis: k.kinesis,
      streamName: stream,
      source: { ...testSource, bisectBatchOnFunctionError: true, retryAttempts: 0 },
      invoker: new InProcessInvoker({ functionName: 'slow-fn', handler: recorder.handler, timeoutMs: 250 }),
      onFailure,
      idlePollMs: 20,
      retryBaseDelayMs: 5,
    });
    running.push(poller);
    await poller.start();
    const puts = await putRecords(k.kinesis, stream, onePk(['a', 'b', 'slow', 'c']));
    await poller.waitForIdle();
    expect(onFailure.records.map((r) => r.KinesisBatchInfo.startSequenceNumber)).toEqual([
      puts[2]?.sequenceNumber,
    ]);
    expect(onFailure.records[0]?.localErrorInfo?.errorType).toBe('Sandbox.Timedout');
    expect(poller.history.filter((h) => h.outcome === 'success').reduce((n, h) => n + h.size, 0)).toBe(3);
  });

  it('retries stop at MaximumRetryAttempts; the batch lands in the destination with its metadata; the shard moves on', async () => {
    const stream = await createStream(k.kinesis, 1);
    const { poller, invocations, onFailure } = await mapping(
      stream,
      (inv) => {
        if (inv.data.some((d) => d.startsWith('bad'))) throw new Error('downstream unavailable');
        return undefined;
      },
      { retryAttempts: 2, batchSize: 4 },
    );
    const puts = await putRecords(k.kinesis, stream, onePk(values(4, 'bad')));
    await poller.waitForIdle();
    expect(invocations).toHaveLength(3); // first attempt + 2 retries
    expect(onFailure.records).toHaveLength(1);
    const failure = onFailure.records[0];
    expect(failure).toMatchObject({
      version: '1.0',
      requestContext: {
        condition: 'RetryAttemptsExhausted',
        approximateInvokeCount: 3,
        functionArn: 'arn:aws:lambda:us-east-1:000000000000:function:test-fn',
      },
      responseContext: { functionError: 'Unhandled' },
      KinesisBatchInfo: {
        shardId: puts[0]?.shardId,
        startSequenceNumber: puts[0]?.sequenceNumber,
        endSequenceNumber: puts[3]?.sequenceNumber,
        batchSize: 4,
        streamArn: poller.eventSourceArn,
      },
      localErrorInfo: { errorType: 'Error', errorMessage: 'downstream unavailable' },
    });
    expect(Date.parse(failure?.KinesisBatchInfo.approximateArrivalOfFirstRecord ?? '')).not.toBeNaN();
    // Skipped past: later records are processed, the failed ones are not retried again.
    await putRecords(k.kinesis, stream, onePk(['good']));
    await poller.waitForIdle();
    expect(invocations.at(-1)?.data).toEqual(['good']);
    expect(invocations).toHaveLength(4);
  });

  it('records older than MaximumRecordAgeInSeconds go to the destination without an invocation', async () => {
    const stream = await createStream(k.kinesis, 1);
    let offsetMs = 0;
    const clock: Clock = { now: () => Date.now() + offsetMs };
    await putRecords(k.kinesis, stream, onePk(values(3, 'old')));
    offsetMs = 120_000; // the records are now two minutes old
    const { poller, invocations, onFailure } = await mapping(
      stream,
      () => undefined,
      { maxRecordAgeSeconds: 60 },
      { clock },
    );
    await poller.waitForIdle();
    expect(invocations).toEqual([]);
    expect(onFailure.records).toHaveLength(1);
    expect(onFailure.records[0]).toMatchObject({
      requestContext: { condition: 'RecordAgeExceeded', approximateInvokeCount: 0 },
      KinesisBatchInfo: { batchSize: 3 },
    });
    offsetMs = 0;
    await putRecords(k.kinesis, stream, onePk(['fresh']));
    await poller.waitForIdle();
    expect(invocations.map((i) => i.data)).toEqual([['fresh']]);
  });

  it('a record that expires while being retried stops being retried', async () => {
    const stream = await createStream(k.kinesis, 1);
    let offsetMs = 0;
    const clock: Clock = { now: () => Date.now() + offsetMs };
    const { poller, invocations, onFailure } = await mapping(
      stream,
      (_inv, call) => {
        if (call === 2) offsetMs = 120_000; // time passes during the retries
        throw new Error('still failing');
      },
      { maxRecordAgeSeconds: 60, retryAttempts: -1 },
      { clock },
    );
    await putRecords(k.kinesis, stream, onePk(values(2)));
    await poller.waitForIdle();
    expect(invocations).toHaveLength(2);
    expect(
      onFailure.records.map((r) => [r.requestContext.condition, r.requestContext.approximateInvokeCount]),
    ).toEqual([['RecordAgeExceeded', 2]]);
  });

  it('keeps per-shard order with many records per key across shards, one batch in flight per shard', async () => {
    const stream = await createStream(k.kinesis, 4);
    const inFlight = new Map<string, number>();
    let maxPerShard = 0;
    let maxOverall = 0;
    let overall = 0;
    const { poller, invocations } = await mapping(
      stream,
      async (inv, call) => {
        const n = (inFlight.get(inv.shardId) ?? 0) + 1;
        inFlight.set(inv.shardId, n);
        overall++;
        maxPerShard = Math.max(maxPerShard, n);
        maxOverall = Math.max(maxOverall, overall);
        await new Promise((r) => setTimeout(r, 5));
        inFlight.set(inv.shardId, n - 1);
        overall--;
        // Some partial failures on the way: order must survive retries too.
        return call % 7 === 0 && inv.sequenceNumbers.length > 2
          ? { batchItemFailures: [{ itemIdentifier: inv.sequenceNumbers[2] ?? '' }] }
          : undefined;
      },
      { batchSize: 25 },
    );
    const keys = Array.from({ length: 20 }, (_, i) => `user-${i}`);
    const records = Array.from({ length: 600 }, (_, i) => ({
      data: `${keys[i % 20]}#${Math.floor(i / 20)}`,
      partitionKey: keys[i % 20] as string,
    }));
    await putRecords(k.kinesis, stream, records);
    await poller.waitForIdle(30_000);
    // Replay the handler's view: the last delivery wins (retries re-deliver a suffix); per key the
    // sequence of *finally accepted* values must be 0..29 in order, and every delivery in order.
    const lastSeen = new Map<string, number>();
    const shardsSeen = new Set<string>();
    for (const inv of invocations) {
      shardsSeen.add(inv.shardId);
      const perKey = new Map<string, number>();
      for (const d of inv.data) {
        const [key, n] = d.split('#') as [string, string];
        const prev = perKey.get(key);
        if (prev !== undefined) expect(Number(n)).toBe(prev + 1); // in order inside a batch
        perKey.set(key, Number(n));
      }
      for (const [key, first] of new Map(inv.data.map((d) => d.split('#') as [string, string]).reverse())) {
        // The first value of a key in a batch continues from what was accepted before, or replays it.
        const before = lastSeen.get(key) ?? -1;
        expect(Number(first)).toBeLessThanOrEqual(before + 1);
      }
      for (const [key, n] of perKey) lastSeen.set(key, n);
    }
    for (const key of keys) expect(lastSeen.get(key)).toBe(29);
    expect(shardsSeen.size).toBeGreaterThan(1);
    expect(maxPerShard).toBe(1);
    expect(maxOverall).toBeGreaterThan(1); // shards really ran in parallel
  });

  it('gathers records for the batching window before invoking', async () => {
    const stream = await createStream(k.kinesis, 1);
    const { poller, invocations } = await mapping(stream, () => undefined, {
      batchSize: 100,
      maxBatchingWindowSeconds: 2,
    });
    for (const v of values(4)) {
      await putRecords(k.kinesis, stream, onePk([v]));
      await new Promise((r) => setTimeout(r, 100));
    }
    await poller.waitForIdle();
    expect(invocations.map((i) => i.data)).toEqual([values(4)]);
  });

  it('a restarted mapping resumes after its per-shard checkpoints', async () => {
    const stream = await createStream(k.kinesis, 2);
    const checkpoints = new MemoryCheckpointStore();
    const first = await mapping(stream, () => undefined, {}, { checkpoints });
    await putRecords(
      k.kinesis,
      stream,
      values(30).map((d, i) => ({ data: d, partitionKey: `k${i}` })),
    );
    await first.poller.waitForIdle();
    await first.poller.stop();
    expect(Object.keys(checkpoints.snapshot()).length).toBeGreaterThan(0);
    await putRecords(
      k.kinesis,
      stream,
      values(10, 'late').map((d, i) => ({ data: d, partitionKey: `k${i}` })),
    );
    const second = await mapping(stream, () => undefined, {}, { checkpoints });
    await second.poller.waitForIdle();
    expect(first.invocations.flatMap((i) => i.data).sort()).toEqual(values(30).sort());
    expect(second.invocations.flatMap((i) => i.data).sort()).toEqual(values(10, 'late').sort());
  });
});
