/**
 * A local region: the emulators of one AWS region plus its resources, provisioned from the same
 * description the CDK stack uses (`shared/region/resources.ts`).
 */

import { join } from 'node:path';
import { CreateTableCommand, type DynamoDBClient, ResourceInUseException } from '@aws-sdk/client-dynamodb';
import { CreateStreamCommand, type KinesisClient, waitUntilStreamExists } from '@aws-sdk/client-kinesis';
import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { PutParameterCommand, type SSMClient } from '@aws-sdk/client-ssm';
import {
  type AwsEndpoints,
  dynamoDbClient,
  endpointsToEnv,
  kinesisClient,
  REGIONS_ENV,
  ssmClient,
} from '../shared/aws/clients.js';
import { s3Client } from '../shared/aws/ops-clients.js';
import { clientCredentialsEnv } from '../shared/client/config.js';
import {
  type BucketKey,
  type FunctionKey,
  functionEnvironment,
  localPacerSettings,
  pacerEnv,
  parameterPrefix,
  physicalName,
  type RegionDescription,
  redisEnv,
  regionDescription,
  regionResources,
  type StreamKey,
  type TableKey,
} from '../shared/region/resources.js';
import { type RunningEmulator, startDynalite, startKinesalite, startS3 } from './emulators/aws.js';
import { type RunningElastiCache, startElastiCacheServer } from './emulators/elasticache-server.js';
import { assertPortsFree } from './emulators/net.js';
import {
  RedisServerMissingError,
  type RunningRedis,
  redisServerAvailable,
  startRedis,
} from './emulators/redis.js';
import { type RunningSsm, startSsmServer } from './emulators/ssm-server.js';
import type { SupervisionListener } from './emulators/supervision.js';
import type { GlobalTablesStandIn } from './global-tables.js';
import type { LocalIam } from './iam/gate.js';
import {
  AD_SERVER_PRINCIPAL,
  accessKeyFor,
  LOCAL_SECRET_ACCESS_KEY,
  principalCredentials,
} from './iam/policy.js';
import type { GatedService } from './iam/requests.js';
import {
  credentialsEnv,
  gateOption,
  type LocalRegionIamOptions,
  regionIam,
  s3AccessKeys,
} from './iam/setup.js';

/** Fixed ports of a region's emulators (stable endpoints across restarts). */
export interface RegionPorts {
  /** One per Redis node (3 in cluster mode). */
  readonly redis: readonly number[];
  readonly dynamodb: number;
  readonly kinesis: number;
  readonly ssm: number;
  readonly s3: number;
  /** The ElastiCache API stand-in (DescribeReplicationGroups). */
  readonly elasticache: number;
}

/**
 * First port of the stable layout `npm start` uses; `--base-port` overrides. Chosen so every block
 * of up to {@link MAX_STABLE_REGIONS} regions, cluster bus ports (+10000) included, stays below
 * 32768, where Linux's ephemeral range (`net.ipv4.ip_local_port_range`, default 32768–60999)
 * starts: a default inside that range is sometimes held by some process's outgoing connection,
 * and `npm start` would then refuse to start for no reason the developer can see.
 */
export const DEFAULT_BASE_PORT = 14100;

/** Regions the default port layout is sized for (the runner accepts more with `--base-port`). */
export const MAX_STABLE_REGIONS = 8;

/** Ports each region's block spans: region `i` of a runner uses `base + i × REGION_PORT_STRIDE + …`. */
export const REGION_PORT_STRIDE = 10;

/**
 * The stable port layout: region number `index` (its position in `--regions`) gets the block
 * `base + 10 × index`: Redis `+0` (cluster `+0..+2`), DynamoDB `+5`, Kinesis `+6`, SSM `+7`,
 * S3 `+8`, the ElastiCache API `+9`. A cluster's bus ports are Redis's + 10000.
 */
export function regionPorts(base: number, index: number, redisMode: 'standalone' | 'cluster'): RegionPorts {
  const b = base + REGION_PORT_STRIDE * index;
  return {
    redis: redisMode === 'cluster' ? [b, b + 1, b + 2] : [b],
    dynamodb: b + 5,
    kinesis: b + 6,
    ssm: b + 7,
    s3: b + 8,
    elasticache: b + 9,
  };
}

