/**
 * Who calls what, derived from the region description alone: which AWS services each function
 * and the ad-server client call over the network (so the VPC gets a route to each), and which IAM
 * actions on which described resources they use (so each role gets exactly those). The CDK stack
 * builds its VPC endpoints and policies from these functions; the template tests check the
 * synthesized templates against them; nothing else lists them.
 *
 * Pure functions over the description: ARNs are built from the deployment's names, account,
 * region and partition; only the bucket (named by CloudFormation) and the data key (an id AWS
 * assigns) are passed in, as the stack's references to them.
 */
import {
  type BucketKey,
  type FunctionKey,
  type FunctionSpec,
  LEADER_OVERRIDE_PATH_PREFIX,
  type RegionDescription,
  type StreamKey,
  type TableAccess,
  type TableKey,
  type TableSpec,
} from './resources.js';

/** An AWS API a function or the ad-server client calls from inside a VPC. */
export type AwsService = 'dynamodb' | 's3' | 'kinesis' | 'ssm' | 'elasticache' | 'xray';

/** Services a VPC reaches through gateway endpoints (free, route-table entries); the rest need interface endpoints. */
export const GATEWAY_SERVICES: readonly AwsService[] = ['dynamodb', 's3'];

/** The interface endpoint service name of each service (`com.amazonaws.<region>.<name>`). */
export const ENDPOINT_SERVICE_NAME: Readonly<Record<AwsService, string>> = {
  dynamodb: 'dynamodb',
  s3: 's3',
  kinesis: 'kinesis-streams',
  ssm: 'ssm',
  elasticache: 'elasticache',
  xray: 'xray',
};

/**
 * Every function runs with X-Ray active tracing: the X-Ray daemon inside the execution
 * environment sends the function's segments to the X-Ray API over the function's own network
 * (the VPC), so the VPC needs a route to X-Ray and the role its two actions.
 */
export const FUNCTION_TRACING_ACTIVE = true;

/** DynamoDB actions per access level (no stream actions: no function reads a table stream). */
export const TABLE_ACTIONS = {
  read: [
    'dynamodb:BatchGetItem',
    'dynamodb:ConditionCheckItem',
    'dynamodb:DescribeTable',
    'dynamodb:GetItem',
    'dynamodb:Query',
    'dynamodb:Scan',
  ],
  write: [
    'dynamodb:BatchWriteItem',
    'dynamodb:DeleteItem',
    'dynamodb:DescribeTable',
    'dynamodb:PutItem',
    'dynamodb:UpdateItem',
  ],
} as const;

/**
 * Key actions for data DynamoDB, Kinesis, S3 and SQS encrypt with the region's key: decrypting
 * reads, and for writes the data keys (named exactly: `kms:GenerateDataKey*` would also allow
 * key pairs, `kms:ReEncrypt*` is these two).
 */
const KEY_READ = ['kms:Decrypt', 'kms:DescribeKey'] as const;
const KEY_WRITE = [
  'kms:Encrypt',
  'kms:GenerateDataKey',
  'kms:GenerateDataKeyWithoutPlaintext',
  'kms:ReEncryptFrom',
  'kms:ReEncryptTo',
] as const;

/**
 * What Lambda's Kinesis event source needs of the function's role to read the stream for it
 * (AWS Lambda Developer Guide, "Kinesis: execution role permissions").
 */
const STREAM_SOURCE_ACTIONS = [
  'kinesis:DescribeStream',
  'kinesis:DescribeStreamSummary',
  'kinesis:GetRecords',
  'kinesis:GetShardIterator',
  'kinesis:ListShards',
  'kinesis:SubscribeToShard',
] as const;

/**
 * What Lambda needs of the role of a function in a VPC to manage its network interfaces
 * (AWSLambdaVPCAccessExecutionRole's EC2 actions). They have no resource-level permissions
 * Lambda's own checks accept, hence `*`.
 */
const VPC_ACTIONS = [
  'ec2:AssignPrivateIpAddresses',
  'ec2:CreateNetworkInterface',
  'ec2:DeleteNetworkInterface',
  'ec2:DescribeNetworkInterfaces',
  'ec2:DescribeSubnets',
  'ec2:UnassignPrivateIpAddresses',
] as const;

