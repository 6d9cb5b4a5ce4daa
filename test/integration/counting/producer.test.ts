/**
 * The Kinesis producer against kinesalite with the real SDK client: every record lands exactly
 * once (plain and KPL-aggregated), only failed entries are retried, exhausted retries reject just
 * those records, and put() applies back-pressure. Partial PutRecords failures cannot be provoked
 * in kinesalite, so a wrapper around the real client withholds chosen entries from it and reports
 * them failed — exactly what Kinesis does for a throttled shard.
 */
import {
  CreateStreamCommand,
  type KinesisClient,
  PutRecordsCommand,
  type PutRecordsCommandOutput,
  waitUntilStreamExists,
} from '@aws-sdk/client-kinesis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningEmulator, startKinesalite } from '../../../local/emulators/aws.js';
import { kinesisClient } from '../../../shared/aws/clients.js';
import { KinesisProducer, KinesisPutError } from '../../../shared/kinesis/producer.js';
import { readStream } from '../../support/kinesis.js';

let kinesalite: RunningEmulator;
let client: KinesisClient;
let streamNo = 0;

beforeAll(async () => {
  kinesalite = await startKinesalite();
  client = kinesisClient({ region: 'us-east-1', kinesis: kinesalite.url });
});
afterAll(async () => {
  client?.destroy();
  await kinesalite?.stop();
});

async function newStream(): Promise<string> {
  const StreamName = `producer-test-${++streamNo}`;
  await client.send(new CreateStreamCommand({ StreamName, ShardCount: 2 }));
  await waitUntilStreamExists({ client, maxWaitTime: 30, minDelay: 0.05 }, { StreamName });
  return StreamName;
}

/** All user records on the stream (de-aggregated like the Lambda consumer does). */
async function readAll(StreamName: string): Promise<{ kinesisRecords: number; data: string[] }> {
  const shards = await readStream(client, StreamName);
  return {
    kinesisRecords: shards.reduce((n, s) => n + s.kinesisRecords, 0),
    data: shards.flatMap((s) => s.data.map((d) => d.toString('utf8'))),
  };
}

const records = (n: number, tag: string) =>
  Array.from({ length: n }, (_, i) => ({ data: Buffer.from(`${tag}-${i}`), partitionKey: `user-${i % 97}` }));

/** Wraps the real client: entries whose data matches `fail` are withheld and reported failed. */
function flakyClient(fail: (data: string, attempt: number) => boolean) {
  const calls: string[][] = [];
  const attempts = new Map<string, number>();
  const wrapper = {
    calls,
    async send(command: PutRecordsCommand): Promise<PutRecordsCommandOutput> {
      const entries = command.input.Records ?? [];
      calls.push(entries.map((e) => Buffer.from(e.Data ?? []).toString('utf8')));
      const verdicts = entries.map((e) => {
        const key = Buffer.from(e.Data ?? []).toString('utf8');
        const attempt = (attempts.get(key) ?? 0) + 1;
        attempts.set(key, attempt);
        return fail(key, attempt);
      });
      const pass = entries.filter((_, i) => !verdicts[i]);
      const real = pass.length
        ? await client.send(new PutRecordsCommand({ StreamName: command.input.StreamName, Records: pass }))
        : { Records: [], FailedRecordCount: 0, $metadata: {} };
      let j = 0;
      return {
        $metadata: {},
        FailedRecordCount: verdicts.filter(Boolean).length,
        Records: verdicts.map((failed) =>
          failed
            ? { ErrorCode: 'ProvisionedThroughputExceededException', ErrorMessage: 'Rate exceeded for shard' }
            : (real.Records?.[j++] ?? {}),
        ),
      };
    },
  };
  return wrapper;
}

