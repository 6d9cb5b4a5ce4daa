/**
 * The real ingest-actions handler module against a local region (real redis-server, dynalite
 * dead-letter table, real SDK clients): poison records are quarantined with their reason while
 * the good ones in the same batch are counted; KPL-aggregated records are de-aggregated; a Redis
 * outage fails the batch (so Lambda retries) and the retry, after recovery, counts everything once.
 */
import type { KinesisStreamRecord } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { encodeActionEvent } from '../../../shared/counting/event-encode.js';
import { actionEventSchema } from '../../../shared/counting/schema.js';
import { ActionStore } from '../../../shared/counting/store.js';
import { aggregateRecords } from '../../../shared/kinesis/aggregation.js';
import { DeadLetterStore } from '../../../shared/quarantine/dead-letter-store.js';
import { connectRedis, type RedisClient, redisConfigFromEnv } from '../../../shared/redis/connect.js';
import { DAY_MS, systemClock } from '../../../shared/time/clock.js';
import {
  type KinesisHandler,
  loadKinesisHandler,
  testContext,
  testKinesisRecord,
} from '../../support/lambda.js';

let region: LocalRegion;
let handler: KinesisHandler;
let redis: RedisClient;
let store: ActionStore;
let deadLetters: DeadLetterStore;

const context = testContext('ingest-actions');
const kinesisRecord = (data: Buffer, partitionKey = 'pk'): KinesisStreamRecord =>
  testKinesisRecord(data, { partitionKey, functionName: 'ingest-actions' });

function event(userId: string, i: number, overrides: Record<string, unknown> = {}): Buffer {
  return encodeActionEvent({
    userId,
    timestamp: Date.now() - i * 1000,
    insertionId: Buffer.alloc(16, i + 1),
    action: 'impression',
    viewType: 'home',
    ad: 11,
    adGroup: 7,
    campaign: 3,
    advertiser: 1,
    ...overrides,
  });
}

async function impressions(userId: string): Promise<number> {
  const result = await store.count(userId, [
    { ranges: [{ from: Date.now() - DAY_MS, to: Date.now() + DAY_MS }] },
  ]);
  return result[0]?.[0]?.total ?? -1;
}

beforeAll(async () => {
  region = await startLocalRegion({ redisMode: 'standalone' });
  handler = await loadKinesisHandler(region, 'ingestActions');
  redis = connectRedis(redisConfigFromEnv(region.functionEnv('ingestActions')));
  redis.on('error', () => {}); // the outage test kills Redis on purpose
  store = new ActionStore({ redis, clock: systemClock });
  deadLetters = new DeadLetterStore({ client: region.dynamodb, tableName: region.tableName('deadLetters') });
});

afterAll(async () => {
  redis?.disconnect();
  await region?.stop();
});

describe('ingest-actions handler', () => {
  it('counts the good records, quarantines the poison ones with their reason, and keeps the shard moving', async () => {
    const good = Array.from({ length: 20 }, (_, i) => kinesisRecord(event('42', i)));
    const truncated = kinesisRecord(event('42', 100).subarray(0, 40));
    const zeroAction = event('42', 101);
    zeroAction[actionEventSchema.current.byName.get('action')?.offset as number] = 0;
    const badField = kinesisRecord(zeroAction);
    // A producer sending microseconds, and one stamped at the largest valid time (year 10889).
    const stampedAt = (value: bigint) => {
      const data = event('42', 102);
      data.writeBigUInt64BE(value, 1);
      return kinesisRecord(data);
    };
    const micros = BigInt(Date.UTC(2026, 10, 21, 12)) * 1000n;
    const inMicros = stampedAt(micros);
    const farFuture = stampedAt(2n ** 48n - 1n);
    const batch = [...good.slice(0, 10), truncated, inMicros, ...good.slice(10), badField, farFuture];
    const response = await handler({ Records: batch }, context);
    expect(response.batchItemFailures).toEqual([]);
    expect(await impressions('42')).toBe(20);
    const letters = await deadLetters.list('ingest-actions');
    const bySeq = new Map(letters.map((l) => [l.sequenceNumber, l]));
    const t = bySeq.get(`${truncated.kinesis.sequenceNumber}.0`);
    expect(t?.reasonCode).toBe('counting.wrong-length');
    expect(t?.reason).toMatch(/40 bytes: layout v1 is exactly 67 bytes/);
    expect(Buffer.from(t?.data ?? []).equals(Buffer.from(truncated.kinesis.data, 'base64'))).toBe(true);
    const b = bySeq.get(`${badField.kinesis.sequenceNumber}.0`);
    expect(b?.reasonCode).toBe('counting.invalid-field');
    expect(b?.reason).toMatch(/field "action".*is zero/);
    const m = bySeq.get(`${inMicros.kinesis.sequenceNumber}.0`);
    expect(m?.reasonCode).toBe('counting.timestamp-out-of-range');
    expect(m?.reason).toContain(
      `This looks like microseconds since the epoch (${micros} microseconds = 2026-11-21T12:00:00.000Z): send epoch milliseconds.`,
    );
    const f = bySeq.get(`${farFuture.kinesis.sequenceNumber}.0`);
    expect(f?.reasonCode).toBe('counting.timestamp-in-future');
    expect(f?.reason).toContain('is 281474976710655 (+010889-08-02T05:31:50.655Z)');
  });

  it('de-aggregates KPL-aggregated records and dedups them against plain redeliveries', async () => {
    const events = Array.from({ length: 50 }, (_, i) => event('77', i));
    const aggregated = aggregateRecords(events.map((data) => ({ data, partitionKey: '77' })));
    expect(aggregated.length).toBe(1);
    const records = aggregated.map((a) => kinesisRecord(a.data, a.partitionKey));
    expect((await handler({ Records: records }, context)).batchItemFailures).toEqual([]);
    // The same events again, this time as plain records: nothing new.
    const plain = events.slice(0, 10).map((e) => kinesisRecord(e, '77'));
    expect((await handler({ Records: plain }, context)).batchItemFailures).toEqual([]);
    expect(await impressions('77')).toBe(50);
  });

  it('fails the batch while Redis is down and counts it exactly once on the retry', async () => {
    const records = Array.from({ length: 5 }, (_, i) => kinesisRecord(event('99', i)));
    // An outage that lasts (the supervisor of the local region would otherwise revive it at once).
    await region.redis.down(0);
    // All records fail: the batch handler throws (or reports every record) so Lambda retries.
    const outcome = await handler({ Records: records }, context).then(
      (r) => r.batchItemFailures.length,
      () => records.length,
    );
    expect(outcome).toBe(records.length);
    expect(await deadLetters.list('ingest-actions')).toHaveLength(4); // only the first test's poison records
    await region.redis.restart(0);
    // Lambda retries the batch, and again (a redelivery): counted once.
    expect((await handler({ Records: records }, context)).batchItemFailures).toEqual([]);
    expect((await handler({ Records: records }, context)).batchItemFailures).toEqual([]);
    expect(await impressions('99')).toBe(5);
  });
});
