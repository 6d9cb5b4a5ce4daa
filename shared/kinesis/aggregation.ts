/**
 * KPL-compatible aggregation (many user records in one Kinesis record), written here so the ad
 * servers' client needs no protobuf library: the format is the KPL's (`0xF3899AC2` magic, the
 * protobuf `AggregatedRecord` with its partition-key table and records, the MD5 of the protobuf
 * bytes). The consumer side (shared/lambda/kinesis-batch.ts) de-aggregates with the
 * `aws-kinesis-agg` library, and real KPL consumers understand it too.
 *
 * The encoding is byte for byte the library's aggregator's, except for one of its bugs: it
 * writes its partition-key table in JavaScript object-key order, which puts integer-like keys
 * (our actions' partition keys are decimal user ids) in numeric order while the records point at
 * the insertion order — `"20"` then `"10"` came back as `"10"` and `"20"`. Here the table is in
 * insertion order, as the records' indexes assume. `test/unit/kinesis/aggregation.test.ts`
 * compares both.
 */
import { createHash } from 'node:crypto';

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

/** Options of {@link aggregateRecords}. */
export interface AggregationOptions {
  /**
   * Upper bound of one aggregate's user-record bytes. Smaller aggregates spread better over
   * shards and retry cheaper; the format's own limit is the 1 MiB Kinesis record.
   * @default 262144 (256 KiB)
   */
  readonly maxBytes?: number;
}

/** The KPL aggregation magic number (format 0.9.0). */
export const KPL_MAGIC = Buffer.from([0xf3, 0x89, 0x9a, 0xc2]);

/** The largest aggregate payload: 1 MiB minus the magic number and the 16-byte MD5. */
const MAX_AGGREGATE_BYTES = 1024 * 1024 - 16 - KPL_MAGIC.length;

function varintSize(value: number): number {
  let size = 1;
  for (let v = value; v >= 128; v = Math.floor(v / 128)) size++;
  return size;
}

function writeVarint(buf: Buffer, offset: number, value: number): number {
  let at = offset;
  let v = value;
  while (v >= 128) {
    buf[at++] = (v % 128) | 0x80;
    v = Math.floor(v / 128);
  }
  buf[at++] = v;
  return at;
}

/** Bytes of a `Record` message (partition-key index, data), without its own tag and length. */
function innerSize(keyIndex: number, dataLength: number): number {
  return 1 + varintSize(keyIndex) + 1 + varintSize(dataLength) + dataLength;
}

/** Encodes user records as one KPL aggregate: magic, protobuf `AggregatedRecord`, MD5. */
export function encodeAggregate(records: readonly ProducerRecord[]): Buffer {
  const keys = new Map<string, number>();
  const keyBytes: Buffer[] = [];
  for (const r of records) {
    if (!keys.has(r.partitionKey)) {
      keys.set(r.partitionKey, keys.size);
      keyBytes.push(Buffer.from(r.partitionKey));
    }
  }
  let size = 0;
  for (const k of keyBytes) size += 1 + varintSize(k.length) + k.length;
  const inners = records.map((r) => innerSize(keys.get(r.partitionKey) as number, r.data.length));
  for (const inner of inners) size += 1 + varintSize(inner) + inner;
  const body = Buffer.allocUnsafe(size);
  let at = 0;
  for (const k of keyBytes) {
    body[at++] = 0x0a; // field 1 (partition_key_table), length-delimited
    at = writeVarint(body, at, k.length);
    at += k.copy(body, at);
  }
  records.forEach((r, i) => {
    body[at++] = 0x1a; // field 3 (records), length-delimited
    at = writeVarint(body, at, inners[i] as number);
    body[at++] = 0x08; // Record field 1 (partition_key_index), varint
    at = writeVarint(body, at, keys.get(r.partitionKey) as number);
    body[at++] = 0x1a; // Record field 3 (data), length-delimited
    at = writeVarint(body, at, r.data.length);
    body.set(r.data, at);
    at += r.data.length;
  });
  const md5 = createHash('md5').update(body).digest();
  return Buffer.concat([KPL_MAGIC, body, md5]);
}

/**
 * Packs user records into as few KPL aggregates as `maxBytes` allows, preserving order. Sizes are
 * exact (a repeated partition key costs its table entry once; indexes past 127 take two bytes),
 * so no aggregate's protobuf exceeds `maxBytes` — nor the 1 MiB Kinesis record.
 */
export function aggregateRecords(
  records: readonly ProducerRecord[],
  options: AggregationOptions = {},
): AggregatedRecord[] {
  const maxBytes = Math.min(options.maxBytes ?? 256 * 1024, MAX_AGGREGATE_BYTES);
  const groups: number[][] = [];
  let current: number[] = [];
  let keys = new Map<string, number>();
  let bytes = 0;
  const added = (r: ProducerRecord, group: Map<string, number>) => {
    const index = group.get(r.partitionKey);
    const key = Buffer.byteLength(r.partitionKey);
    const entry = index === undefined ? 1 + varintSize(key) + key : 0;
    const inner = innerSize(index ?? group.size, r.data.length);
    return entry + 1 + varintSize(inner) + inner;
  };
  records.forEach((r, i) => {
    if (r.partitionKey === '') throw new Error(`Record ${i}: KPL aggregation needs a partition key.`);
    let size = added(r, keys);
    if (current.length > 0 && bytes + size > maxBytes) {
      groups.push(current);
      current = [];
      keys = new Map();
      bytes = 0;
      size = added(r, keys);
    }
    if (size > MAX_AGGREGATE_BYTES)
      throw new Error(`Record ${i} (${size} bytes) does not fit in one Kinesis record.`);
    if (!keys.has(r.partitionKey)) keys.set(r.partitionKey, keys.size);
    current.push(i);
    bytes += size;
  });
  if (current.length > 0) groups.push(current);
  return groups.map((members) => {
    const group = members.map((i) => records[i] as ProducerRecord);
    return { data: encodeAggregate(group), partitionKey: group[0]?.partitionKey as string, members };
  });
}
