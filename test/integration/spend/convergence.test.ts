/**
 * docs/reliability.md, fault 1: Redis refuses writes (maxmemory reached, noeviction) for longer than the
 * event source's retry budget. track-spend has written the ledger but not the live counters, and
 * the records end in the on-failure destination — the measured gap that made guards overspend.
 * With the spend outbox, every such win left an intent; after Redis accepts writes again the
 * scheduled sweep-spend function (fired by the local EventBridge scheduler at its minute
 * boundary) applies them: the counters equal the ledger after that one scheduled run, i.e.
 * within the stated convergence time (docs/spend.md), without an operator.
 *
 * Real parts: redis-server, dynalite, kinesalite, the Kinesis event-source poller with the
 * description's settings (retry delays shortened), the real track-spend and sweep-spend handlers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryCheckpointStore } from '../../../local/esm/checkpoints.js';
import { LocalOnFailureDestination } from '../../../local/esm/on-failure.js';
import { KinesisPoller } from '../../../local/esm/poller.js';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { Scheduler, scheduleTargets } from '../../../local/scheduler.js';
import { InProcessInvoker, type LocalHandler } from '../../../local/worker/in-process-invoker.js';
import { BudgetRepository } from '../../../shared/budget/repository.js';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import { KinesisProducer } from '../../../shared/kinesis/producer.js';
import { connectRedis, type RedisClient, redisConfigFromEnv } from '../../../shared/redis/connect.js';
import { type FunctionSpec, regionResources } from '../../../shared/region/resources.js';
import type { WinEvent } from '../../../shared/spend/events.js';
import { planDayKeys } from '../../../shared/spend/keys.js';
import { SpendLedger } from '../../../shared/spend/ledger.js';
import { readPlanDay } from '../../../shared/spend/live-counters.js';
import { SpendOutbox } from '../../../shared/spend/outbox.js';
import type { SweepResult } from '../../../shared/spend/sweeper.js';
import { ManualClock } from '../../../shared/time/clock.js';
import { type KinesisHandler, loadHandler } from '../../support/lambda.js';
import { encode, seedBudgets } from './support.js';

const TZ = 'Europe/Paris';
let region: LocalRegion;
let redis: RedisClient;

beforeAll(async () => {
  region = await startLocalRegion();
  redis = connectRedis(redisConfigFromEnv(region.functionEnv('trackSpend')));
  redis.on('error', () => {});
});

afterAll(async () => {
  redis?.disconnect();
  await region?.stop();
});

describe('live counters converge to the ledger after Redis refused writes', () => {
  it('a win in the ledger is in the live counters after the next scheduled sweep', async () => {
    const repo = new BudgetRepository({
      client: region.dynamodb,
      tableName: region.tableName('budgets'),
      pacerShards: region.description.settings.pacer.shards,
    });
    await seedBudgets(repo, {
      accountId: 'acc-cv',
      timeZone: TZ,
      accountBudgetMicros: 100_000_000_000,
      campaigns: [{ campaignId: 'c-cv', budgetMicros: 10_000_000_000 }],
    });
    const trackSpend = await loadHandler<KinesisHandler>(region, 'trackSpend');
    const onFailure = new LocalOnFailureDestination();
    const poller = new KinesisPoller({
      kinesis: region.kinesis,
      streamName: region.streamName('spend'),
      source: { ...regionResources.functions.trackSpend.source, maxBatchingWindowSeconds: 0 },
      invoker: new InProcessInvoker({ functionName: 'track-spend', handler: trackSpend as LocalHandler }),
      onFailure,
      checkpoints: new MemoryCheckpointStore(),
      idlePollMs: 20,
      retryBaseDelayMs: 10,
      retryMaxDelayMs: 100,
    });
    await poller.start();

    // Redis refuses every write from now on (as a full cache with noeviction does).
    await redis.config('SET', 'maxmemory-policy', 'noeviction');
    await redis.config('SET', 'maxmemory', '1');
    const now = Date.now();
    const wins: WinEvent[] = Array.from({ length: 40 }, (_, i) => ({
      v: 1,
      type: 'win',
      bidId: `cv${i}`,
      campaignId: 'c-cv',
      bidAt: now - 5_000 + i,
      bidPriceMicros: 9_000,
      at: now - 1_000 + i,
      clearingPriceMicros: 7_000 + i,
    }));
    const total = wins.reduce((a, w) => a + w.clearingPriceMicros, 0);
    const producer = new KinesisProducer({ client: region.kinesis, streamName: region.streamName('spend') });
    await producer.putAll(encode(wins).map((data) => ({ data, partitionKey: 'c-cv' })));
    await poller.waitForIdle(120_000);
    await poller.stop();

    // The fault as measured: the records exhausted their retries, the ledger has every win,
    // the live counters have none of it.
    const exhausted = onFailure.records.reduce((a, r) => a + r.KinesisBatchInfo.batchSize, 0);
    expect(exhausted).toBe(40);
    const day = dayWindow(now, TZ).day;
    const ledger = new SpendLedger({
      client: region.dynamodb,
      tableName: region.tableName('spendLedger'),
      region: region.region,
    });
    expect((await ledger.entries('c-cv', day)).reduce((a, e) => a + e.clearingPriceMicros, 0)).toBe(total);
    const budgets = (await repo.getCampaignBudgets('c-cv'))!;
    const states = budgets.common.map((p) => planDayKeys(p, day).state);
    for (const state of states) expect((await readPlanDay(redis, state, Date.now())).confirmedMicros).toBe(0);

    // Redis accepts writes again. The sweeper is a scheduled function (every minute): its next
    // run, at the next minute boundary, settles every pending win.
    await redis.config('SET', 'maxmemory', '0');
    const sweepSpec: FunctionSpec = regionResources.functions.sweepSpend;
    const sweepSpend = await loadHandler<LocalHandler>(region, 'sweepSpend', { SWEEP_GRACE_MS: '0' });
    const clock = new ManualClock(Date.now());
    const scheduler = new Scheduler(
      scheduleTargets(
        sweepSpec.name,
        sweepSpec.schedule!,
        new InProcessInvoker({ functionName: sweepSpec.name, handler: sweepSpend }),
      ),
      // Exact timing: the test fires the sweep at the next minute boundary by hand (with
      // EventBridge-like timing it would fire at the rule's own second, after a delivery delay).
      { clock, region: region.region, timing: { mode: 'exact' } },
    );
    expect(await scheduler.fireDue(clock.now())).toEqual([]); // not on a boundary yet
    const boundary = Math.ceil(clock.now() / 60_000) * 60_000;
    const [run] = await scheduler.fireDue(boundary);
    expect(run?.ok).toBe(true);
    const result = (run as { payload: SweepResult }).payload;
    expect(result).toMatchObject({
      found: 40,
      settled: 40,
      failed: 0,
      oldestPendingAgeMs: 0,
      stoppedEarly: false,
    });
    for (const state of states)
      expect((await readPlanDay(redis, state, Date.now())).confirmedMicros).toBe(total);
    const outbox = new SpendOutbox({
      client: region.dynamodb,
      tableName: region.tableName('spendLedger'),
      region: region.region,
    });
    const left = [];
    for await (const p of outbox.pending(Date.now() + 1)) left.push(p);
    expect(left).toEqual([]);
  }, 180_000);
});