describe('KinesisProducer', () => {
  it('puts every record exactly once in batches', async () => {
    const StreamName = await newStream();
    const producer = new KinesisProducer({ client, streamName: StreamName, maxBatchRecords: 100 });
    await producer.putAll(records(1234, 'plain'));
    const { data } = await readAll(StreamName);
    expect(data.sort()).toEqual(
      records(1234, 'plain')
        .map((r) => r.data.toString())
        .sort(),
    );
    expect(producer.stats.putRecordsCalls).toBeGreaterThanOrEqual(13);
    expect(producer.buffered).toBe(0);
  });

  it('KPL-aggregates when asked, and the consumer de-aggregates the same records', async () => {
    const StreamName = await newStream();
    const producer = new KinesisProducer({ client, streamName: StreamName, aggregate: { maxBytes: 4096 } });
    await producer.putAll(records(2000, 'agg'));
    const { kinesisRecords, data } = await readAll(StreamName);
    expect(data.sort()).toEqual(
      records(2000, 'agg')
        .map((r) => r.data.toString())
        .sort(),
    );
    expect(kinesisRecords).toBeLessThan(100);
  });

  it('retries only the failed entries', async () => {
    const StreamName = await newStream();
    // Every 3rd record fails twice, then goes through.
    const flaky = flakyClient((data, attempt) => Number(data.split('-')[1]) % 3 === 0 && attempt <= 2);
    const producer = new KinesisProducer({ client: flaky, streamName: StreamName, sleep: async () => {} });
    await producer.putAll(records(300, 'retry'));
    expect(flaky.calls).toHaveLength(3);
    expect(flaky.calls[0]).toHaveLength(300);
    expect(flaky.calls[1]).toEqual(flaky.calls[0]?.filter((d) => Number(d.split('-')[1]) % 3 === 0));
    expect(flaky.calls[2]).toEqual(flaky.calls[1]);
    const { data } = await readAll(StreamName);
    expect(data.sort()).toEqual(
      records(300, 'retry')
        .map((r) => r.data.toString())
        .sort(),
    );
  });

  it('rejects only the records whose retries are exhausted, naming the Kinesis error', async () => {
    const StreamName = await newStream();
    const flaky = flakyClient((data) => data === 'doomed-7');
    const producer = new KinesisProducer({
      client: flaky,
      streamName: StreamName,
      maxAttempts: 4,
      sleep: async () => {},
    });
    const results = await Promise.allSettled(records(20, 'doomed').map((r) => producer.put(r)));
    const rejected = results.flatMap((r, i) => (r.status === 'rejected' ? [[i, r.reason] as const] : []));
    expect(rejected.map(([i]) => i)).toEqual([7]);
    const error = rejected[0]?.[1] as KinesisPutError;
    expect(error).toBeInstanceOf(KinesisPutError);
    expect(error.code).toBe('ProvisionedThroughputExceededException');
    expect(error.message).toMatch(/after 4 attempts/);
    expect(flaky.calls.slice(1).every((c) => c.length === 1 && c[0] === 'doomed-7')).toBe(true);
    expect((await readAll(StreamName)).data).toHaveLength(19);
  });

  it('enqueue() (fire and forget) puts every record exactly once; a record that fails reaches the callback', async () => {
    const StreamName = await newStream();
    const flaky = flakyClient((data) => data === 'fire-13');
    const producer = new KinesisProducer({
      client: flaky,
      streamName: StreamName,
      maxBufferedRecords: 200,
      maxAttempts: 2,
      sleep: async () => {},
    });
    const failed: string[] = [];
    for (const r of records(1500, 'fire')) producer.enqueue(r, (_e, rec) => failed.push(rec.data.toString()));
    await producer.flush();
    expect(failed).toEqual(['fire-13']);
    const { data } = await readAll(StreamName);
    expect(data.sort()).toEqual(
      records(1500, 'fire')
        .map((r) => r.data.toString())
        .filter((d) => d !== 'fire-13')
        .sort(),
    );
  });

  it('applies back-pressure: never more than maxBufferedRecords outstanding', async () => {
    const StreamName = await newStream();
    let peak = 0;
    let producer: KinesisProducer | undefined;
    const slow = {
      async send(command: PutRecordsCommand) {
        peak = Math.max(peak, producer?.buffered ?? 0);
        await new Promise((r) => setTimeout(r, 5));
        return client.send(command);
      },
    };
    producer = new KinesisProducer({
      client: slow,
      streamName: StreamName,
      maxBufferedRecords: 50,
      maxBatchRecords: 10,
      maxInFlightBatches: 2,
    });
    let accepted = 0;
    const puts = records(400, 'bp').map((r) =>
      producer.put(r).then(() => {
        accepted++;
      }),
    );
    await new Promise((r) => setTimeout(r, 20));
    expect(producer.buffered).toBeLessThanOrEqual(50);
    await Promise.all(puts);
    expect(accepted).toBe(400);
    expect(peak).toBeLessThanOrEqual(50);
    expect((await readAll(StreamName)).data).toHaveLength(400);
  });
});
