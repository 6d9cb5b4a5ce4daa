/**
 * The shipped bundle (`dist/client.js`: the client with its own copy of the AWS SDK, ioredis left
 * as an import) with clients the caller made, against a local region whose Redis is a 3-node
 * cluster:
 * - the caller's ioredis is the bundle's ioredis (the package's one dependency): a `Cluster` the
 *   bundle creates is an instance of the caller's `Cluster` class, and a shared `Cluster` client
 *   serves frequency caps and budget leases — the client tells a cluster by `instanceof`;
 * - a `KinesisClient` from the caller's own `@aws-sdk/client-kinesis` (another copy than the
 *   bundled one) carries the bundle's `PutRecords` commands: the events land on the streams;
 * - the bundled DynamoDB and SSM clients read budgets and the shard count from the emulators.
 *
 * The bundle is built with the package build's own options into test-output/ (inside the
 * repository, so its `import 'ioredis'` resolves to the repository's ioredis, as npm installs it
 * beside the package).
 */
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { bundleOptions } from '../../../packages/client/scripts/build.js';
import { BudgetRepository } from '../../../shared/budget/repository.js';
import { connectRedis, type RedisClient, redisConfigFromEnv } from '../../../shared/redis/connect.js';
import { readStream } from '../../support/kinesis.js';

type ClientModule = typeof import('../../../packages/client/src/index.js');

const repoRoot = fileURLToPath(new URL('../../..', import.meta.url));
let region: LocalRegion;
let shared: RedisClient;
let bundled: ClientModule;

beforeAll(async () => {
  const outfile = join(repoRoot, 'test-output', 'client-bundle', 'client.js');
  const [, started] = await Promise.all([
    build({ ...bundleOptions(), outfile, metafile: false, logLevel: 'silent' }),
    startLocalRegion({ redisMode: 'cluster' }),
  ]);
  region = started;
  bundled = (await import(pathToFileURL(outfile).href)) as ClientModule;
  shared = connectRedis(redisConfigFromEnv(region.clientEnv));
  const repo = new BudgetRepository({
    client: region.dynamodb,
    tableName: region.tableName('budgets'),
    pacerShards: region.description.settings.pacer.shards,
  });
  await repo.putAccount({ accountId: 'bu-acct', name: 'Bundle test', timeZone: 'UTC', currency: 'USD' });
  await repo.putCampaign({ campaignId: 'bu-camp', accountId: 'bu-acct', name: 'bu-camp', status: 'active' });
  await repo.putPlan({
    level: 'campaign',
    accountId: 'bu-acct',
    campaignId: 'bu-camp',
    dailyBudgetMicros: 1_000_000_000,
    pacingMode: 'even',
  });
}, 120_000);

afterAll(async () => {
  shared?.disconnect();
  await region?.stop();
});

describe('the bundled client with the caller’s own clients', () => {
  it("uses the caller's ioredis: a cluster client it makes is the caller's Cluster", async () => {
    // A client given the Redis configuration (not a client) connects on its own; its connection is
    // read from the store it made (a private field: the package exports no connection).
    const client = await bundled.createPacelineClient(
      bundled.configFromEnv(region.clientEnv, { kinesis: region.kinesis, onError: () => {} }),
    );
    try {
      expect((client.actions as unknown as { redis: unknown }).redis).toBeInstanceOf(Cluster);
    } finally {
      await client.close();
    }
    expect(shared).toBeInstanceOf(Cluster);
  });

  it('bids, checks caps and sends events through a shared Redis cluster client and Kinesis client', async () => {
    const errors: unknown[] = [];
    const client = await bundled.createPacelineClient(
      bundled.configFromEnv(region.clientEnv, {
        redis: shared,
        kinesis: region.kinesis, // the repository's @aws-sdk/client-kinesis, not the bundled copy
        campaigns: ['bu-camp'],
        noticeBaseUrl: 'https://ads.example.com/notice',
        onError: (e) => errors.push(e),
      }),
    );
    try {
      const caps = await client.checkFrequencyCaps({
        userId: '4200000017',
        candidates: [
          {
            id: 'ad-11',
            entities: { ad: '11', adGroup: '7', campaign: '3', advertiser: '1' },
            caps: [{ level: 'campaign', windowMs: 3_600_000, max: 3 }],
          },
        ],
      });
      expect(caps.allowed.map((v) => v.id)).toEqual(['ad-11']);
      const outcome = client.bid({ bidId: 'bu-1', campaignId: 'bu-camp', basePriceMicros: 2_000 });
      expect(outcome).toMatchObject({ bid: true, bidId: 'bu-1' }); // budgets read, float leased
      if (!outcome.bid) return;
      client.sendNotice((outcome.notices?.nurl ?? '').replace(bundled.AUCTION_PRICE_MACRO, '1.6000'));
      client.sendAction({
        userId: '4200000017',
        timestamp: Date.now(),
        insertionId: '0123456789abcdef0123456789abcdef',
        action: 'impression',
        ad: '11',
        adGroup: '7',
        campaign: '3',
        advertiser: '1',
      });
      await client.flush();
      expect(client.metrics()).toMatchObject({ eventsSent: 3, eventsFailed: 0, errors: 0 });
      expect(errors).toEqual([]);
    } finally {
      await client.close();
    }
    // What the caller's Kinesis client put is on the streams: bid + win, and the impression.
    const count = async (stream: string) =>
      (await readStream(region.kinesis, stream)).reduce((n, shard) => n + shard.data.length, 0);
    expect(await count(client.resources.spendStream)).toBe(2);
    expect(await count(client.resources.actionsStream)).toBe(1);
    // Shared clients stay open for their owner after close().
    expect(shared.status).toBe('ready');
    expect(await shared.ping()).toBe('PONG');
  }, 60_000);
});