/** Options of {@link startLocalRegion}. */
export interface LocalRegionOptions {
  /** AWS region name this local region stands for. @default 'us-east-1' */
  readonly region?: string;
  /** Redis deployment. @default 'standalone' */
  readonly redisMode?: 'standalone' | 'cluster';
  /**
   * The region description to provision and run (pacer shards and instances, …).
   * @default regionDescription({ pacer: localPacerSettings }) — 4 pacer shards × 3 instances
   */
  readonly description?: RegionDescription;
  /** Fixed ports (see {@link regionPorts}); refused with a clear error when taken. @default free ports */
  readonly ports?: RegionPorts;
  /**
   * Keep the region's state in this directory across restarts: Redis's append-only file,
   * dynalite's and kinesalite's LevelDB stores, the SSM parameters and the S3 objects.
   * @default in memory (everything is gone when the region stops)
   */
  readonly dataDir?: string;
  /** Reports of the emulators' supervisors (a server died, was restarted). @default none */
  readonly onSupervisionEvent?: SupervisionListener;
  /**
   * Replication of the global tables with other local regions (the DynamoDB endpoint becomes the
   * stand-in's proxy for this region). @default none — a single region
   */
  readonly globalTables?: GlobalTablesStandIn;
  /**
   * Every region of the local deployment, in order (`PACELINE_REGIONS` in the client environment:
   * with more than one, clients lease within their region's allocation). @default this region alone
   */
  readonly deploymentRegions?: readonly string[];
  /**
   * The local IAM layer (docs/local-region.md, "IAM"): every call a function or the ad-server
   * client makes is checked against the policy the stack synthesizes for it. `'off'` lets every
   * call through; a {@link LocalIam} is shared with other regions of the same runtime.
   * @default on, with the policies synthesized for this region alone
   */
  readonly iam?: 'off' | LocalIam | LocalRegionIamOptions;
}

export { type LocalRegionIamOptions, localIam } from './iam/setup.js';

/** The description a local region uses unless told otherwise (4 pacer shards instead of 24). */
export function localDescription(): RegionDescription {
  return regionDescription({ pacer: localPacerSettings });
}

/** A running local region. */
export interface LocalRegion {
  readonly region: string;
  /** What this region was provisioned from. */
  readonly description: RegionDescription;
  readonly endpoints: AwsEndpoints & {
    readonly dynamodb: string;
    readonly kinesis: string;
    readonly ssm: string;
    readonly s3: string;
    /** The local ElastiCache API (DescribeReplicationGroups answers with this region's Redis). */
    readonly elasticache: string;
  };
  /** The dynalite emulator (suspend()/resume() it to simulate a DynamoDB outage). */
  readonly dynamoEmulator: RunningEmulator;
  /** Every in-process emulator (fault injection: `crash()`, `suspend()`). */
  readonly emulators: {
    readonly dynamodb: RunningEmulator;
    readonly kinesis: RunningEmulator;
    readonly ssm: RunningSsm;
    readonly s3: RunningEmulator;
  };
  /** Where the region keeps its state, if persistent. */
  readonly dataDir?: string;
  readonly redis: RunningRedis;
  readonly dynamodb: DynamoDBClient;
  readonly kinesis: KinesisClient;
  readonly ssm: SSMClient;
  readonly s3: S3Client;
  tableName(key: TableKey): string;
  streamName(key: StreamKey): string;
  bucketName(key: BucketKey): string;
  /**
   * The complete environment of a function instance: resources, Redis, endpoints, and the
   * function's own credentials (its principal in the local IAM layer).
   */
  functionEnv(key: FunctionKey): Record<string, string>;
  /** The IAM layer enforcing this region's endpoints; undefined when off. */
  readonly iam?: LocalIam;
  /**
   * Environment that points any SDK client and Paceline CLI at this region: the AWS endpoints and
   * the operator's credentials (`AWS_ACCESS_KEY_ID=local`), the ad-server client's own key
   * (`PACELINE_CLIENT_ACCESS_KEY_ID`), Redis (`REDIS_NODES`, `REDIS_MODE`) and the pacer shard
   * count (`PACER_SHARDS`).
   */
  readonly clientEnv: Record<string, string>;
  stop(): Promise<void>;
}

