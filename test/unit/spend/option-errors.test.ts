/**
 * Options a user gives the spend, counting and raw Redis building blocks are refused with a
 * PacelineError of a stable code that names the option and what to give — never a bare
 * RangeError. No server is reached: the Redis client is lazy and never connects.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { IngestCoalescer, InvalidIngestOptionsError } from '../../../shared/counting/ingest.js';
import type { ActionStore } from '../../../shared/counting/store.js';
import { PacelineError } from '../../../shared/errors.js';
import type { RedisClient } from '../../../shared/redis/connect.js';
import { InvalidRawTimeoutError } from '../../../shared/redis/resp/errors.js';
import { DEFAULT_TIMEOUT_MS, timeoutMsOption } from '../../../shared/redis/resp/timeout.js';
import {
  BudgetGuard,
  type BudgetGuardOptions,
  InvalidGuardOptionsError,
} from '../../../shared/spend/guard.js';
import { InvalidOutboxOptionsError, SpendOutbox } from '../../../shared/spend/outbox.js';
import { ManualClock } from '../../../shared/time/clock.js';

const redis = new Redis({ lazyConnect: true, port: 9, maxRetriesPerRequest: 0 }) as unknown as RedisClient;
afterAll(() => redis.disconnect());

/** The error `build` throws (fails when it throws none). */
function thrown(build: () => unknown): PacelineError {
  let error: unknown;
  try {
    build();
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(PacelineError);
  return error as PacelineError;
}

const guardWith = (extra: Partial<BudgetGuardOptions>) => () =>
  new BudgetGuard({
    redis,
    clock: new ManualClock(0),
    initPlanDay: async () => undefined,
    ...extra,
  });

describe('BudgetGuard options', () => {
  it.each([
    [{ inFlightWeight: 0 }, /^inFlightWeight 0 must be in \(0, 1\]\.$/],
    [{ inFlightWeight: 1.5 }, /^inFlightWeight 1\.5 must be in \(0, 1\]\.$/],
    [{ releaseCap: 0.06 }, /^releaseCap 0\.06 must be a fraction of the budget in \[0, 0\.05\]\.$/],
    [{ releaseCap: -0.01 }, /^releaseCap -0\.01 must be/],
    [
      { leaseAheadMs: 600_001 },
      /^leaseAheadMs 600001 exceeds the in-flight TTL \(600000 ms\): give at most the TTL/,
    ],
    [{ prefetchBelow: 0 }, /^prefetchBelow is 0: give a fraction of F in \(0, 1\] \(default 0\.5\)\.$/],
    [{ prefetchBelow: 1.2 }, /^prefetchBelow is 1\.2: give a fraction/],
    [
      { allocations: 'loose' as unknown as BudgetGuardOptions['allocations'] },
      /^allocations is loose: give strict \(several regions\) or off\.$/,
    ],
  ])('%j: InvalidGuardOptionsError (spend.invalid-guard-options)', (extra, message) => {
    const error = thrown(guardWith(extra));
    expect(error).toBeInstanceOf(InvalidGuardOptionsError);
    expect(error.name).toBe('InvalidGuardOptionsError');
    expect(error.code).toBe('spend.invalid-guard-options');
    expect(error.message).toMatch(message);
  });

  it('accepts the edges of every range', async () => {
    const guard = guardWith({
      inFlightWeight: 1,
      releaseCap: 0.05,
      leaseAheadMs: 600_000,
      prefetchBelow: 1,
    })();
    await guard.close();
  });
});

describe('SpendOutbox options', () => {
  it('a region that is no region name: InvalidOutboxOptionsError (spend.invalid-outbox-options)', () => {
    const client = new DynamoDBClient({ region: 'us-east-1' });
    const error = thrown(() => new SpendOutbox({ client, tableName: 't', region: 'US East' }));
    expect(error).toBeInstanceOf(InvalidOutboxOptionsError);
    expect(error.code).toBe('spend.invalid-outbox-options');
    expect(error.message).toMatch(
      /^Spend outbox region "US East" is not a region name like us-east-1: give /,
    );
    expect(() => new SpendOutbox({ client, tableName: 't', region: 'us-east-1' })).not.toThrow();
    client.destroy();
  });
});

describe('IngestCoalescer options', () => {
  // The store is not used by the constructor; nothing is ingested here.
  const store = {} as ActionStore;

  it.each([0, -1, 1.5, Number.NaN])('maxPending %s: InvalidIngestOptionsError', (maxPending) => {
    const error = thrown(() => new IngestCoalescer({ store, maxPending }));
    expect(error).toBeInstanceOf(InvalidIngestOptionsError);
    expect(error.code).toBe('counting.invalid-ingest-options');
    expect(error.message).toBe(`maxPending is ${maxPending}: give a positive integer (default 2000).`);
  });

  it('accepts 1', () => {
    expect(() => new IngestCoalescer({ store, maxPending: 1 })).not.toThrow();
  });
});

describe('raw timeoutMs option', () => {
  it.each([0, -5, Number.NaN])('%s: InvalidRawTimeoutError (redis.invalid-timeout)', (timeoutMs) => {
    const error = thrown(() => timeoutMsOption('RawHashReader', timeoutMs));
    expect(error).toBeInstanceOf(InvalidRawTimeoutError);
    expect(error.code).toBe('redis.invalid-timeout');
    expect(error.message).toBe(`RawHashReader: timeoutMs must be a positive number of ms (got ${timeoutMs})`);
  });

  it('a positive value passes, none gives the default', () => {
    expect(timeoutMsOption('RawHashReader', 250)).toBe(250);
    expect(timeoutMsOption('RawHashReader', undefined)).toBe(DEFAULT_TIMEOUT_MS);
  });
});