/** X-Ray's trace upload actions (no resource-level permissions: `*`). */
const XRAY_ACTIONS = ['xray:PutTelemetryRecords', 'xray:PutTraceSegments'] as const;

/** Where the ARNs are: the deployment's names, account, region and peers, and two references. */
export interface AccessContext {
  readonly partition: string;
  readonly account: string;
  readonly region: string;
  /** The deployment's other regions (a pacer reads their switch and publishes into their cache). */
  readonly peerRegions: readonly string[];
  /** ARN of a bucket (its name is CloudFormation's): the stack's reference to it. */
  readonly bucketArn: (key: BucketKey) => string;
  /** ARN of the region's data key: the stack's reference to it. */
  readonly keyArn: string;
}

/** One IAM statement (Allow). */
export interface AccessStatement {
  /** Statement id: what the permission is for. */
  readonly sid: string;
  readonly actions: readonly string[];
  /** ARNs, or `['*']` for actions without resource-level permissions. */
  readonly resources: readonly string[];
  /** IAM condition block. @default none */
  readonly condition?: Readonly<Record<string, Readonly<Record<string, readonly string[]>>>>;
}

/** Builds ARNs of described resources (see {@link AccessContext}). */
function arns(d: RegionDescription, c: AccessContext) {
  const arn = (service: string, resource: string, region = c.region) =>
    `arn:${c.partition}:${service}:${region}:${c.account}:${resource}`;
  return {
    table: (key: TableKey) => arn('dynamodb', `table/${d.names.resource(d.tables[key].suffix)}`),
    index: (key: TableKey, index: string) =>
      arn('dynamodb', `table/${d.names.resource(d.tables[key].suffix)}/index/${index}`),
    stream: (key: StreamKey) => arn('kinesis', `stream/${d.names.resource(d.streams[key].suffix)}`),
    queue: (name: string) => arn('sqs', d.names.onFailureQueueName(name)),
    logGroup: (name: string) => arn('logs', `log-group:${d.names.logGroupName(name)}:*`),
    parameter: (path: string, region = c.region) =>
      arn('ssm', `parameter${d.names.parameterPrefix(region)}${path}`, region),
    cacheGroup: (region = c.region) =>
      arn('elasticache', `replicationgroup:${d.names.cacheReplicationGroupId}`, region),
    cacheUser: (region = c.region) => arn('elasticache', `user:${d.names.cacheUserId}`, region),
  };
}

/** Merges statements of the same sid (the same purpose granted twice, e.g. the key for two tables). */
function merged(statements: readonly AccessStatement[]): AccessStatement[] {
  const bySid = new Map<string, AccessStatement>();
  for (const s of statements) {
    const prior = bySid.get(s.sid);
    bySid.set(
      s.sid,
      prior
        ? {
            ...prior,
            actions: [...new Set([...prior.actions, ...s.actions])].sort(),
            resources: [...new Set([...prior.resources, ...s.resources])],
          }
        : { ...s, actions: [...new Set(s.actions)].sort() },
    );
  }
  return [...bySid.values()];
}

/** PascalCase of a described key (`spendLedger` → `SpendLedger`), for statement ids. */
const sidOf = (key: string) => key.charAt(0).toUpperCase() + key.slice(1).replace(/[^A-Za-z0-9]/g, '');

/**
 * Every IAM statement a function's role needs, and nothing more: its described tables (by access
 * level, named indexes for reads), streams it writes or consumes, its prefix of each bucket, the
 * key for those, its own log group, the cache (own region; the pacer also the peers', for
 * failover publishing), its parameters and peer discovery, its on-failure queue, and the VPC
 * and X-Ray actions Lambda requires.
 */
