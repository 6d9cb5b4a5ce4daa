/**
 * Quarantined records can be listed and replayed: the real ingest-actions handler quarantines a
 * malformed record; the dead-letters CLI lists it with its reason and puts its exact bytes back on
 * the function's stream (original partition key), deleting it only once it is there.
 */
import { GetRecordsCommand, GetShardIteratorCommand, ListShardsCommand } from '@aws-sdk/client-kinesis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../../cli/dead-letters.js';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { DeadLetterStore } from '../../../shared/quarantine/dead-letter-store.js';
import { replayDeadLetters } from '../../../shared/quarantine/replay.js';
import {
  type KinesisHandler,
  loadKinesisHandler,
  testContext,
  testKinesisRecord,
} from '../../support/lambda.js';

let region: LocalRegion;
let handler: KinesisHandler;
let store: DeadLetterStore;
const garbage = Buffer.from('not an action event');

beforeAll(async () => {
  region = await startLocalRegion();
  handler = await loadKinesisHandler(region, 'ingestActions');
  store = new DeadLetterStore({ client: region.dynamodb, tableName: region.tableName('deadLetters') });
});
afterAll(async () => {
  await region?.stop();
});

async function streamRecords(): Promise<{ data: Buffer; partitionKey: string }[]> {
  const streamName = region.streamName('actions');
  const { Shards } = await region.kinesis.send(new ListShardsCommand({ StreamName: streamName }));
  const out: { data: Buffer; partitionKey: string }[] = [];
  for (const shard of Shards ?? []) {
    const { ShardIterator } = await region.kinesis.send(
      new GetShardIteratorCommand({
        StreamName: streamName,
        ShardId: shard.ShardId,
        ShardIteratorType: 'TRIM_HORIZON',
      }),
    );
    const page = await region.kinesis.send(new GetRecordsCommand({ ShardIterator }));
    for (const r of page.Records ?? []) {
      out.push({ data: Buffer.from(r.Data ?? []), partitionKey: r.PartitionKey ?? '' });
    }
  }
  return out;
}

describe('dead letters', () => {
  it('lists a quarantined record with its reason, then replays its exact bytes onto the stream', async () => {
    const out = await handler(
      { Records: [testKinesisRecord(garbage, { partitionKey: 'user-7', functionName: 'ingest-actions' })] },
      testContext('ingest-actions'),
    );
    expect(out.batchItemFailures).toEqual([]);

    const listed = (await main(['list', '--source', 'ingest-actions'], region.clientEnv)) as {
      reasonCode: string;
      reason: string;
      data: string;
      partitionKey: string;
    }[];
    expect(listed).toHaveLength(1);
    expect(listed[0]?.reasonCode).toMatch(/\S/);
    expect(listed[0]?.reason.length).toBeGreaterThan(10);
    expect(Buffer.from(listed[0]?.data ?? '', 'base64')).toEqual(garbage);

    const result = await main(['replay', '--source', 'ingest-actions'], region.clientEnv);
    expect(result).toEqual({ replayed: 1, failed: [] });
    expect(await store.list('ingest-actions')).toEqual([]);
    expect(await streamRecords()).toContainEqual({ data: garbage, partitionKey: 'user-7' });
  });

  it('keeps a dead letter whose replay failed', async () => {
    await handler(
      { Records: [testKinesisRecord(garbage, { functionName: 'ingest-actions' })] },
      testContext('ingest-actions'),
    );
    const result = await replayDeadLetters({
      store,
      source: 'ingest-actions',
      put: async () => {
        throw new Error('stream throttled');
      },
    });
    expect(result.replayed).toBe(0);
    expect(result.failed.map((f) => f.error)).toEqual(['stream throttled']);
    expect(await store.list('ingest-actions')).toHaveLength(1);
  });

  it('rejects an unknown source with the list of valid ones', async () => {
    await expect(main(['list', '--source', 'nope'], region.clientEnv)).rejects.toThrow(
      /ingest-actions\|track-spend/,
    );
  });
});
