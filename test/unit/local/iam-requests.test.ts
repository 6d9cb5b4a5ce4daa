/**
 * Requests to the local endpoints, mapped to the IAM checks AWS makes: one per resource, with the
 * operation's action; batches per table, transactions per item; S3 by method, sub-resource and
 * key; SQS in both protocols; kinesalite shard iterators back to their stream. What cannot be
 * mapped says why (the gate refuses it).
 */
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import {
  accessKeyOf,
  type GatedRequest,
  type GatedService,
  mapRequest,
  needsBody,
  streamOfShardIterator,
} from '../../../local/iam/requests.js';

const where = { region: 'us-east-1', account: '000000000000' };
const arn = (service: string, resource: string) => `arn:aws:${service}:us-east-1:000000000000:${resource}`;

function json(service: GatedService, target: string, body: unknown) {
  const req: GatedRequest = {
    method: 'POST',
    url: '/',
    headers: { 'x-amz-target': target },
    body: Buffer.from(JSON.stringify(body)),
  };
  return mapRequest(service, req, where);
}

function s3(method: string, url: string, headers: Record<string, string> = {}, body = '') {
  return mapRequest('s3', { method, url, headers, body: Buffer.from(body) }, where);
}

describe('DynamoDB', () => {
  const ddb = (op: string, body: unknown) => json('dynamodb', `DynamoDB_20120810.${op}`, body);

  it('checks the table of a single-item operation, and the index of a query', () => {
    expect(ddb('PutItem', { TableName: 't', Item: {} })).toEqual({
      checks: [{ action: 'dynamodb:PutItem', resource: arn('dynamodb', 'table/t') }],
    });
    expect(ddb('Query', { TableName: 't', IndexName: 'by-x' })).toEqual({
      checks: [{ action: 'dynamodb:Query', resource: arn('dynamodb', 'table/t/index/by-x') }],
    });
    const full = 'arn:aws:dynamodb:us-west-2:000000000000:table/t';
    expect(ddb('GetItem', { TableName: full })).toEqual({
      checks: [{ action: 'dynamodb:GetItem', resource: full }],
    });
  });

  it('checks batches per table and transactions per item with the item’s action', () => {
    expect(ddb('BatchWriteItem', { RequestItems: { a: [], b: [] } })).toEqual({
      checks: [
        { action: 'dynamodb:BatchWriteItem', resource: arn('dynamodb', 'table/a') },
        { action: 'dynamodb:BatchWriteItem', resource: arn('dynamodb', 'table/b') },
      ],
    });
    expect(
      ddb('TransactWriteItems', {
        TransactItems: [
          { Put: { TableName: 'a' } },
          { ConditionCheck: { TableName: 'b' } },
          { Delete: { TableName: 'a' } },
        ],
      }),
    ).toEqual({
      checks: [
        { action: 'dynamodb:PutItem', resource: arn('dynamodb', 'table/a') },
        { action: 'dynamodb:ConditionCheckItem', resource: arn('dynamodb', 'table/b') },
        { action: 'dynamodb:DeleteItem', resource: arn('dynamodb', 'table/a') },
      ],
    });
  });

  it('checks listing against * and cannot map an operation without a table', () => {
    expect(ddb('ListTables', {})).toEqual({ checks: [{ action: 'dynamodb:ListTables', resource: '*' }] });
    expect(ddb('ExecuteStatement', { Statement: 'SELECT' })).toEqual({
      error: 'dynamodb:ExecuteStatement names no table',
    });
    expect(ddb('BatchGetItem', {})).toMatchObject({ error: expect.stringContaining('without RequestItems') });
    expect(
      mapRequest('dynamodb', { method: 'POST', url: '/', headers: {}, body: Buffer.alloc(0) }, where),
    ).toMatchObject({
      error: expect.stringContaining('x-amz-target'),
    });
    expect(
      mapRequest(
        'dynamodb',
        {
          method: 'POST',
          url: '/',
          headers: { 'x-amz-target': 'DynamoDB_20120810.GetItem' },
          body: Buffer.from('{'),
        },
        where,
      ),
    ).toMatchObject({ error: expect.stringContaining('cannot be read') });
  });
});

