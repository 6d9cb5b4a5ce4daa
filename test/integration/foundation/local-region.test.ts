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

  it('writes the initial parameters under the region prefix', async () => {
    const { Parameters } = await region.ssm.send(
      new GetParametersByPathCommand({ Path: parameterPrefix('us-west-2'), Recursive: true }),
    );
    expect(Parameters?.map((p) => [p.Name, p.Value])).toEqual(
      Object.values(regionResources.parameters).map((p) => [
        `${parameterPrefix('us-west-2')}${p.path}`,
        p.initial('us-west-2'),
      ]),
    );
  });

  it('gives function instances endpoints of this region only', () => {
    const env = region.functionEnv('trackSpend');
    expect(env.AWS_ENDPOINT_URL_DYNAMODB).toBe(region.endpoints.dynamodb);
    expect(env.AWS_ENDPOINT_URL_KINESIS).toBe(region.endpoints.kinesis);
    expect(env.REDIS_NODES).toBe(region.redis.nodesEnv);
    expect(env.PACELINE_REGION).toBe('us-west-2');
  });
});
