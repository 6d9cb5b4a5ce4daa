/**
 * `createPacelineClient` refuses a configuration it cannot run with by a PacelineError that names
 * the option and what to give — never a bare RangeError from a building block — and before any
 * background work starts (no endpoint is reached: the addresses below accept nothing).
 */
import { describe, expect, it } from 'vitest';
import { createPacelineClient } from '../../../shared/client/client.js';
import { InvalidClientConfigError, type PacelineClientConfig } from '../../../shared/client/config.js';
import { InvalidActionStoreOptionsError } from '../../../shared/counting/store.js';
import { PacelineError } from '../../../shared/errors.js';
import { InvalidRedisConfigError } from '../../../shared/redis/connect.js';
import { InvalidGuardOptionsError } from '../../../shared/spend/guard.js';

const base: PacelineClientConfig = {
  endpoints: {
    region: 'us-east-1',
    dynamodb: 'http://127.0.0.1:9',
    kinesis: 'http://127.0.0.1:9',
    ssm: 'http://127.0.0.1:9',
    localOnly: true,
  },
  redis: { mode: 'standalone', nodes: [{ host: '127.0.0.1', port: 9 }], tls: false },
  pacerShards: 1,
  onError: () => {},
};

async function refusal(config: PacelineClientConfig): Promise<PacelineError> {
  const error = await createPacelineClient(config).then(
    (client) => {
      void client.close();
      throw new Error('the client was built');
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(PacelineError);
  return error as PacelineError;
}

describe('createPacelineClient configuration errors', () => {
  it('guard tuning out of range: InvalidClientConfigError naming the option, the guard error as cause', async () => {
    const error = await refusal({ ...base, guard: { inFlightWeight: 2 } });
    expect(error).toBeInstanceOf(InvalidClientConfigError);
    expect(error.code).toBe('client.invalid-config');
    expect(error.message).toMatch(/^guard: inFlightWeight 2 must be in \(0, 1\]\. Fix .*`guard`/);
    expect(error.cause).toBeInstanceOf(InvalidGuardOptionsError);
    expect((error.cause as InvalidGuardOptionsError).code).toBe('spend.invalid-guard-options');
    const cap = await refusal({ ...base, guard: { releaseCap: 0.5 } });
    expect(cap.message).toMatch(/releaseCap 0.5/);
  });

  it('no Redis node: InvalidRedisConfigError saying what to give', async () => {
    const error = await refusal({ ...base, redis: { mode: 'standalone', nodes: [], tls: false } });
    expect(error).toBeInstanceOf(InvalidRedisConfigError);
    expect(error.code).toBe('redis.invalid-config');
    expect(error.message).toMatch(/nodes is empty: give at least one/);
  });

  it('action store retention out of range: InvalidActionStoreOptionsError with the range', async () => {
    const error = await refusal({ ...base, actions: { retentionDays: 0 } });
    expect(error).toBeInstanceOf(InvalidActionStoreOptionsError);
    expect(error.code).toBe('counting.invalid-store-options');
    expect(error.message).toBe('retentionDays is 0: give an integer from 1 to 90 (default 30).');
  });

  it('day-summary options out of range: InvalidActionStoreOptionsError naming the option', async () => {
    const rawDays = await refusal({ ...base, actions: { retentionDays: 90, rawDays: 0 } });
    expect(rawDays).toBeInstanceOf(InvalidActionStoreOptionsError);
    expect(rawDays.message).toBe('rawDays is 0: give an integer from 1 to 90 (default 31).');
    const tables = await refusal({ ...base, actions: { cachedDayTables: -1 } });
    expect(tables.message).toBe('cachedDayTables is -1: give an integer from 0 to 1000000 (default 4096).');
  });

  it('a configuration the guard accepts is not refused', async () => {
    const client = await createPacelineClient({
      ...base,
      guard: { inFlightWeight: 1 },
      budgetRefreshMs: 60_000,
    });
    await client.close();
  });
});
