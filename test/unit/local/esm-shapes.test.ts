/** Pure pieces of the local event-source mapping: event shape, checkpoint ordering, on-failure file. */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  CheckpointRegressionError,
  compareSequenceNumbers,
  MemoryCheckpointStore,
} from '../../../local/esm/checkpoints.js';
import { kinesisEvent } from '../../../local/esm/lambda-shapes.js';
import { LocalOnFailureDestination } from '../../../local/esm/on-failure.js';

describe('kinesisEvent', () => {
  it('shapes records as Lambda does (eventID shard:seq, base64 data, arrival in seconds)', () => {
    const event = kinesisEvent(
      [
        {
          shardId: 'shardId-000000000001',
          sequenceNumber: '49590338271490256608559692538361571095921575989136588898',
          partitionKey: 'user-9',
          data: Buffer.from('{"a":1}'),
          arrivalMs: 1_763_755_200_123,
        },
      ],
      {
        region: 'us-west-2',
        streamArn: 'arn:aws:kinesis:us-west-2:000000000000:stream/s',
        functionName: 'fn',
      },
    );
    expect(event).toEqual({
      Records: [
        {
          kinesis: {
            kinesisSchemaVersion: '1.0',
            partitionKey: 'user-9',
            sequenceNumber: '49590338271490256608559692538361571095921575989136588898',
            data: 'eyJhIjoxfQ==',
            approximateArrivalTimestamp: 1_763_755_200.123,
          },
          eventSource: 'aws:kinesis',
          eventVersion: '1.0',
          eventID: 'shardId-000000000001:49590338271490256608559692538361571095921575989136588898',
          eventName: 'aws:kinesis:record',
          invokeIdentityArn: 'arn:aws:iam::000000000000:role/fn-role',
          awsRegion: 'us-west-2',
          eventSourceARN: 'arn:aws:kinesis:us-west-2:000000000000:stream/s',
        },
      ],
    });
  });
});

describe('MemoryCheckpointStore', () => {
  it('compares sequence numbers numerically, not as strings', () => {
    expect(compareSequenceNumbers('9', '10')).toBe(-1);
    expect(
      compareSequenceNumbers(
        '49590338271490256608559692538361571095921575989136588898',
        '49590338271490256608559692538361571095921575989136588898',
      ),
    ).toBe(0);
  });

  it('moves forward only', async () => {
    const store = new MemoryCheckpointStore();
    await store.set('shard-0', '100');
    await store.set('shard-0', '200');
    await expect(store.set('shard-0', '150')).rejects.toBeInstanceOf(CheckpointRegressionError);
    expect(await store.get('shard-0')).toBe('200');
    expect(await store.get('shard-1')).toBeUndefined();
  });
});

describe('LocalOnFailureDestination', () => {
  it('appends JSON lines to its file and keeps the records in memory', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'paceline-onfailure-'));
    try {
      const file = join(dir, 'us-east-1', 'on-failure', 'fn.jsonl');
      const destination = new LocalOnFailureDestination({ file });
      const record = {
        requestContext: {
          requestId: 'r',
          functionArn: 'arn',
          condition: 'RecordAgeExceeded',
          approximateInvokeCount: 0,
        },
        responseContext: { statusCode: 0, executedVersion: '$LATEST', functionError: '' },
        version: '1.0',
        timestamp: '2026-11-21T20:00:00.000Z',
        KinesisBatchInfo: {
          shardId: 's',
          startSequenceNumber: '1',
          endSequenceNumber: '2',
          approximateArrivalOfFirstRecord: '2026-11-21T19:00:00.000Z',
          approximateArrivalOfLastRecord: '2026-11-21T19:00:01.000Z',
          batchSize: 2,
          streamArn: 'arn:aws:kinesis:us-east-1:000000000000:stream/x',
        },
      } as const;
      await destination.send(record);
      await destination.send({ ...record, timestamp: '2026-11-21T20:00:01.000Z' });
      const lines = readFileSync(file, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      expect(lines).toEqual(destination.records);
      expect(lines).toHaveLength(2);
      expect(destination.location).toBe(file);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
