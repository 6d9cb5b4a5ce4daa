/**
 * The client's own KPL aggregation against the `aws-kinesis-agg` library the consumers
 * de-aggregate with: byte for byte the library aggregator's output (non-numeric partition keys:
 * the spend stream's `<campaign>/<bid>`), the same grouping, and every aggregate comes back
 * through the library's de-aggregation as the records that went in — partition keys included,
 * also the integer-like ones (the actions stream's decimal user ids) that the library's own
 * aggregator gets wrong.
 */
import { createHash } from 'node:crypto';
import agg, { deaggregateSync, type UserRecord } from 'aws-kinesis-agg';
import { describe, expect, it } from 'vitest';
import {
  aggregateRecords,
  encodeAggregate,
  KPL_MAGIC,
  type ProducerRecord,
} from '../../../shared/kinesis/aggregation.js';

interface LibraryAggregator {
  aggregateRecords(
    records: { data: Buffer; partitionKey: string }[],
    forceFlush: boolean,
    onReady: (error: Error | null, encoded?: { data: Buffer; partitionKey: string }) => void,
  ): void;
}
const LibraryRecordAggregator = (agg as unknown as { RecordAggregator: new () => LibraryAggregator })
  .RecordAggregator;

/** The library's aggregate of `records` (one group). */
function libraryAggregate(records: readonly ProducerRecord[]): { data: Buffer; partitionKey: string } {
  const out: { data: Buffer; partitionKey: string }[] = [];
  new LibraryRecordAggregator().aggregateRecords(
    records.map((r) => ({ data: Buffer.from(r.data), partitionKey: r.partitionKey })),
    true,
    (error, encoded) => {
      if (error) throw error;
      if (encoded) out.push(encoded);
    },
  );
  expect(out).toHaveLength(1);
  return out[0] as { data: Buffer; partitionKey: string };
}

/** What a consumer gets back from one aggregate (the library's de-aggregation). */
function deaggregate(data: Buffer, partitionKey: string): { data: string; partitionKey: string }[] {
  let out: UserRecord[] = [];
  deaggregateSync(
    { data: data.toString('base64'), partitionKey, sequenceNumber: '1' } as never,
    true,
    (error, records) => {
      if (error) throw error;
      out = records ?? [];
    },
  );
  return out.map((r) => ({
    data: Buffer.from(r.data, 'base64').toString('latin1'),
    partitionKey: r.partitionKey,
  }));
}

/** A deterministic pseudo-random generator (a test's inputs must be reproducible). */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1_664_525 + 1_013_904_223) >>> 0;
    return s / 2 ** 32;
  };
}

function records(count: number, key: (i: number) => string, size: (i: number) => number, seed = 1) {
  const random = prng(seed);
  return Array.from({ length: count }, (_, i) => ({
    partitionKey: key(i),
    data: Uint8Array.from({ length: size(i) }, () => Math.floor(random() * 256)),
  }));
}

const spendKey = (i: number) => `camp-${i % 7}/bid-${i}`;

describe('KPL aggregation', () => {
  it('encodes byte for byte as the library does (spend keys, repeated keys, empty and 200 KB data)', () => {
    const cases: ProducerRecord[][] = [
      records(1, spendKey, () => 10),
      records(
        50,
        (i) => `camp-${i % 3}/shared`,
        (i) => i * 3,
      ), // keys repeat: one table entry each
      records(5, spendKey, (i) => (i === 2 ? 0 : 130)), // an empty payload; a length past one varint byte
      records(3, spendKey, () => 200_000), // lengths of three varint bytes
      records(
        300,
        (i) => `k${i}`.repeat(40),
        () => 17,
      ), // 300 keys: indexes past one varint byte
    ];
    for (const input of cases) {
      const mine = encodeAggregate(input);
      const theirs = libraryAggregate(input);
      expect(mine.equals(theirs.data)).toBe(true);
      expect(mine.subarray(0, 4)).toEqual(KPL_MAGIC);
      const body = mine.subarray(4, mine.length - 16);
      expect(mine.subarray(mine.length - 16)).toEqual(createHash('md5').update(body).digest());
    }
  });

  it('cuts groups at maxBytes exactly, each encoded as the library would, each de-aggregating to its records', () => {
    const input = records(2_000, spendKey, (i) => 50 + (i % 400), 7);
    const groups = aggregateRecords(input, { maxBytes: 64 * 1024 });
    // The last group holds what is left; every other one is full.
    groups.pop();
    expect(groups.length).toBeGreaterThan(5);
    const all = aggregateRecords(input, { maxBytes: 64 * 1024 });
    expect(all.flatMap((g) => g.members)).toEqual(input.map((_, i) => i)); // order kept, none lost
    for (const g of groups) {
      const group = g.members.map((i) => input[i] as ProducerRecord);
      expect(g.partitionKey).toBe(group[0]?.partitionKey);
      expect(g.data.equals(libraryAggregate(group).data)).toBe(true);
      expect(deaggregate(g.data, g.partitionKey)).toEqual(
        group.map((r) => ({ data: Buffer.from(r.data).toString('latin1'), partitionKey: r.partitionKey })),
      );
      expect(g.data.length).toBeLessThanOrEqual(64 * 1024 + 4 + 16); // magic and MD5 around the bound
      expect(g.data.length).toBeGreaterThan(60 * 1024); // and filled close to it
    }
  });

  it('keeps integer-like partition keys (user ids) with their records, where the library mixes them up', () => {
    const input = records(
      6,
      (i) => String([20, 10, 7, 20, 3_000_000_000, 5][i]),
      (i) => i + 1,
    );
    const expected = input.map((r) => ({
      data: Buffer.from(r.data).toString('latin1'),
      partitionKey: r.partitionKey,
    }));
    expect(deaggregate(encodeAggregate(input), '20')).toEqual(expected);
    // The library's aggregator writes its key table in object-key order (integer keys sorted):
    // the same records come back under other users' keys.
    const theirs = libraryAggregate(input);
    expect(deaggregate(theirs.data, theirs.partitionKey)).not.toEqual(expected);
  });

  it('refuses a record without a partition key or too big for one Kinesis record', () => {
    expect(() => aggregateRecords([{ partitionKey: '', data: new Uint8Array(1) }])).toThrow(/partition key/);
    expect(() => aggregateRecords([{ partitionKey: 'k', data: new Uint8Array(1024 * 1024) }])).toThrow(
      /does not fit/,
    );
  });
});
