/**
 * docs/reliability.md, fault 2 (counting half) and the action-time half of fault 4, through the real
 * ingest-actions handler on real Redis: a user's keys are a group (the dedup set and the packed
 * log readers GET). With one of them gone — evicted, or deleted by hand — a redelivery must still
 * count once: the store notices the partial group and rebuilds the missing half instead of
 * appending duplicates (set lost) or nothing (log lost). An event stamped in seconds is
 * quarantined with its reason instead of being skipped as "expired".
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { encodeActionEvent } from '../../../shared/counting/event-encode.js';
import { ActionStore } from '../../../shared/counting/store.js';
import { DeadLetterStore } from '../../../shared/quarantine/dead-letter-store.js';
import { connectRedis, type RedisClient, redisConfigFromEnv } from '../../../shared/redis/connect.js';
import { MINUTE_MS, systemClock } from '../../../shared/time/clock.js';
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

beforeAll(async () => {
  region = await startLocalRegion({ redisMode: 'standalone' });
  handler = await loadKinesisHandler(region, 'ingestActions');
  redis = connectRedis(redisConfigFromEnv(region.functionEnv('ingestActions')));
  store = new ActionStore({ redis, clock: systemClock });
});

afterAll(async () => {
  redis?.disconnect();
  await region?.stop();
});

const context = testContext('ingest-actions');

function events(userId: string, n: number, timestamp = (i: number) => Date.now() - (i + 1) * MINUTE_MS) {
  return Array.from({ length: n }, (_, i) =>
    encodeActionEvent({
      userId,
      timestamp: timestamp(i),
      insertionId: (BigInt(i + 1) * 0x1234567n).toString(16).padStart(32, '0'),
      action: 'impression',
      ad: 1 + i,
      adGroup: 10,
      campaign: 100,
      advertiser: 1000,
    }),
  );
}

async function deliver(records: Buffer[]): Promise<void> {
  const out = await handler(
    { Records: records.map((d) => testKinesisRecord(d, { functionName: 'ingest-actions' })) },
    context,
  );
  expect(out.batchItemFailures).toEqual([]);
}

async function impressions(userId: string): Promise<number> {
  return (await store.countText(`SELECT COUNT(*) FROM actions WHERE user = ${userId} AND time > now() - 1d`))
    .total;
}

describe("partial eviction of a user's key group", () => {
  it('set deleted, log kept: 20 redelivered events still count 20', async () => {
    const batch = events('7001', 20);
    await deliver(batch);
    expect(await impressions('7001')).toBe(20);
    await redis.del(store.key('7001'));
    await deliver(batch);
    expect(await impressions('7001')).toBe(20);
    expect(await redis.zcard(store.key('7001'))).toBe(20);
    // A new event after the repair still counts.
    await deliver(events('7001', 21).slice(20));
    expect(await impressions('7001')).toBe(21);
  });

  it('log deleted, set kept: 20 redelivered events still count 20', async () => {
    const batch = events('7002', 20);
    await deliver(batch);
    await redis.del(store.logKey('7002'));
    await deliver(batch);
    expect(await impressions('7002')).toBe(20);
    expect((await store.eventLog('7002')).length).toBe(20 * (batch[0] as Buffer).length - 20 * 8);
  });
});

describe('action event times', () => {
  it('an event stamped in seconds is quarantined with its reason, not skipped as expired', async () => {
    const [record] = events('7003', 1, () => Math.floor(Date.now() / 1000));
    await deliver([record as Buffer]);
    expect(await impressions('7003')).toBe(0);
    const letters = await new DeadLetterStore({
      client: region.dynamodb,
      tableName: region.tableName('deadLetters'),
    }).list('ingest-actions');
    const letter = letters.find((l) => Buffer.from(l.data).equals(record as Buffer));
    expect(letter?.reasonCode).toBe('counting.timestamp-not-ms');
    expect(letter?.reason).toMatch(/seconds × 1000/);
  });
});