/** Starts the emulators of one region and creates its tables, streams and parameters. */
export async function startLocalRegion(options: LocalRegionOptions = {}): Promise<LocalRegion> {
  const region = options.region ?? 'us-east-1';
  const description = options.description ?? localDescription();
  const started: { stop(): Promise<void> }[] = [];
  const { ports, dataDir } = options;
  const onEvent = options.onSupervisionEvent;
  const common = (port: number | undefined, dir: string | undefined) => ({
    ...(port === undefined ? {} : { port }),
    ...(dir === undefined ? {} : { path: dir }),
    ...(onEvent ? { onEvent } : {}),
  });
  const at = (sub: string) => (dataDir === undefined ? undefined : join(dataDir, sub));
  try {
    // The missing prerequisite is the more fundamental fault: report it before any port clash.
    if (!redisServerAvailable()) throw new RedisServerMissingError();
    const iam = await regionIam(options.iam, region, description);
    const guard = (service: GatedService) => gateOption(iam, service, region);
    // A fixed port someone else holds must fail here, clearly: redis-server would exit and the
    // other server would answer our PING.
    if (ports)
      await assertPortsFree([
        ...ports.redis,
        ports.dynamodb,
        ports.kinesis,
        ports.ssm,
        ports.s3,
        ports.elasticache,
      ]);
    const redis = await startRedis({
      mode: options.redisMode ?? 'standalone',
      ...(ports ? { ports: ports.redis } : {}),
      ...(dataDir === undefined ? {} : { dataDir: join(dataDir, 'redis') }),
      ...(onEvent ? { onEvent } : {}),
    });
    started.push(redis);
    const [dynamo, kinesis, ssm, s3, elasticache] = (await Promise.all([
      startDynalite({ ...common(ports?.dynamodb, at('dynamodb')), ...guard('dynamodb') }),
      startKinesalite({ region, ...common(ports?.kinesis, at('kinesis')), ...guard('kinesis') }),
      startSsmServer({
        region,
        ...(ports ? { port: ports.ssm } : {}),
        ...(dataDir === undefined ? {} : { file: join(dataDir, 'ssm-parameters.json') }),
        ...(onEvent ? { onEvent } : {}),
        ...guard('ssm'),
      }),
      startS3({
        ...common(ports?.s3, at('s3')),
        accessKeys: s3AccessKeys(region, description, iam),
        ...guard('s3'),
      }),
      startElastiCacheServer({
        region,
        redis,
        ...(ports ? { port: ports.elasticache } : {}),
        ...guard('elasticache'),
      }),
    ])) as [RunningEmulator, RunningEmulator, RunningSsm, RunningEmulator, RunningElastiCache];
    started.push(dynamo, kinesis, ssm, s3, elasticache);
    const dynamodbUrl = options.globalTables
      ? await options.globalTables.attach(region, dynamo.url)
      : dynamo.url;
    const endpoints = {
      region,
      dynamodb: dynamodbUrl,
      kinesis: kinesis.url,
      ssm: ssm.url,
      s3: s3.url,
      elasticache: elasticache.url,
    };
    const clients = {
      dynamodb: dynamoDbClient(endpoints),
      kinesis: kinesisClient(endpoints),
      ssm: ssmClient(endpoints),
      s3: s3Client(endpoints),
    };
    await provisionRegion(region, clients, description);
    const clientEnv = regionClientEnv(region, endpoints, redis, description, options.deploymentRegions);
    const tableName = (key: TableKey) => physicalName(regionResources.tables[key].suffix);
    const streamName = (key: StreamKey) => physicalName(regionResources.streams[key].suffix);
    const bucketName = (key: BucketKey) => physicalName(regionResources.buckets[key].suffix);
    return {
      region,
      description,
      endpoints,
      dynamoEmulator: dynamo,
      emulators: { dynamodb: dynamo, kinesis, ssm, s3 },
      ...(dataDir === undefined ? {} : { dataDir }),
      redis,
      ...clients,
      tableName,
      streamName,
      bucketName,
      clientEnv,
      ...(iam ? { iam } : {}),
      functionEnv: (key) => ({
        ...withoutClientCredentials(clientEnv),
        // Lambda gives a function its execution role's credentials in these variables.
        ...credentialsEnv(principalCredentials(region, description.functions[key].name)),
        ...functionEnvironment(description.functions[key], {
          region,
          tableName,
          streamName,
          bucketName,
          redis: { nodes: redis.nodesEnv, mode: redis.mode, tls: false },
        }),
      }),
      async stop() {
        for (const c of Object.values(clients)) c.destroy();
        await Promise.all(started.map((s) => s.stop()));
      },
    };
  } catch (error) {
    await Promise.all(started.map((s) => s.stop().catch(() => {})));
    throw error;
  }
}

/**
 * The environment that points SDK clients, the CLI and the ad-server client at a region (its
 * `clientEnv`: endpoints, the operator's and the client's keys, Redis, the pacer shard count).
 */
function regionClientEnv(
  region: string,
  endpoints: Parameters<typeof endpointsToEnv>[0],
  redis: Pick<RunningRedis, 'nodesEnv' | 'mode'>,
  description: RegionDescription,
  deploymentRegions: readonly string[] | undefined,
): Record<string, string> {
  return {
    ...endpointsToEnv(endpoints),
    // The AWS CLI and older SDKs read AWS_DEFAULT_REGION; Lambda sets both.
    AWS_DEFAULT_REGION: region,
    // The operator's key (CLI, tools: never checked); s3rver checks signatures against it.
    AWS_ACCESS_KEY_ID: 'local',
    AWS_SECRET_ACCESS_KEY: LOCAL_SECRET_ACCESS_KEY,
    // The ad-server client's own key: configFromEnv prefers it, so the client is held to the
    // ad-server access policy while the CLI in the same shell keeps the operator's.
    [clientCredentialsEnv.accessKeyId]: accessKeyFor(region, AD_SERVER_PRINCIPAL),
    [clientCredentialsEnv.secretAccessKey]: LOCAL_SECRET_ACCESS_KEY,
    PACELINE_REGION: region,
    [redisEnv.nodes]: redis.nodesEnv,
    [redisEnv.mode]: redis.mode,
    [redisEnv.tls]: 'false',
    [pacerEnv.shards]: String(description.settings.pacer.shards),
    // Several regions share every budget: clients derive their allocation mode from this.
    ...(deploymentRegions && deploymentRegions.length > 1
      ? { [REGIONS_ENV]: deploymentRegions.join(',') }
      : {}),
  };
}