export function functionAccess(
  d: RegionDescription,
  fnKey: FunctionKey,
  c: AccessContext,
): AccessStatement[] {
  const spec: FunctionSpec = d.functions[fnKey];
  const a = arns(d, c);
  const out: AccessStatement[] = [];
  let keyWrites = false;
  let keyUse = false;
  for (const [key, access] of Object.entries(spec.tables) as [TableKey, TableAccess][]) {
    const reads = access !== 'write';
    const writes = access !== 'read';
    out.push({
      sid: `Table${sidOf(key)}`,
      actions: [...(reads ? TABLE_ACTIONS.read : []), ...(writes ? TABLE_ACTIONS.write : [])],
      resources: [
        a.table(key),
        ...(reads ? ((d.tables[key] as TableSpec).indexes ?? []) : []).map((i) => a.index(key, i.name)),
      ],
    });
    keyUse = true;
    keyWrites ||= writes;
  }
  for (const key of spec.writesStreams) {
    out.push({
      sid: `PutRecords${sidOf(key)}`,
      actions: ['kinesis:PutRecord', 'kinesis:PutRecords'],
      resources: [a.stream(key)],
    });
    keyUse = keyWrites = true;
  }
  if (spec.source) {
    out.push({
      sid: 'EventSource',
      actions: STREAM_SOURCE_ACTIONS,
      resources: [a.stream(spec.source.stream)],
    });
    // Batches Lambda gives up on go to the on-failure queue (SQS with the region's key).
    out.push({ sid: 'OnFailure', actions: ['sqs:SendMessage'], resources: [a.queue(spec.name)] });
    keyUse = keyWrites = true;
  }
  for (const [key, access] of Object.entries(spec.buckets ?? {}) as [BucketKey, TableAccess][]) {
    // Objects only under the function's own prefix (`<name>/…`: the keys it writes).
    out.push({
      sid: `Objects${sidOf(key)}`,
      actions: [
        ...(access === 'read' ? [] : ['s3:PutObject']),
        ...(access === 'write' ? [] : ['s3:GetObject']),
      ],
      resources: [`${c.bucketArn(key)}/${spec.name}/*`],
    });
    keyUse = true;
    keyWrites ||= access !== 'read';
  }
  if (keyUse)
    out.push({
      sid: 'DataKey',
      actions: [...KEY_READ, ...(keyWrites ? KEY_WRITE : [])],
      resources: [c.keyArn],
    });
  if (spec.usesRedis) {
    const regions = [c.region, ...(spec.readsParameters ? c.peerRegions : [])];
    out.push({
      sid: 'CacheConnect',
      actions: ['elasticache:Connect'],
      resources: regions.flatMap((r) => [a.cacheGroup(r), a.cacheUser(r)]),
    });
  }
  if (spec.readsParameters) {
    // Exactly the region's described parameters (no prefix wildcard), and each peer region's
    // publisher switch (a pacer publishes into every cache whose switch names its region).
    out.push({
      sid: 'Parameters',
      actions: ['ssm:GetParameter', 'ssm:GetParameters'],
      resources: [
        ...Object.values(d.parameters)
          .filter((p) => !p.path.startsWith(LEADER_OVERRIDE_PATH_PREFIX))
          .map((p) => a.parameter(p.path)),
        // The shards' leader overrides as one family (one per shard, up to 256: listing each would
        // pass IAM's 10,240-character limit of a role's inline policies).
        ...(Object.values(d.parameters).some((p) => p.path.startsWith(LEADER_OVERRIDE_PATH_PREFIX))
          ? [a.parameter(`${LEADER_OVERRIDE_PATH_PREFIX}*`)]
          : []),
        ...c.peerRegions.map((r) => a.parameter(d.parameters.publisherRegion.path, r)),
      ],
    });
    // Peer caches are discovered, not configured: DescribeReplicationGroups on the same-named
    // group of this and every peer region.
    out.push({
      sid: 'DiscoverCaches',
      actions: ['elasticache:DescribeReplicationGroups'],
      resources: [c.region, ...c.peerRegions].map((r) => a.cacheGroup(r)),
    });
  }
  out.push({
    sid: 'Logs',
    actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
    resources: [a.logGroup(spec.name)],
  });
  out.push(...noResourceLevelAccess());
  return merged(out);
}

/**
 * The statements Lambda requires whose actions have no resource-level permissions (`*`): the
 * VPC network interfaces and X-Ray. The stack keeps them in a policy of their own, so their
 * acknowledgement covers nothing else.
 */
