/**
 * KinesisProducer's own queueing, with a client that answers instantly (so the producer's cost is
 * all there is to measure; the behaviour against a real Kinesis API is in
 * test/integration/counting/producer.test.ts): back-pressure admits waiting records in FIFO order,
 * one per freed slot, so 100,000 pending records cost the same per record as 10,000 (a waiter
 * woken per slot *per waiter* made it quadratic); enqueue() is fire-and-forget with an error
 * callback and refuses records beyond maxWaitingRecords.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { PutRecordsCommand, PutRecordsCommandOutput } from '@aws-sdk/client-kinesis';
import { describe, expect, it } from 'vitest';
import { KinesisProducer, KinesisPutError, type ProducerRecord } from '../../../shared/kinesis/producer.js';

/** Accepts every entry at once, remembering the order of the data it was sent. */
function instantClient(options: { fail?: (data: string) => boolean; log?: string[] } = {}) {
  let sequence = 0;
  return {
    async send(command: PutRecordsCommand): Promise<PutRecordsCommandOutput> {
      const entries = command.input.Records ?? [];
      return {
        $metadata: {},
        FailedRecordCount: 0,
        Records: entries.map((e) => {
          const data = Buffer.from(e.Data ?? []).toString();
          options.log?.push(data);
          return options.fail?.(data)
            ? { ErrorCode: 'ProvisionedThroughputExceededException', ErrorMessage: 'Rate exceeded' }
            : { SequenceNumber: String(++sequence), ShardId: 'shardId-000000000000' };
        }),
      };
    },
  };
}

const records = (n: number): ProducerRecord[] =>
  Array.from({ length: n }, (_, i) => ({ data: Buffer.from(`r${i}`), partitionKey: `user-${i % 1000}` }));

/** A full garbage collection, so each timed run starts from the same heap (not a timing input). */
const collectGarbage: () => void = (() => {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
})();

/**
 * Seconds per record to put `n` records issued at once (no await in between) through a producer
 * that holds 1,000: `n − 1000` of them wait for room.
 */
async function perRecord(n: number): Promise<number> {
  const producer = new KinesisProducer({
    client: instantClient(),
    streamName: 's',
    maxBufferedRecords: 1000,
    lingerMs: 1,
  });
  const batch = records(n);
  collectGarbage();
  const start = performance.now();
  for (const r of batch) void producer.put(r);
  expect(producer.waitingRecords).toBe(n - 1000);
  await producer.flush();
  const seconds = (performance.now() - start) / 1000;
  expect(producer.buffered).toBe(0);
  expect(producer.stats.entriesSent).toBe(n);
  return seconds / n;
}

describe('KinesisProducer back-pressure', () => {
  it('100,000 pending records cost the same per record as 10,000 (linear, not quadratic)', async () => {
    await perRecord(10_000); // warm-up (JIT)
    // Interleaved rounds, best of each size: a loaded machine slows both sizes alike, and the
    // minimum is the run least disturbed by other processes.
    const small: number[] = [];
    const large: number[] = [];
    for (let round = 0; round < 5; round++) {
      small.push(await perRecord(10_000));
      large.push(await perRecord(100_000));
    }
    const ratio = Math.min(...large) / Math.min(...small);
    // Linear: ≈ 1 (the garbage collector's share grows a little with 10× more live records).
    // Quadratic (every freed slot waking every waiter): ≈ 10 and far more.
    const detail = `per record: 10k ${(Math.min(...small) * 1e6).toFixed(2)} µs, 100k ${(Math.min(...large) * 1e6).toFixed(2)} µs`;
    expect(ratio, detail).toBeLessThan(5);
  }, 120_000);

  it('admits waiting records in arrival order, never more than maxBufferedRecords outstanding', async () => {
    const log: string[] = [];
    let peak = 0;
    let producer: KinesisProducer | undefined;
    const client = instantClient({ log });
    const watching = {
      send(command: PutRecordsCommand) {
        peak = Math.max(peak, producer?.buffered ?? 0);
        return client.send(command);
      },
    };
    producer = new KinesisProducer({
      client: watching,
      streamName: 's',
      maxBufferedRecords: 50,
      maxBatchRecords: 10,
      maxInFlightBatches: 1,
      lingerMs: 1,
    });
    const all = records(2000);
    const done = Promise.all(all.map((r) => producer.put(r)));
    expect(producer.buffered).toBe(50);
    expect(producer.waitingRecords).toBe(1950);
    await done;
    expect(peak).toBeLessThanOrEqual(50);
    expect(log).toEqual(all.map((r) => r.data.toString()));
  });
});

describe('KinesisProducer.enqueue', () => {
  it('is fire-and-forget: records reach the stream in order with put() ones, flush() waits for them', async () => {
    const log: string[] = [];
    const producer = new KinesisProducer({
      client: instantClient({ log }),
      streamName: 's',
      maxBufferedRecords: 100,
      maxInFlightBatches: 1,
    });
    const errors: unknown[] = [];
    const all = records(1000);
    const puts: Promise<void>[] = [];
    all.forEach((r, i) => {
      if (i % 3 === 0) puts.push(producer.put(r));
      else expect(producer.enqueue(r, (e) => errors.push(e))).toBeUndefined();
    });
    await Promise.all(puts);
    await producer.flush();
    expect(errors).toEqual([]);
    expect(log).toEqual(all.map((r) => r.data.toString()));
  });

  it('reports a record whose retries are exhausted to the callback, with the record', async () => {
    const producer = new KinesisProducer({
      client: instantClient({ fail: (d) => d === 'r7' }),
      streamName: 'actions',
      maxAttempts: 3,
      sleep: async () => {},
    });
    const failed: [KinesisPutError, string][] = [];
    for (const r of records(20)) producer.enqueue(r, (e, rec) => failed.push([e, rec.data.toString()]));
    await producer.flush();
    expect(failed.map(([, d]) => d)).toEqual(['r7']);
    expect(failed[0]?.[0]).toBeInstanceOf(KinesisPutError);
    expect(failed[0]?.[0].code).toBe('ProvisionedThroughputExceededException');
    expect(failed[0]?.[0].message).toMatch(/after 3 attempts/);
  });

  it('refuses records beyond maxWaitingRecords with ProducerFull, asynchronously, and keeps the rest', async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const client = instantClient();
    const stalled = {
      async send(command: PutRecordsCommand) {
        await gate;
        return client.send(command);
      },
    };
    const producer = new KinesisProducer({
      client: stalled,
      streamName: 'actions',
      maxBufferedRecords: 10,
      maxWaitingRecords: 5,
      lingerMs: 1,
    });
    const refused: string[] = [];
    let sync = true;
    for (const r of records(20)) {
      producer.enqueue(r, (e, rec) => {
        expect(sync).toBe(false);
        expect(e.code).toBe('ProducerFull');
        expect(e.message).toMatch(/10 records are in flight and 5 waiting \(maxWaitingRecords\)/);
        refused.push(rec.data.toString());
      });
    }
    sync = false;
    await Promise.resolve();
    expect(refused).toEqual(['r15', 'r16', 'r17', 'r18', 'r19']);
    expect(producer.stats.recordsRefused).toBe(5);
    release();
    await producer.flush();
    expect(producer.stats.entriesSent).toBe(15);
  });
});