describe('Kinesis', () => {
  const kin = (op: string, body: unknown) => json('kinesis', `Kinesis_20131202.${op}`, body);

  it('checks the stream by name or ARN', () => {
    expect(kin('PutRecords', { StreamName: 's', Records: [] })).toEqual({
      checks: [{ action: 'kinesis:PutRecords', resource: arn('kinesis', 'stream/s') }],
    });
    expect(kin('PutRecord', { StreamARN: arn('kinesis', 'stream/x') })).toEqual({
      checks: [{ action: 'kinesis:PutRecord', resource: arn('kinesis', 'stream/x') }],
    });
    expect(kin('ListShards', { NextToken: 'n' })).toEqual({ error: 'kinesis:ListShards names no stream' });
  });

  it('finds the stream of a kinesalite shard iterator (GetRecords names no stream)', () => {
    const db = createRequire(import.meta.url)('kinesalite/db/index.js') as {
      createShardIterator(stream: string, shard: string, seq: string): string;
    };
    const iterator = db.createShardIterator('paceline-spend', 'shardId-000000000001', '49000');
    expect(streamOfShardIterator(iterator)).toBe('paceline-spend');
    expect(kin('GetRecords', { ShardIterator: iterator })).toEqual({
      checks: [{ action: 'kinesis:GetRecords', resource: arn('kinesis', 'stream/paceline-spend') }],
    });
    expect(kin('GetRecords', { ShardIterator: 'AAAAAAAAAAE=' })).toMatchObject({
      error: expect.stringContaining('iterator'),
    });
  });
});

describe('SSM', () => {
  const ssm = (op: string, body: unknown) => json('ssm', `AmazonSSM.${op}`, body);

  it('checks each named parameter, and a path without its trailing slash', () => {
    expect(ssm('GetParameter', { Name: '/paceline/us-east-1/pacer/shards' })).toEqual({
      checks: [
        { action: 'ssm:GetParameter', resource: arn('ssm', 'parameter/paceline/us-east-1/pacer/shards') },
      ],
    });
    expect(ssm('GetParameter', { Name: 'plain' })).toEqual({
      checks: [{ action: 'ssm:GetParameter', resource: arn('ssm', 'parameter/plain') }],
    });
    expect(ssm('GetParameters', { Names: ['/a', '/b'] })).toEqual({
      checks: [
        { action: 'ssm:GetParameters', resource: arn('ssm', 'parameter/a') },
        { action: 'ssm:GetParameters', resource: arn('ssm', 'parameter/b') },
      ],
    });
    expect(ssm('GetParametersByPath', { Path: '/paceline/us-east-1/' })).toEqual({
      checks: [{ action: 'ssm:GetParametersByPath', resource: arn('ssm', 'parameter/paceline/us-east-1') }],
    });
  });
});

