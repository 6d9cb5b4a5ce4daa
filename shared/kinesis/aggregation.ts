/**
 * KPL-compatible aggregation (many user records in one Kinesis record), via the kept
 * `aws-kinesis-agg` library: the consumer side (shared/lambda/kinesis-batch.ts) de-aggregates
 * with the same library, and real KPL consumers understand the format.
 */
import agg from 'aws-kinesis-agg';

/** A user record to put on a stream. */
export interface ProducerRecord {
  readonly data: Uint8Array;
  readonly partitionKey: string;
}

/** An aggregated Kinesis record, with the indexes of the user records it carries. */
export interface AggregatedRecord {
  readonly data: Buffer;
  /** Partition key of the first user record: the whole aggregate lands on that key's shard. */
  readonly partitionKey: string;
  readonly members: readonly number[];
}

// The library's typings omit RecordAggregator; this is the part of it used here.
interface RecordAggregatorLike {
  calculateUserRecordSize(record: { data: Uint8Array; partitionKey: string }): number;
  aggregateRecords(
    records: { data: Uint8Array; partitionKey: string }[],
    forceFlush: boolean,
    onReady: (error: Error | null, encoded?: { data: Buffer; partitionKey: string }) => void,
  ): void;
}
const RecordAggregator = (agg as unknown as { RecordAggregator: new () => RecordAggregatorLike })
  .RecordAggregator;

/** Options of {@link aggregateRecords}. */
export interface AggregationOptions {
  /**
   * Upper bound of one aggregate's user-record bytes. Smaller aggregates spread better over
   * shards and retry cheaper; the library's own limit is the 1 MiB Kinesis record.
   * @default 262144 (256 KiB)
   */
  readonly maxBytes?: number;
}

/** Packs user records into as few KPL aggregates as `maxBytes` allows, preserving order. */
export function aggregateRecords(
  records: readonly ProducerRecord[],
  options: AggregationOptions = {},
): AggregatedRecord[] {
  const maxBytes = options.maxBytes ?? 256 * 1024;
  const sizer = new RecordAggregator();
  const groups: number[][] = [];
  let current: number[] = [];
  let bytes = 0;
  records.forEach((r, i) => {
    const size = sizer.calculateUserRecordSize({ data: r.data, partitionKey: r.partitionKey });
    if (current.length > 0 && bytes + size > maxBytes) {
      groups.push(current);
      current = [];
      bytes = 0;
    }
    current.push(i);
    bytes += size;
  });
  if (current.length > 0) groups.push(current);
  return groups.map((members) => {
    const out: { data: Buffer; partitionKey: string }[] = [];
    let failure: Error | undefined;
    new RecordAggregator().aggregateRecords(
      members.map((i) => {
        const r = records[i] as ProducerRecord;
        return { data: Buffer.from(r.data), partitionKey: r.partitionKey };
      }),
      true,
      (error, encoded) => {
        if (error) failure = error;
        else if (encoded) out.push(encoded);
      },
    );
    if (failure) throw failure;
    const [encoded] = out;
    if (!encoded || out.length !== 1)
      throw new Error(`KPL aggregation produced ${out.length} records for one group`);
    return { data: encoded.data, partitionKey: encoded.partitionKey, members };
  });
}