export function noResourceLevelAccess(): AccessStatement[] {
  return [
    { sid: 'VpcNetworkInterfaces', actions: VPC_ACTIONS, resources: ['*'] },
    ...(FUNCTION_TRACING_ACTIVE ? [{ sid: 'XRay', actions: XRAY_ACTIONS, resources: ['*'] }] : []),
  ];
}

/**
 * Everything the ad-server client library uses in a region (the description's `adServer`), as
 * one policy: its table actions, puts on the streams, the shard-count parameter, the key only via
 * DynamoDB and Kinesis of this region, and IAM authentication to the cache. No wildcard.
 */
export function adServerAccess(d: RegionDescription, c: AccessContext): AccessStatement[] {
  const a = arns(d, c);
  const use = d.adServer;
  const tableStatements = (Object.entries(use.tables) as [TableKey, readonly string[]][]).map(
    ([key, actions]): AccessStatement => ({ sid: `Table${sidOf(key)}`, actions, resources: [a.table(key)] }),
  );
  return merged([
    ...tableStatements,
    {
      sid: 'PutEvents',
      actions: ['kinesis:PutRecord', 'kinesis:PutRecords'],
      resources: use.putsStreams.map((s) => a.stream(s)),
    },
    {
      sid: 'PacerShards',
      actions: ['ssm:GetParameter'],
      resources: use.readsParameters.map((p) => a.parameter(p)),
    },
    {
      sid: 'Key',
      actions: ['kms:Decrypt', 'kms:GenerateDataKey'],
      resources: [c.keyArn],
      condition: {
        StringEquals: {
          'kms:ViaService': [`dynamodb.${c.region}.amazonaws.com`, `kinesis.${c.region}.amazonaws.com`],
        },
      },
    },
    ...(use.usesRedis
      ? [
          {
            sid: 'CacheConnect',
            actions: ['elasticache:Connect'],
            resources: [a.cacheGroup(), a.cacheUser()],
          },
        ]
      : []),
  ]);
}

/**
 * The AWS APIs a function calls over its own network: DynamoDB for its tables, S3 for its
 * buckets, Kinesis when it writes a stream, SSM and ElastiCache (DescribeReplicationGroups) when
 * it reads parameters, X-Ray for active tracing. Not listed: what Lambda does for the function
 * outside its network (reading its stream, the on-failure queue, logs, network interfaces), what
 * services do with the key server-side, and the cache (data plane; IAM tokens are signed locally).
 */
export function functionServices(spec: FunctionSpec): AwsService[] {
  const out = new Set<AwsService>();
  if (Object.keys(spec.tables).length > 0) out.add('dynamodb');
  if (Object.keys(spec.buckets ?? {}).length > 0) out.add('s3');
  if (spec.writesStreams.length > 0) out.add('kinesis');
  if (spec.readsParameters) {
    out.add('ssm');
    out.add('elasticache');
  }
  if (FUNCTION_TRACING_ACTIVE) out.add('xray');
  return [...out].sort();
}

/** The AWS APIs the ad-server client calls (its fleet's network needs a route to each). */
export function adServerServices(d: RegionDescription): AwsService[] {
  const out = new Set<AwsService>();
  if (Object.keys(d.adServer.tables).length > 0) out.add('dynamodb');
  if (d.adServer.putsStreams.length > 0) out.add('kinesis');
  if (d.adServer.readsParameters.length > 0) out.add('ssm');
  return [...out].sort();
}

/** Every service any function of the region calls, split by the endpoint kind the VPC needs. */
export function regionEndpoints(d: RegionDescription): { gateway: AwsService[]; interface: AwsService[] } {
  const all = new Set(Object.values(d.functions).flatMap((f: FunctionSpec) => functionServices(f)));
  return endpointsFor([...all]);
}

/** Splits services into gateway and interface endpoints (S3 and DynamoDB always get a gateway). */
export function endpointsFor(services: readonly AwsService[]): {
  gateway: AwsService[];
  interface: AwsService[];
} {
  return {
    gateway: [...GATEWAY_SERVICES],
    interface: [...new Set(services)].filter((s) => !GATEWAY_SERVICES.includes(s)).sort(),
  };
}