describe('S3 (path-style REST)', () => {
  const bucket = 'arn:aws:s3:::paceline-dead-letter-payloads';

  it('maps object operations by method and sub-resource', () => {
    const url = '/paceline-dead-letter-payloads/ingest-actions/a%20b.bin';
    const object = `${bucket}/ingest-actions/a b.bin`;
    expect(s3('PUT', `${url}?x-id=PutObject`)).toEqual({
      checks: [{ action: 's3:PutObject', resource: object }],
    });
    expect(s3('GET', url)).toEqual({ checks: [{ action: 's3:GetObject', resource: object }] });
    expect(s3('HEAD', url)).toEqual({ checks: [{ action: 's3:GetObject', resource: object }] });
    expect(s3('GET', `${url}?versionId=3`)).toEqual({
      checks: [{ action: 's3:GetObjectVersion', resource: object }],
    });
    expect(s3('DELETE', url)).toEqual({ checks: [{ action: 's3:DeleteObject', resource: object }] });
    expect(s3('PUT', `${url}?tagging`)).toEqual({
      checks: [{ action: 's3:PutObjectTagging', resource: object }],
    });
    expect(s3('POST', `${url}?uploads`)).toEqual({ checks: [{ action: 's3:PutObject', resource: object }] });
  });

  it('checks a copy source for reading, and a multi-object delete per key', () => {
    expect(s3('PUT', '/b/to', { 'x-amz-copy-source': '/src/from%2Fkey?versionId=1' })).toEqual({
      checks: [
        { action: 's3:PutObject', resource: 'arn:aws:s3:::b/to' },
        { action: 's3:GetObject', resource: 'arn:aws:s3:::src/from/key' },
      ],
    });
    expect(needsBody('s3', 'POST', '/b?delete')).toBe(true);
    expect(needsBody('s3', 'PUT', '/b/k')).toBe(false);
    expect(
      s3(
        'POST',
        '/b?delete',
        {},
        '<Delete><Object><Key>x/1</Key></Object><Object><Key>a&amp;b</Key></Object></Delete>',
      ),
    ).toEqual({
      checks: [
        { action: 's3:DeleteObject', resource: 'arn:aws:s3:::b/x/1' },
        { action: 's3:DeleteObject', resource: 'arn:aws:s3:::b/a&b' },
      ],
    });
  });

  it('maps bucket operations, and refuses to guess an unknown sub-resource', () => {
    expect(s3('GET', '/b?list-type=2&prefix=x')).toEqual({
      checks: [{ action: 's3:ListBucket', resource: 'arn:aws:s3:::b' }],
    });
    expect(s3('HEAD', '/b')).toEqual({ checks: [{ action: 's3:ListBucket', resource: 'arn:aws:s3:::b' }] });
    expect(s3('PUT', '/b')).toEqual({ checks: [{ action: 's3:CreateBucket', resource: 'arn:aws:s3:::b' }] });
    expect(s3('GET', '/b?versioning')).toEqual({
      checks: [{ action: 's3:GetBucketVersioning', resource: 'arn:aws:s3:::b' }],
    });
    expect(s3('GET', '/')).toEqual({ checks: [{ action: 's3:ListAllMyBuckets', resource: '*' }] });
    expect(s3('PUT', '/b?lifecycle')).toMatchObject({ error: expect.stringContaining('lifecycle') });
  });
});

describe('SQS and ElastiCache', () => {
  it('maps SQS in the JSON and the Query protocol, batches to their single action', () => {
    const url = 'http://127.0.0.1:1/000000000000/paceline-track-spend-on-failure';
    expect(json('sqs', 'AmazonSQS.SendMessageBatch', { QueueUrl: url })).toEqual({
      checks: [{ action: 'sqs:SendMessage', resource: arn('sqs', 'paceline-track-spend-on-failure') }],
    });
    const form = new URLSearchParams({ Action: 'GetQueueUrl', QueueName: 'q' }).toString();
    expect(
      mapRequest('sqs', { method: 'POST', url: '/', headers: {}, body: Buffer.from(form) }, where),
    ).toEqual({
      checks: [{ action: 'sqs:GetQueueUrl', resource: arn('sqs', 'q') }],
    });
  });

  it('maps DescribeReplicationGroups to the group (or every group)', () => {
    const ec = (params: Record<string, string>) =>
      mapRequest(
        'elasticache',
        { method: 'POST', url: '/', headers: {}, body: Buffer.from(new URLSearchParams(params).toString()) },
        where,
      );
    expect(ec({ Action: 'DescribeReplicationGroups', ReplicationGroupId: 'paceline' })).toEqual({
      checks: [
        {
          action: 'elasticache:DescribeReplicationGroups',
          resource: arn('elasticache', 'replicationgroup:paceline'),
        },
      ],
    });
    expect(ec({ Action: 'DescribeReplicationGroups' })).toEqual({
      checks: [
        {
          action: 'elasticache:DescribeReplicationGroups',
          resource: arn('elasticache', 'replicationgroup:*'),
        },
      ],
    });
    expect(ec({ Action: 'DeleteCacheCluster' })).toMatchObject({
      error: expect.stringContaining('DeleteCacheCluster'),
    });
  });
});

describe('access keys', () => {
  it('reads the key id of a SigV4 header and of a presigned URL', () => {
    const auth =
      'AWS4-HMAC-SHA256 Credential=local-us-east-1-pacer/20261127/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=ab';
    expect(accessKeyOf({ authorization: auth }, '/')).toBe('local-us-east-1-pacer');
    expect(
      accessKeyOf(
        {},
        '/b/k?X-Amz-Credential=local-us-east-1-ad-server%2F20261127%2Fus-east-1%2Fs3%2Faws4_request',
      ),
    ).toBe('local-us-east-1-ad-server');
    expect(accessKeyOf({}, '/')).toBeUndefined();
  });
});
