/**
 * The runtime supervises its emulators (real processes, the runtime `npm start` runs):
 * - `kill -9` of the region's redis-server: the runtime reports it in one line (what died, what
 *   happens next) and restarts it on the same port, empty; the next win notice that reaches
 *   track-spend rebuilds the plan-day's live counters from the ledger, so live counters equal
 *   the ledger again (wins driven through the real track-spend handler before and after);
 * - an in-process emulator (dynalite, kinesalite, the SSM endpoint, s3rver) that stops listening
 *   is reported and listens again on the same port with its data.
 */
import { ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { ListStreamsCommand } from '@aws-sdk/client-kinesis';
import { ListBucketsCommand } from '@aws-sdk/client-s3';
import { GetParametersByPathCommand } from '@aws-sdk/client-ssm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RegionRuntime, startRuntime } from '../../../local/runtime.js';
import { BudgetRepository } from '../../../shared/budget/repository.js';
import { dayWindow } from '../../../shared/budget/time-zone.js';
import { KinesisProducer } from '../../../shared/kinesis/producer.js';
import { connectRedis, type RedisClient, redisConfigFromEnv } from '../../../shared/redis/connect.js';
import { parameterPrefix } from '../../../shared/region/resources.js';
import type { SpendEvent } from '../../../shared/spend/events.js';
import { planDayKeys } from '../../../shared/spend/keys.js';
import { SpendLedger } from '../../../shared/spend/ledger.js';
import { readPlanDay } from '../../../shared/spend/live-counters.js';
import { tempDir } from '../../support/tmp.js';
import { encode, seedBudgets } from '../spend/support.js';

const TZ = 'America/New_York';
let runtime: RegionRuntime;
let redis: RedisClient;
const alerts: string[] = [];

beforeAll(async () => {
  [runtime] = (await startRuntime({
    regions: ['us-east-1'],
    redisMode: 'standalone',
    stateDir: tempDir('paceline-supervision-'),
    functions: ['trackSpend'],
    functionOutput: 'ignore',
    alert: (line) => alerts.push(line),
  })) as [RegionRuntime];
  redis = connectRedis(redisConfigFromEnv(runtime.region.functionEnv('trackSpend')));
  redis.on('error', () => {});
}, 120_000);

afterAll(async () => {
  redis?.disconnect();
  await runtime?.stop();
});

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // not yet (e.g. Redis still down)
    }
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}; alerts: ${alerts.join(' | ')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('supervision of the emulators', () => {
  it('kill -9 of redis-server: reported, restarted on its port, live counters rebuilt from the ledger on the next notice', async () => {
    const region = runtime.region;
    const repo = new BudgetRepository({
      client: region.dynamodb,
      tableName: region.tableName('budgets'),
      pacerShards: region.description.settings.pacer.shards,
    });
    await seedBudgets(repo, {
      accountId: 'acc-sup',
      timeZone: TZ,
      campaigns: [{ campaignId: 'c-sup', budgetMicros: 1_000_000_000 }],
    });
    const producer = new KinesisProducer({ client: region.kinesis, streamName: region.streamName('spend') });
    const poller = runtime.pollers.get('trackSpend');
    const start = Date.now();
    let bidNo = 0;
    /** Puts `n` bids each followed by its win; returns the clearing prices' sum. */
    const drive = async (n: number): Promise<number> => {
      const events: SpendEvent[] = [];
      let sum = 0;
      for (let i = 0; i < n; i++) {
        const bid = {
          v: 1,
          bidId: `sup-${bidNo++}`,
          campaignId: 'c-sup',
          bidAt: start + bidNo,
          bidPriceMicros: 5_000,
        } as const;
        const price = 1_000 + bidNo * 7;
        events.push(
          { ...bid, type: 'bid' },
          { ...bid, type: 'win', at: start + bidNo + 1, clearingPriceMicros: price },
        );
        sum += price;
      }
      await producer.putAll(encode(events).map((data) => ({ data, partitionKey: 'c-sup' })));
      await poller?.waitForIdle(90_000);
      return sum;
    };
    const day = dayWindow(start, TZ).day;
    const ledger = new SpendLedger({
      client: region.dynamodb,
      tableName: region.tableName('spendLedger'),
      region: region.region,
    });
    const plan = (await repo.getCampaignBudgets('c-sup'))?.common.find((p) => p.level === 'campaign');
    if (!plan) throw new Error('campaign plan missing');
    const stateKey = planDayKeys(plan, day).state;
    const ledgerSum = async () =>
      (await ledger.entries('c-sup', day)).reduce((a, e) => a + e.clearingPriceMicros, 0);

    const before = await drive(10);
    expect(await ledgerSum()).toBe(before);
    expect((await readPlanDay(redis, stateKey, Date.now())).confirmedMicros).toBe(before);

    const [address] = region.redis.nodes;
    const oldPid = region.redis.pids[0] as number;
    process.kill(oldPid, 'SIGKILL');
    await until('the restart', () => runtime.supervisionEvents.some((e) => e.type === 'restarted'));
    expect(region.redis.nodes[0]).toBe(address); // same port: clients reconnect by themselves
    expect(region.redis.pids[0]).not.toBe(oldPid);
    const died = alerts.filter((l) => l.includes('died'));
    expect(died).toHaveLength(1);
    expect(died[0]).toMatch(
      new RegExp(
        `redis-server \\(pid ${oldPid}\\) at ${address} died \\(signal SIGKILL\\); restarting it on the same port`,
      ),
    );
    expect(alerts.find((l) => l.includes('restarted'))).toMatch(
      /empty: live spend counters are rebuilt from the ledger/,
    );
    // The restarted server is empty: the rebuild path is really exercised.
    await until('Redis answering', async () => (await redis.ping()) === 'PONG');
    expect(await redis.dbsize()).toBe(0);

    const after = await drive(10);
    expect(await ledgerSum()).toBe(before + after);
    // The first notice after the restart rebuilt the plan-day from the ledger, then booked itself.
    expect((await readPlanDay(redis, stateKey, Date.now())).confirmedMicros).toBe(before + after);
    expect(region.redis.unexpectedExits).toBe(1);
  });

  it('an in-process emulator that stops listening is reported and listens again on its port, data intact', async () => {
    const region = runtime.region;
    const checks = {
      dynamodb: async () => (await region.dynamodb.send(new ListTablesCommand({}))).TableNames ?? [],
      kinesis: async () => (await region.kinesis.send(new ListStreamsCommand({}))).StreamNames ?? [],
      ssm: async () =>
        (
          await region.ssm.send(
            new GetParametersByPathCommand({ Path: parameterPrefix(region.region), Recursive: true }),
          )
        ).Parameters?.map((p) => p.Name ?? '') ?? [],
      s3: async () =>
        (await region.s3.send(new ListBucketsCommand({}))).Buckets?.map((b) => b.Name ?? '') ?? [],
    } as const;
    for (const [name, list] of Object.entries(checks)) {
      const before = await list();
      expect(before.length).toBeGreaterThan(0);
      const seen = runtime.supervisionEvents.length;
      region.emulators[name as keyof typeof checks].crash();
      await until(`${name} to listen again`, () =>
        runtime.supervisionEvents.slice(seen).some((e) => e.type === 'restarted'),
      );
      const events = runtime.supervisionEvents.slice(seen);
      expect(events.map((e) => e.type)).toEqual(['died', 'restarted']);
      expect(events[0]?.address).toBe(`127.0.0.1:${region.emulators[name as keyof typeof checks].port}`);
      await until(`${name} answering`, async () => (await list()).length > 0);
      expect(await list()).toEqual(before);
    }
  });
});
