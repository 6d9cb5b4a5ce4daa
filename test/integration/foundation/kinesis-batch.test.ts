import { createRequire } from 'node:module';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { KinesisStreamEvent, KinesisStreamRecord } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type RunningEmulator, startDynalite } from '../../../local/emulators/aws.js';
import { provisionTables } from '../../../local/region.js';
import { dynamoDbClient } from '../../../shared/aws/clients.js';
import { kinesisBatchHandler, type UserRecordInput } from '../../../shared/lambda/kinesis-batch.js';
import { DeadLetterStore } from '../../../shared/quarantine/dead-letter-store.js';
import { MalformedRecordError } from '../../../shared/quarantine/quarantine.js';
import { physicalName, regionResources } from '../../../shared/region/resources.js';
import { ManualClock } from '../../../shared/time/clock.js';
import { testContext, testKinesisRecord } from '../../support/lambda.js';

process.env.POWERTOOLS_METRICS_DISABLED = 'true';

const require = createRequire(import.meta.url);
const { RecordAggregator } = require('aws-kinesis-agg/lib/kpl-agg.js') as {
  RecordAggregator: new () => {
    addUserRecord(r: { partitionKey: string; data: Buffer }): void;
    build(): { partitionKey: string; data: Buffer };
  };
};

const SHARD = 'shardId-000000000001';
const record = (data: Buffer | string, partitionKey = 'pk'): KinesisStreamRecord =>
  testKinesisRecord(Buffer.from(data), { partitionKey, shardId: SHARD, arrivalMs: 1_700_000_000_500 });
const context = testContext();

let dynalite: RunningEmulator;
let client: DynamoDBClient;
let store: DeadLetterStore;
beforeAll(async () => {
  dynalite = await startDynalite();
  client = dynamoDbClient({ region: 'us-east-1', dynamodb: dynalite.url });
  await provisionTables(client);
  store = new DeadLetterStore({ client, tableName: physicalName(regionResources.tables.deadLetters.suffix) });
});
afterAll(async () => {
  client.destroy();
  await dynalite.stop();
});

function build(handleRecord: (r: UserRecordInput) => Promise<void>, source: string, deadLetters = store) {
  const metrics = new Metrics({ namespace: 'Paceline', serviceName: source });
  const addMetric = vi.spyOn(metrics, 'addMetric');
  const handler = kinesisBatchHandler({
    source,
    deadLetters,
    clock: new ManualClock(1_700_000_100_000),
    logger: new Logger({ serviceName: source, logLevel: 'SILENT' }),
    metrics,
    handleRecord,
  });
  return { handler, addMetric };
}

describe('kinesisBatchHandler', () => {
  it('quarantines malformed records with their reason, fails only transient ones, handles the rest', async () => {
    const handled: string[] = [];
    const { handler, addMetric } = build(async (r) => {
      const text = r.data.toString();
      if (text.startsWith('bad'))
        throw new MalformedRecordError('test.bad', `record says ${text}: fix the producer`);
      if (text === 'redis-down') throw new Error('ECONNREFUSED');
      handled.push(text);
    }, 'mixed');
    const records = [record('a'), record('bad-1'), record('b'), record('redis-down'), record('c')];
    const out = await handler({ Records: records } as KinesisStreamEvent, context);

    expect(out.batchItemFailures).toEqual([{ itemIdentifier: records[3]?.kinesis.sequenceNumber }]);
    expect(handled.sort()).toEqual(['a', 'b', 'c']);
    const letters = await store.list('mixed');
    expect(letters).toHaveLength(1);
    expect(letters[0]).toMatchObject({
      reasonCode: 'test.bad',
      reason: 'record says bad-1: fix the producer',
      shardId: SHARD,
      quarantinedAt: 1_700_000_100_000,
      arrivedAt: 1_700_000_000_500,
    });
    expect(Buffer.from(letters[0]?.data ?? []).toString()).toBe('bad-1');
    expect(addMetric).toHaveBeenCalledWith('RecordsQuarantined', 'Count', 1);
  });

  it('a redelivered malformed record is stored once', async () => {
    const { handler } = build(async () => {
      throw new MalformedRecordError('test.bad', 'always bad');
    }, 'redelivery');
    const r = record('bad');
    await handler({ Records: [r] } as KinesisStreamEvent, context);
    await handler({ Records: [r] } as KinesisStreamEvent, context);
    expect(await store.list('redelivery')).toHaveLength(1);
  });

  it('throws when every record fails, so bisect-on-error can isolate the batch', async () => {
    const { handler } = build(async () => {
      throw new Error('down');
    }, 'all-fail');
    await expect(
      handler({ Records: [record('x'), record('y')] } as KinesisStreamEvent, context),
    ).rejects.toThrow();
  });

  it('fails (does not drop) a malformed record when the dead-letter store is unreachable', async () => {
    const broken = new DeadLetterStore({ client, tableName: 'no-such-table' });
    const { handler } = build(
      async (r) => {
        if (r.data.toString() === 'bad') throw new MalformedRecordError('test.bad', 'bad');
      },
      'dlq-down',
      broken,
    );
    const records = [record('ok'), record('bad')];
    const out = await handler({ Records: records } as KinesisStreamEvent, context);
    expect(out.batchItemFailures).toEqual([{ itemIdentifier: records[1]?.kinesis.sequenceNumber }]);
  });

  it('de-aggregates KPL records and quarantines a corrupt aggregate', async () => {
    const agg = new RecordAggregator();
    for (const text of ['u1', 'u2', 'u3'])
      agg.addUserRecord({ partitionKey: `p-${text}`, data: Buffer.from(text) });
    const encoded = agg.build();
    const seen: Array<[string, string, number]> = [];
    const { handler } = build(async (r) => {
      seen.push([r.data.toString(), r.partitionKey, r.subSequenceNumber]);
    }, 'kpl');
    const good = record(encoded.data, encoded.partitionKey);
    // KPL magic number followed by garbage: looks aggregated, cannot be decoded.
    const corrupt = record(Buffer.concat([Buffer.from([0xf3, 0x89, 0x9a, 0xc2]), Buffer.alloc(40, 7)]));
    const out = await handler({ Records: [good, corrupt] } as KinesisStreamEvent, context);
    expect(out.batchItemFailures).toEqual([]);
    expect(seen.sort()).toEqual([
      ['u1', 'p-u1', 0],
      ['u2', 'p-u2', 1],
      ['u3', 'p-u3', 2],
    ]);
    const letters = await store.list('kpl');
    expect(letters.map((l) => l.reasonCode)).toEqual(['kpl.corrupt-aggregate']);
  });
});