function withoutClientCredentials(env: Readonly<Record<string, string>>): Record<string, string> {
  const out = { ...env };
  delete out[clientCredentialsEnv.accessKeyId];
  delete out[clientCredentialsEnv.secretAccessKey];
  return out;
}

/** Creates the region's tables, streams, buckets and initial parameters (idempotent). */
export async function provisionRegion(
  region: string,
  clients: { dynamodb: DynamoDBClient; kinesis: KinesisClient; ssm: SSMClient; s3: S3Client },
  description: RegionDescription = localDescription(),
): Promise<void> {
  await Promise.all([
    provisionTables(clients.dynamodb),
    provisionStreams(clients.kinesis),
    provisionParameters(region, clients.ssm, description),
    provisionBuckets(clients.s3),
  ]);
}

/** Creates the described buckets on the S3 emulator (idempotent). */
export async function provisionBuckets(s3: S3Client): Promise<void> {
  await Promise.all(
    Object.values(regionResources.buckets).map((b) =>
      s3
        .send(new CreateBucketCommand({ Bucket: physicalName(b.suffix) }))
        .catch((error: { name?: string }) => {
          if (error.name !== 'BucketAlreadyOwnedByYou' && error.name !== 'BucketAlreadyExists') throw error;
        }),
    ),
  );
}

/** Creates the described tables (idempotent). */
export async function provisionTables(dynamodb: DynamoDBClient): Promise<void> {
  await Promise.all(
    Object.values(regionResources.tables).map(async (t) => {
      const keys = [t.partitionKey, t.sortKey];
      const indexes = 'indexes' in t ? t.indexes : [];
      const attributes = new Map<string, string>();
      for (const k of [
        ...keys,
        ...indexes.flatMap((i) => (i.sortKey ? [i.partitionKey, i.sortKey] : [i.partitionKey])),
      ])
        attributes.set(k.name, k.type);
      const keySchema = (pk: { name: string }, sk?: { name: string }) => [
        { AttributeName: pk.name, KeyType: 'HASH' as const },
        ...(sk ? [{ AttributeName: sk.name, KeyType: 'RANGE' as const }] : []),
      ];
      try {
        await dynamodb.send(
          new CreateTableCommand({
            TableName: physicalName(t.suffix),
            BillingMode: 'PAY_PER_REQUEST',
            AttributeDefinitions: [...attributes].map(([name, type]) => ({
              AttributeName: name,
              AttributeType: type as 'S' | 'N' | 'B',
            })),
            KeySchema: keySchema(t.partitionKey, t.sortKey),
            ...(indexes.length > 0
              ? {
                  GlobalSecondaryIndexes: indexes.map((i) => ({
                    IndexName: i.name,
                    KeySchema: keySchema(i.partitionKey, i.sortKey),
                    Projection: { ProjectionType: i.projection },
                  })),
                }
              : {}),
          }),
        );
      } catch (error) {
        if (!(error instanceof ResourceInUseException)) throw error;
      }
    }),
  );
}

/** Creates the described streams and waits until they are ACTIVE (idempotent). */
export async function provisionStreams(kinesis: KinesisClient): Promise<void> {
  await Promise.all(
    Object.values(regionResources.streams).map(async (s) => {
      const StreamName = physicalName(s.suffix);
      try {
        await kinesis.send(new CreateStreamCommand({ StreamName, ShardCount: s.shardCount }));
      } catch (error) {
        if ((error as { name?: string }).name !== 'ResourceInUseException') throw error;
      }
      await waitUntilStreamExists({ client: kinesis, maxWaitTime: 30, minDelay: 0.05 }, { StreamName });
    }),
  );
}

/** Writes the described parameters' initial values where they do not exist yet. */
export async function provisionParameters(
  region: string,
  ssm: SSMClient,
  description: RegionDescription = localDescription(),
): Promise<void> {
  const prefix = parameterPrefix(region);
  await Promise.all(
    Object.values(description.parameters).map((p) =>
      ssm
        .send(
          new PutParameterCommand({ Name: `${prefix}${p.path}`, Value: p.initial(region), Type: 'String' }),
        )
        .catch((error: { name?: string }) => {
          if (error.name !== 'ParameterAlreadyExists') throw error;
        }),
    ),
  );
}
