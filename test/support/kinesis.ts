/**
 * Reading a (local) Kinesis stream back the way the Lambda consumer sees it: every shard from
 * TRIM_HORIZON, in order, KPL aggregates de-aggregated by the same code the functions use.
 */
import {
  GetRecordsCommand,
  GetShardIteratorCommand,
  type KinesisClient,
  ListShardsCommand,
} from '@aws-sdk/client-kinesis';
import { kinesisEventRecord } from '../../local/esm/lambda-shapes.js';
import { userRecordsOf } from '../../shared/lambda/kinesis-batch.js';

/** One shard's content in stream order. */
export interface ShardContent {
  readonly shardId: string;
  /** Kinesis records on the shard (an aggregate counts once). */
  readonly kinesisRecords: number;
  /** User records (de-aggregated), in order. */
  readonly data: Buffer[];
}

/** Every shard of `streamName`, in stream order. */
export async function readStream(client: KinesisClient, streamName: string): Promise<ShardContent[]> {
  const shards = (await client.send(new ListShardsCommand({ StreamName: streamName }))).Shards ?? [];
  const out: ShardContent[] = [];
  for (const shard of shards) {
    const shardId = shard.ShardId as string;
    const data: Buffer[] = [];
    let kinesisRecords = 0;
    let iterator = (
      await client.send(
        new GetShardIteratorCommand({
          StreamName: streamName,
          ShardId: shardId,
          ShardIteratorType: 'TRIM_HORIZON',
        }),
      )
    ).ShardIterator;
    for (;;) {
      const page = await client.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: 10_000 }));
      const records = page.Records ?? [];
      for (const r of records) {
        kinesisRecords++;
        const lambdaRecord = kinesisEventRecord(
          {
            shardId,
            sequenceNumber: r.SequenceNumber as string,
            partitionKey: r.PartitionKey as string,
            data: r.Data ?? new Uint8Array(),
            arrivalMs: r.ApproximateArrivalTimestamp?.getTime() ?? 0,
          },
          {
            region: 'us-east-1',
            streamArn: `arn:aws:kinesis:us-east-1:000000000000:stream/${streamName}`,
            functionName: 'reader',
          },
        );
        for (const u of userRecordsOf(lambdaRecord)) data.push(u.data);
      }
      if (records.length === 0) break;
      iterator = page.NextShardIterator;
    }
    out.push({ shardId, kinesisRecords, data });
  }
  return out;
}
