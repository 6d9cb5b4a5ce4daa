/** Shared set-up of the local-runtime integration tests: kinesalite, a stream, records. */
import {
  CreateStreamCommand,
  type KinesisClient,
  PutRecordsCommand,
  waitUntilStreamExists,
} from '@aws-sdk/client-kinesis';
import { type RunningEmulator, startKinesalite } from '../../../local/emulators/aws.js';
import { kinesisClient } from '../../../shared/aws/clients.js';

export interface KinesisFixture {
  readonly emulator: RunningEmulator;
  readonly kinesis: KinesisClient;
  stop(): Promise<void>;
}

export async function startKinesis(): Promise<KinesisFixture> {
  const emulator = await startKinesalite();
  const kinesis = kinesisClient({ region: 'us-east-1', kinesis: emulator.url });
  return {
    emulator,
    kinesis,
    async stop() {
      kinesis.destroy();
      await emulator.stop();
    },
  };
}

let streamCounter = 0;

/** Creates a fresh stream; returns its name. */
export async function createStream(kinesis: KinesisClient, shardCount: number): Promise<string> {
  const StreamName = `test-${process.pid}-${++streamCounter}`;
  await kinesis.send(new CreateStreamCommand({ StreamName, ShardCount: shardCount }));
  await waitUntilStreamExists({ client: kinesis, maxWaitTime: 30, minDelay: 0.05 }, { StreamName });
  return StreamName;
}

/** Puts records in order (one PutRecords call per 500), returns their sequence numbers. */
export async function putRecords(
  kinesis: KinesisClient,
  streamName: string,
  records: readonly { data: string; partitionKey: string }[],
): Promise<{ shardId: string; sequenceNumber: string }[]> {
  const out: { shardId: string; sequenceNumber: string }[] = [];
  for (let i = 0; i < records.length; i += 500) {
    const chunk = records.slice(i, i + 500);
    const res = await kinesis.send(
      new PutRecordsCommand({
        StreamName: streamName,
        Records: chunk.map((r) => ({ Data: Buffer.from(r.data), PartitionKey: r.partitionKey })),
      }),
    );
    if (res.FailedRecordCount) throw new Error(`${res.FailedRecordCount} records failed to put`);
    for (const r of res.Records ?? [])
      out.push({ shardId: r.ShardId ?? '', sequenceNumber: r.SequenceNumber ?? '' });
  }
  return out;
}

/** Settings for tests: fast, explicit. */
export const testSource = {
  batchSize: 10,
  maxBatchingWindowSeconds: 0,
  bisectBatchOnFunctionError: false,
  retryAttempts: 2,
  maxRecordAgeSeconds: -1,
  reportBatchItemFailures: true,
  startingPosition: 'TRIM_HORIZON',
} as const;
