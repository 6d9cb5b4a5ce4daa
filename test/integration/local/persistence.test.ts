/**
 * `--data-dir` and stable ports: a region started on a data directory and fixed ports, given
 * budgets, SSM parameters, S3 objects, Redis keys and stream records, then stopped and started
 * again on the same directory, comes back on the same endpoints with all of it. Without a data
 * directory (the default) a restart starts empty.
 */
import {
  type _Record,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type KinesisClient,
  ListShardsCommand,
} from '@aws-sdk/client-kinesis';
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { GetParameterCommand, PutParameterCommand } from '@aws-sdk/client-ssm';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../../local/emulators/net.js';
import { type LocalRegion, type RegionPorts, startLocalRegion } from '../../../local/region.js';
import { BudgetRepository } from '../../../shared/budget/repository.js';
import { KinesisProducer } from '../../../shared/kinesis/producer.js';
import { connectRedis, redisConfigFromEnv } from '../../../shared/redis/connect.js';
import { parameterPrefix } from '../../../shared/region/resources.js';
import { tempDir } from '../../support/tmp.js';
import { seedBudgets } from '../spend/support.js';

/** Every record of a stream, read from the start of each shard. */
async function readStream(kinesis: KinesisClient, StreamName: string): Promise<_Record[]> {
  const shards = (await kinesis.send(new ListShardsCommand({ StreamName }))).Shards ?? [];
  const out: _Record[] = [];
  for (const shard of shards) {
    const { ShardIterator } = await kinesis.send(
      new GetShardIteratorCommand({ StreamName, ShardId: shard.ShardId, ShardIteratorType: 'TRIM_HORIZON' }),
    );
    out.push(
      ...((await kinesis.send(new GetRecordsCommand({ ShardIterator })).then((r) => r.Records)) ?? []),
    );
  }
  return out;
}

async function ports(): Promise<RegionPorts> {
  const [redis, dynamodb, kinesis, ssm, s3, elasticache] = await Promise.all(
    Array.from({ length: 6 }, () => freePort()),
  );
  return {
    redis: [redis as number],
    dynamodb: dynamodb as number,
    kinesis: kinesis as number,
    ssm: ssm as number,
    s3: s3 as number,
    elasticache: elasticache as number,
  };
}

const repoOf = (region: LocalRegion) =>
  new BudgetRepository({
    client: region.dynamodb,
    tableName: region.tableName('budgets'),
    pacerShards: region.description.settings.pacer.shards,
  });

describe('persistent local state (--data-dir) on stable ports', () => {
  it('keeps budgets, parameters, objects, Redis keys and stream records across a restart', async () => {
    const dataDir = tempDir('paceline-data-');
    const fixed = await ports();
    const param = `${parameterPrefix('us-east-1')}test/persisted`;
    let first: LocalRegion | undefined = await startLocalRegion({ ports: fixed, dataDir });
    try {
      await seedBudgets(repoOf(first), {
        accountId: 'acc-keep',
        timeZone: 'UTC',
        campaigns: [{ campaignId: 'c-keep', budgetMicros: 123_000_000 }],
      });
      await first.ssm.send(new PutParameterCommand({ Name: param, Value: 'kept', Type: 'String' }));
      await first.s3.send(
        new PutObjectCommand({ Bucket: first.bucketName('deadLetterPayloads'), Key: 'k', Body: 'object' }),
      );
      const redis = connectRedis(redisConfigFromEnv(first.clientEnv));
      await redis.set('paceline:test:kept', 'yes');
      redis.disconnect();
      await new KinesisProducer({ client: first.kinesis, streamName: first.streamName('spend') }).putAll([
        { data: Buffer.from('record-kept'), partitionKey: 'p' },
      ]);
      // appendfsync everysec: a clean stop (SIGTERM) writes the append-only file out anyway.
      const endpoints = first.clientEnv;
      await first.stop();
      first = undefined;

      const second = await startLocalRegion({ ports: fixed, dataDir });
      try {
        expect(second.clientEnv).toEqual(endpoints); // same endpoints: a sourced env file stays valid
        const budgets = await repoOf(second).getCampaignBudgets('c-keep');
        expect(budgets?.common.find((p) => p.level === 'campaign')?.dailyBudgetMicros).toBe(123_000_000);
        expect((await repoOf(second).getAccount('acc-keep'))?.timeZone).toBe('UTC');
        expect((await second.ssm.send(new GetParameterCommand({ Name: param }))).Parameter?.Value).toBe(
          'kept',
        );
        const object = await second.s3.send(
          new GetObjectCommand({ Bucket: second.bucketName('deadLetterPayloads'), Key: 'k' }),
        );
        expect(await object.Body?.transformToString()).toBe('object');
        const redis2 = connectRedis(redisConfigFromEnv(second.clientEnv));
        expect(await redis2.get('paceline:test:kept')).toBe('yes');
        redis2.disconnect();
        const records = await readStream(second.kinesis, second.streamName('spend'));
        expect(records.map((r) => Buffer.from(r.Data ?? new Uint8Array()).toString())).toContain(
          'record-kept',
        );
      } finally {
        await second.stop();
      }
    } finally {
      await first?.stop();
    }
  });

  it('without a data directory a restart starts empty (the default)', async () => {
    const fixed = await ports();
    const first = await startLocalRegion({ ports: fixed });
    await seedBudgets(repoOf(first), {
      accountId: 'acc-gone',
      timeZone: 'UTC',
      campaigns: [{ campaignId: 'c-gone', budgetMicros: 1_000_000 }],
    });
    await first.stop();
    const second = await startLocalRegion({ ports: fixed });
    try {
      expect(await repoOf(second).getCampaignBudgets('c-gone')).toBeUndefined();
    } finally {
      await second.stop();
    }
  });

  it('a fixed port that is taken is refused with what to do', async () => {
    const fixed = await ports();
    const holder = await startLocalRegion({ ports: fixed });
    try {
      await expect(startLocalRegion({ ports: fixed })).rejects.toThrow(
        new RegExp(`port ${fixed.redis[0]} is in use .*--base-port`),
      );
    } finally {
      await holder.stop();
    }
  });
});
