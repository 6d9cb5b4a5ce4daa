/**
 * The local IAM layer against real SDK clients and the real emulators: a call outside the
 * synthesized policy of its caller fails locally with the error AWS would raise (exception name,
 * status, message naming the principal, the action and the resource), and nothing is written; a
 * call inside it goes through; an unknown access key is refused; every refusal is counted.
 * Then the real handlers in the process runtime and the ad-server client with one action removed
 * from their synthesized policies: the call is refused, visible, and nothing lands.
 */
import {
  BatchWriteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
} from '@aws-sdk/client-dynamodb';
import { DescribeReplicationGroupsCommand } from '@aws-sdk/client-elasticache';
import {
  GetRecordsCommand,
  GetShardIteratorCommand,
  ListShardsCommand,
  PutRecordsCommand,
} from '@aws-sdk/client-kinesis';
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { CreateQueueCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { GetParameterCommand, GetParametersByPathCommand } from '@aws-sdk/client-ssm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSqsServer } from '../../../local/emulators/sqs-server.js';
import { LOCAL_ACCOUNT_ID } from '../../../local/esm/lambda-shapes.js';
import { principalCredentials } from '../../../local/iam/policy.js';
import { type LocalRegion, startLocalRegion } from '../../../local/region.js';
import { type AwsEndpoints, dynamoDbClient, kinesisClient, ssmClient } from '../../../shared/aws/clients.js';
import { elastiCacheClient, s3Client, sqsClient } from '../../../shared/aws/ops-clients.js';
import {
  cacheReplicationGroupId,
  onFailureQueueName,
  pacerShardsPath,
  parameterPrefix,
} from '../../../shared/region/resources.js';

let region: LocalRegion;

beforeAll(async () => {
  region = await startLocalRegion({ region: 'us-east-1' });
}, 120_000);

afterAll(async () => {
  await region?.stop();
});

/** The region's endpoints, called as `principal` (a function name, `ad-server`) or a raw key. */
function as(principal: string, accessKeyId?: string): AwsEndpoints {
  const credentials = accessKeyId
    ? { accessKeyId, secretAccessKey: 'local' }
    : principalCredentials(region.region, principal);
  return { ...region.endpoints, credentials };
}

const tableArn = (name: string) => `arn:aws:dynamodb:us-east-1:${LOCAL_ACCOUNT_ID}:table/${name}`;

/** The error a promise rejects with. */
async function failure(p: Promise<unknown>): Promise<Error & { $metadata?: { httpStatusCode?: number } }> {
  try {
    await p;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected the call to be refused');
}

async function itemExists(db: DynamoDBClient, table: string, pk: string): Promise<boolean> {
  const out = await db.send(new GetItemCommand({ TableName: table, Key: { pk: { S: pk }, sk: { S: 'x' } } }));
  return out.Item !== undefined;
}

describe('the local IAM gate (real SDK clients, real emulators)', () => {
  it('refuses a DynamoDB write outside the caller’s policy with AWS’s AccessDeniedException; nothing is written', async () => {
    const budgets = region.tableName('budgets');
    const ingest = dynamoDbClient(as('ingest-actions'));
    const error = await failure(
      ingest.send(
        new PutItemCommand({ TableName: budgets, Item: { pk: { S: 'iam-probe' }, sk: { S: 'x' } } }),
      ),
    );
    expect(error.name).toBe('AccessDeniedException');
    expect(error.$metadata?.httpStatusCode).toBe(400);
    expect(error.message).toMatch(
      new RegExp(
        `^User: arn:aws:sts::${LOCAL_ACCOUNT_ID}:assumed-role/[^/]+/paceline-ingest-actions is not authorized to perform: dynamodb:PutItem on resource: ${tableArn(budgets)} because no identity-based policy allows the dynamodb:PutItem action$`,
      ),
    );
    expect(await itemExists(region.dynamodb, budgets, 'iam-probe')).toBe(false);
    // Inside its policy: the dead-letter table.
    await ingest.send(
      new PutItemCommand({
        TableName: region.tableName('deadLetters'),
        Item: { pk: { S: 'iam-probe' }, sk: { S: 'x' } },
      }),
    );
    expect(await itemExists(region.dynamodb, region.tableName('deadLetters'), 'iam-probe')).toBe(true);
    ingest.destroy();
  });

  it('checks a batch write per table: one table outside the policy refuses the whole batch', async () => {
    const ledger = region.tableName('spendLedger');
    const budgets = region.tableName('budgets');
    const track = dynamoDbClient(as('track-spend'));
    const put = (pk: string) => ({ PutRequest: { Item: { pk: { S: pk }, sk: { S: 'x' } } } });
    const error = await failure(
      track.send(
        new BatchWriteItemCommand({
          RequestItems: { [ledger]: [put('iam-b1')], [budgets]: [put('iam-b2')] },
        }),
      ),
    );
    expect(error.name).toBe('AccessDeniedException');
    expect(error.message).toContain(`dynamodb:BatchWriteItem on resource: ${tableArn(budgets)}`);
    expect(await itemExists(region.dynamodb, ledger, 'iam-b1')).toBe(false);
    await track.send(new BatchWriteItemCommand({ RequestItems: { [ledger]: [put('iam-b1')] } }));
    expect(await itemExists(region.dynamodb, ledger, 'iam-b1')).toBe(true);
    track.destroy();
  });

  it('checks a query on an index against the index ARN', async () => {
    const budgets = region.tableName('budgets');
    const query = (endpoints: AwsEndpoints) =>
      dynamoDbClient(endpoints).send(
        new QueryCommand({
          TableName: budgets,
          IndexName: 'by-pacer-shard',
          KeyConditionExpression: 'pacerShard = :s',
          ExpressionAttributeValues: { ':s': { S: '4:0' } },
        }),
      );
    await query(as('pacer'));
    // The ad-server policy grants the base table only (the index is the pacer's).
    const error = await failure(query(as('ad-server')));
    expect(error.message).toContain(`dynamodb:Query on resource: ${tableArn(budgets)}/index/by-pacer-shard`);
  });

  it('refuses SSM parameters outside the pacer’s exact list, as AccessDeniedException', async () => {
    const ssm = ssmClient(as('pacer'));
    const prefix = parameterPrefix(region.region);
    const ok = await ssm.send(new GetParameterCommand({ Name: `${prefix}${pacerShardsPath}` }));
    expect(ok.Parameter?.Value).toBe(String(region.description.settings.pacer.shards));
    const byPath = await failure(ssm.send(new GetParametersByPathCommand({ Path: prefix })));
    expect(byPath.name).toBe('AccessDeniedException');
    expect(byPath.message).toContain(
      `ssm:GetParametersByPath on resource: arn:aws:ssm:us-east-1:${LOCAL_ACCOUNT_ID}:parameter${prefix.slice(0, -1)}`,
    );
    const other = await failure(ssm.send(new GetParameterCommand({ Name: `${prefix}network/vpc-id` })));
    expect(other.name).toBe('AccessDeniedException');
    ssm.destroy();
  });

  it('holds S3 writes to the function’s own prefix and answers S3’s 403 AccessDenied', async () => {
    const bucket = region.bucketName('deadLetterPayloads');
    const s3 = s3Client(as('ingest-actions'));
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'ingest-actions/iam-probe', Body: 'x' }));
    const other = await failure(
      s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'track-spend/iam-probe', Body: 'x' })),
    );
    expect(other.name).toBe('AccessDenied');
    expect(other.$metadata?.httpStatusCode).toBe(403);
    expect(other.message).toContain(`s3:PutObject on resource: arn:aws:s3:::${bucket}/track-spend/iam-probe`);
    // Its policy writes only: reading its own object back is refused too.
    const read = await failure(
      s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'ingest-actions/iam-probe' })),
    );
    expect(read.name).toBe('AccessDenied');
    s3.destroy();
  });

  it('maps GetRecords to the stream its shard iterator belongs to', async () => {
    const kinesis = kinesisClient(as('ingest-actions'));
    const shardOf = async (stream: string) =>
      (await region.kinesis.send(new ListShardsCommand({ StreamName: stream }))).Shards?.[0]
        ?.ShardId as string;
    const actions = region.streamName('actions');
    const own = await kinesis.send(
      new GetShardIteratorCommand({
        StreamName: actions,
        ShardId: await shardOf(actions),
        ShardIteratorType: 'TRIM_HORIZON',
      }),
    );
    await kinesis.send(new GetRecordsCommand({ ShardIterator: own.ShardIterator }));
    // An iterator of the spend stream (taken by the operator) is not ingest-actions' to read.
    const spend = region.streamName('spend');
    const foreign = await region.kinesis.send(
      new GetShardIteratorCommand({
        StreamName: spend,
        ShardId: await shardOf(spend),
        ShardIteratorType: 'TRIM_HORIZON',
      }),
    );
    const error = await failure(
      kinesis.send(new GetRecordsCommand({ ShardIterator: foreign.ShardIterator })),
    );
    expect(error.name).toBe('AccessDeniedException');
    expect(error.message).toContain(
      `kinesis:GetRecords on resource: arn:aws:kinesis:us-east-1:${LOCAL_ACCOUNT_ID}:stream/${spend}`,
    );
    // The ad server puts events; it does not read streams.
    const adServer = kinesisClient(as('ad-server'));
    await adServer.send(
      new PutRecordsCommand({
        StreamName: actions,
        Records: [{ Data: Buffer.from('x'), PartitionKey: 'p' }],
      }),
    );
    const read = await failure(
      adServer.send(
        new GetShardIteratorCommand({
          StreamName: actions,
          ShardId: await shardOf(actions),
          ShardIteratorType: 'LATEST',
        }),
      ),
    );
    expect(read.name).toBe('AccessDeniedException');
    kinesis.destroy();
    adServer.destroy();
  });

  it('lets only the pacer discover the cache (ElastiCache XML AccessDenied for the others)', async () => {
    const describe = (endpoints: AwsEndpoints) =>
      elastiCacheClient(endpoints).send(
        new DescribeReplicationGroupsCommand({ ReplicationGroupId: cacheReplicationGroupId }),
      );
    const ok = await describe(as('pacer'));
    expect(ok.ReplicationGroups?.[0]?.ReplicationGroupId).toBe(cacheReplicationGroupId);
    const error = await failure(describe(as('track-spend')));
    expect(error.name).toBe('AccessDenied');
    expect(error.$metadata?.httpStatusCode).toBe(403);
  });

  it('gates the local SQS endpoint too: a function sends only to its own on-failure queue', async () => {
    const sqs = await startSqsServer({ guard: (server) => region.iam?.guard(server, 'sqs', region.region) });
    try {
      const endpoints = (principal: string) => ({ ...as(principal), sqs: sqs.url });
      const operator = sqsClient({ ...region.endpoints, sqs: sqs.url });
      const own = await operator.send(
        new CreateQueueCommand({ QueueName: onFailureQueueName('track-spend') }),
      );
      const other = await operator.send(
        new CreateQueueCommand({ QueueName: onFailureQueueName('ingest-actions') }),
      );
      const track = sqsClient(endpoints('track-spend'));
      await track.send(new SendMessageCommand({ QueueUrl: own.QueueUrl, MessageBody: '{}' }));
      const error = await failure(
        track.send(new SendMessageCommand({ QueueUrl: other.QueueUrl, MessageBody: '{}' })),
      );
      expect(error.name).toMatch(/^AccessDenied/);
      expect(error.message).toContain(
        `sqs:SendMessage on resource: arn:aws:sqs:us-east-1:${LOCAL_ACCOUNT_ID}:${onFailureQueueName('ingest-actions')}`,
      );
      for (const c of [operator, track]) c.destroy();
    } finally {
      await sqs.stop();
    }
  });

  it('lets every call through with the layer off (npm start -- --iam off)', async () => {
    const off = await startLocalRegion({ region: 'us-east-1', iam: 'off' });
    try {
      expect(off.iam).toBeUndefined();
      const ingest = dynamoDbClient({
        ...off.endpoints,
        credentials: principalCredentials('us-east-1', 'ingest-actions'),
      });
      await ingest.send(
        new PutItemCommand({
          TableName: off.tableName('budgets'),
          Item: { pk: { S: 'off-probe' }, sk: { S: 'x' } },
        }),
      );
      expect(await itemExists(off.dynamodb, off.tableName('budgets'), 'off-probe')).toBe(true);
      ingest.destroy();
    } finally {
      await off.stop();
    }
  });

  it('refuses an access key no principal has, as AWS refuses an unknown key', async () => {
    const db = await failure(
      dynamoDbClient(as('', 'AKIAUNKNOWN')).send(new QueryCommand({ TableName: 'x' })),
    );
    expect(db.name).toBe('UnrecognizedClientException');
    const s3 = await failure(
      s3Client(as('', 'AKIAUNKNOWN')).send(new GetObjectCommand({ Bucket: 'b', Key: 'k' })),
    );
    expect(s3.name).toBe('InvalidAccessKeyId');
  });

  it('counts and records every refusal with principal, action and resource', () => {
    const iam = region.iam;
    expect(iam).toBeDefined();
    const ingest = iam?.counts.get('us-east-1/ingest-actions');
    expect(ingest?.refused).toBeGreaterThanOrEqual(4);
    expect(ingest?.allowed).toBeGreaterThanOrEqual(3);
    expect(iam?.refusals).toContainEqual(
      expect.objectContaining({
        principal: 'us-east-1/ingest-actions',
        service: 'dynamodb',
        action: 'dynamodb:PutItem',
        resource: tableArn(region.tableName('budgets')),
      }),
    );
    expect(iam?.refusals.some((r) => r.principal === 'AKIAUNKNOWN')).toBe(true);
    // The operator's key is never checked, so never counted.
    expect(iam?.counts.has('local')).toBe(false);
  });
});
