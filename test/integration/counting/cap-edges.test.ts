/**
 * The frequency-cap edge table (docs/counting.md), end to end on redis-server: each row's events
 * are ingested through ActionStore (the real ingest script, its dedup rule included) and the cap
 * is checked with checkFrequencyCaps at the row's instant. Every row runs twice: one arrival per
 * call (separate batches), and all arrivals in one call (one batch, same order).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ingestRecords } from '../../../shared/counting/ingest.js';
import { InvalidCountQueryError } from '../../../shared/counting/query.js';
import { ActionStore } from '../../../shared/counting/store.js';
import { ManualClock } from '../../../shared/time/clock.js';
import {
  CAP_EDGE_ROWS,
  EDGE_DEDUP_WINDOW,
  EDGE_NOW,
  edgeCandidate,
  edgeRecord,
} from '../../support/cap-edges.js';
import { type RedisUnderTest, startRedisWithClient } from '../../support/redis.js';

let redis: RedisUnderTest;
let store: ActionStore;

beforeAll(async () => {
  redis = await startRedisWithClient('standalone');
  store = new ActionStore({
    redis: redis.client,
    clock: new ManualClock(EDGE_NOW),
    dedupWindowMs: EDGE_DEDUP_WINDOW,
  });
});

afterAll(async () => {
  await redis?.stop();
});

describe('frequency-cap edge table through the store', () => {
  let user = 1000;
  it.each(
    CAP_EDGE_ROWS.flatMap((r) => (['separate', 'one batch'] as const).map((m) => [r.name, m, r] as const)),
  )('%s (%s)', async (_name, mode, row) => {
    const userId = String(++user);
    const records = row.events.map((e) => edgeRecord(userId, e));
    if (mode === 'one batch') expect((await ingestRecords(store, records)).malformed).toEqual([]);
    else for (const r of records) expect((await ingestRecords(store, [r])).malformed).toEqual([]);
    const check = () => store.checkFrequencyCaps({ userId, candidates: [edgeCandidate(row)] });
    if ('error' in row.expect) {
      await expect(check()).rejects.toThrow(InvalidCountQueryError);
      await expect(check()).rejects.toThrow(row.expect.error);
      return;
    }
    const result = await check();
    const verdict = [...result.allowed, ...result.rejected][0];
    expect(verdict?.allowed).toBe(row.expect.allowed);
    expect(verdict?.strictest?.count).toBe(row.expect.count);
  });

  it('a malformed request is a rejection, not a synchronous throw (the check is a plain promise chain, not async)', async () => {
    let returned: Promise<unknown> | undefined;
    expect(() => {
      returned = store.checkFrequencyCaps({ userId: '1' } as never);
    }).not.toThrow();
    await expect(returned).rejects.toThrow(TypeError);
  });
});
