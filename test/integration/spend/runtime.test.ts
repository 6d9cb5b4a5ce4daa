/**
 * End to end as `npm start` runs it: an ad server's producer puts bids, duplicated win notices
 * and a poison record on the local region's spend stream; the runtime's event-source mapping
 * invokes the real track-spend handler in its own OS process (env from the region description);
 * the ledger and the live counters hold each win exactly once and the poison record is
 * quarantined with its reason.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RegionRuntime, startRuntime } from '../../../local/runtime.js';
import { BudgetRepository } from '../../../shared/budget/repository.js';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import { KinesisProducer } from '../../../shared/kinesis/producer.js';
import { DeadLetterStore } from '../../../shared/quarantine/dead-letter-store.js';
import { connectRedis, type RedisClient, redisConfigFromEnv } from '../../../shared/redis/connect.js';
import type { SpendEvent } from '../../../shared/spend/events.js';
import { planDayKeys } from '../../../shared/spend/keys.js';
import { SpendLedger } from '../../../shared/spend/ledger.js';
import { readPlanDay } from '../../../shared/spend/live-counters.js';
import { tempDir } from '../../support/tmp.js';
import { encode, seedBudgets } from './support.js';

const TZ = 'Pacific/Auckland';
let runtime: RegionRuntime;
let redis: RedisClient;

beforeAll(async () => {
  [runtime] = (await startRuntime({
    regions: ['us-east-1'],
    redisMode: 'standalone',
    stateDir: tempDir('paceline-spend-runtime-'),
    // Only what this test exercises: no pacer instances competing for the CPU.
    functions: ['trackSpend'],
  })) as [RegionRuntime];
  redis = connectRedis(redisConfigFromEnv(runtime.region.functionEnv('trackSpend')));
}, 120_000);

afterAll(async () => {
  redis?.disconnect();
  await runtime?.stop();
});

describe('track-spend under the local runtime (process instances)', () => {
  it('books every win exactly once from a stream with duplicates, and quarantines the poison record', async () => {
    const region = runtime.region;
    const repo = new BudgetRepository({
      client: region.dynamodb,
      tableName: region.tableName('budgets'),
      pacerShards: region.description.settings.pacer.shards,
    });
    await seedBudgets(repo, {
      accountId: 'acc-rt',
      timeZone: TZ,
      campaigns: [{ campaignId: 'c-rt', budgetMicros: 1_000_000_000 }],
    });
    const now = Date.now();
    const events: SpendEvent[] = [];
    let expected = 0;
    for (let i = 0; i < 30; i++) {
      const bid = {
        v: 1,
        bidId: `b${i}`,
        campaignId: 'c-rt',
        bidAt: now - 1000 + i,
        bidPriceMicros: 2_000,
      } as const;
      events.push({ ...bid, type: 'bid' });
      if (i % 3 === 0) events.push({ ...bid, type: 'loss', at: now + i });
      else {
        const win = { ...bid, type: 'win', at: now + i, clearingPriceMicros: 1_000 + i } as const;
        // Exchanges send duplicate win notices; producers retry.
        events.push(win, win);
        expected += win.clearingPriceMicros;
      }
    }
    const producer = new KinesisProducer({ client: region.kinesis, streamName: region.streamName('spend') });
    await producer.putAll([
      ...encode(events).map((data) => ({ data, partitionKey: 'c-rt' })),
      { data: Buffer.from('{"v":1,"type":"win","bidId":"x"}'), partitionKey: 'c-rt' },
    ]);
    await runtime.pollers.get('trackSpend')?.waitForIdle(90_000);

    const day = dayWindow(now - 1000, TZ).day;
    const ledger = new SpendLedger({
      client: region.dynamodb,
      tableName: region.tableName('spendLedger'),
      region: region.region,
    });
    const entries = await ledger.entries('c-rt', day);
    expect(entries).toHaveLength(20);
    expect(entries.reduce((a, e) => a + e.clearingPriceMicros, 0)).toBe(expected);
    const plan = (await repo.getCampaignBudgets('c-rt'))?.common.find((p) => p.level === 'campaign');
    expect(plan).toBeDefined();
    const live = await readPlanDay(
      redis,
      planDayKeys(plan as NonNullable<typeof plan>, day).state,
      Date.now(),
    );
    expect(live.confirmedMicros).toBe(expected);

    const letters = await new DeadLetterStore({
      client: region.dynamodb,
      tableName: region.tableName('deadLetters'),
    }).list('track-spend');
    expect(letters).toHaveLength(1);
    expect(letters[0]?.reason).toMatch(/\S/);
  });
});
