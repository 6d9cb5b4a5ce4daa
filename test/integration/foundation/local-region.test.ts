import { DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import { DescribeStreamSummaryCommand } from '@aws-sdk/client-kinesis';
import { GetParametersByPathCommand } from '@aws-sdk/client-ssm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { parameterPrefix, physicalName, regionResources } from '../../../shared/region/resources.js';

let region: LocalRegion;
beforeAll(async () => {
  region = await startLocalRegion({ region: 'us-west-2' });
});
afterAll(async () => {
  await region?.stop();
});

describe('local region', () => {
  it('creates every described table with its key schema', async () => {
    for (const spec of Object.values(regionResources.tables)) {
      const { Table } = await region.dynamodb.send(
        new DescribeTableCommand({ TableName: physicalName(spec.suffix) }),
      );
      expect(Table?.KeySchema).toEqual([
        { AttributeName: spec.partitionKey.name, KeyType: 'HASH' },
        { AttributeName: spec.sortKey.name, KeyType: 'RANGE' },
      ]);
    }
  });

  it('creates every described stream with its shard count', async () => {
    for (const spec of Object.values(regionResources.streams)) {
      const { StreamDescriptionSummary } = await region.kinesis.send(
        new DescribeStreamSummaryCommand({ StreamName: physicalName(spec.suffix) }),
      );
      expect(StreamDescriptionSummary?.OpenShardCount).toBe(spec.shardCount);
      expect(StreamDescriptionSummary?.StreamStatus).toBe('ACTIVE');
    }
  });

  it('writes the initial parameters of its description under the region prefix', async () => {
    const found: [string | undefined, string | undefined][] = [];
    let NextToken: string | undefined;
    do {
      const page = await region.ssm.send(
        new GetParametersByPathCommand({ Path: parameterPrefix('us-west-2'), Recursive: true, NextToken }),
      );
      for (const p of page.Parameters ?? []) found.push([p.Name, p.Value]);
      NextToken = page.NextToken;
    } while (NextToken);
    const expected = Object.values(region.description.parameters).map((p) => [
      `${parameterPrefix('us-west-2')}${p.path}`,
      p.initial('us-west-2'),
    ]);
    const byName = (a: (string | undefined)[], b: (string | undefined)[]) =>
      String(a[0]).localeCompare(String(b[0]));
    expect(found.sort(byName)).toEqual(expected.sort(byName));
    // The local default: 4 pacer shards, each with its leader override set to auto.
    expect(found.filter(([n]) => n?.includes('/pacer/leader-override/'))).toHaveLength(4);
  });

  it('creates the budgets table with the shard index the pacer queries', async () => {
    const { Table } = await region.dynamodb.send(
      new DescribeTableCommand({ TableName: physicalName(regionResources.tables.budgets.suffix) }),
    );
    expect(Table?.GlobalSecondaryIndexes?.map((i) => [i.IndexName, i.KeySchema])).toEqual([
      [
        'by-pacer-shard',
        [
          { AttributeName: 'pacerShard', KeyType: 'HASH' },
          { AttributeName: 'updatedAt', KeyType: 'RANGE' },
        ],
      ],
    ]);
  });

  it('gives function instances endpoints of this region only', () => {
    const env = region.functionEnv('trackSpend');
    expect(env.AWS_ENDPOINT_URL_DYNAMODB).toBe(region.endpoints.dynamodb);
    expect(env.AWS_ENDPOINT_URL_KINESIS).toBe(region.endpoints.kinesis);
    expect(env.REDIS_NODES).toBe(region.redis.nodesEnv);
    expect(env.PACELINE_REGION).toBe('us-west-2');
  });

  it('prints the env a CLI needs: endpoints, Redis and the pacer shard count', () => {
    expect(region.clientEnv).toMatchObject({
      AWS_ENDPOINT_URL_DYNAMODB: region.endpoints.dynamodb,
      REDIS_NODES: region.redis.nodesEnv,
      REDIS_MODE: 'standalone',
      PACER_SHARDS: '4',
    });
  });
});
