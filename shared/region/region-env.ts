/**
 * Names and environments derived from a region's description (resources.ts): physical names with
 * the default names, the variables naming Redis and parameters, and the environment of each
 * function and of the ad-server client.
 */
import { REGIONS_ENV } from '../aws/endpoints.js';
import { defaultNames, type ResourceNames } from './names.js';
import { pacerEnv } from './pacer-settings.js';
import { type BucketKey, buckets, type StreamKey, streams, type TableKey, tables } from './region-catalog.js';
import type { FunctionSpec } from './resource-specs.js';
import type { RegionDescription } from './resources.js';

export const defaultRegions = ['us-east-1', 'us-west-2'] as const;

/**
 * Physical name of a table or stream with the default names (the same in every region: names are
 * regional in AWS); a stage's names are `description.names.resource(suffix)`.
 */
export function physicalName(suffix: string): string {
  return defaultNames.resource(suffix);
}

/**
 * The name of a table or stream as a process outside the functions (CLI, tool) should use it: the
 * resource's environment variable when set, else its physical name.
 */
export function resourceName(
  spec: { readonly envVar: string; readonly suffix: string },
  env: Readonly<Record<string, string | undefined>> = process.env,
): string {
  const value = env[spec.envVar];
  return value === undefined || value === '' ? physicalName(spec.suffix) : value;
}

/**
 * Name of a stream function's on-failure queue with the default names (names are regional, so
 * the same in every region); `dead-letters redrive` finds the queue by it.
 */
export function onFailureQueueName(functionName: string): string {
  return defaultNames.onFailureQueueName(functionName);
}

/**
 * Replication group id of the region's cache with the default names (the same in every region:
 * ids are regional). Peer pacers find a region's cache endpoint with ElastiCache
 * `DescribeReplicationGroups` on the id their environment carries (`REDIS_CACHE_NAME`,
 * docs/pacing.md, "Many regions"); the stack names its replication group with it.
 */
export const cacheReplicationGroupId = defaultNames.cacheReplicationGroupId;

/** SSM path prefix of a region's parameters with the default names, e.g. `/paceline/us-east-1/`. */
export function parameterPrefix(region: string): string {
  return defaultNames.parameterPrefix(region);
}

/** Environment variables naming Redis; filled from the ElastiCache endpoint or the local server. */
export const redisEnv = {
  /** `host:port[,host:port…]`: the configuration endpoint (cluster) or the primary (standalone). */
  nodes: 'REDIS_NODES',
  /** `cluster` or `standalone`. */
  mode: 'REDIS_MODE',
  /** `true` when the connection must use TLS (always in AWS). */
  tls: 'REDIS_TLS',
  /**
   * ElastiCache IAM authentication: the user id to connect as. When set, `connectRedis` signs
   * short-lived SigV4 auth tokens (shared/redis/iam-auth.ts); unset, no AUTH is sent (local).
   */
  iamUser: 'REDIS_IAM_USER',
  /**
   * The cache's replication group id: what IAM auth tokens are signed for (with
   * `REDIS_IAM_USER`) and what a pacer discovers peer regions' caches by (the same id in every
   * region of a deployment).
   */
  cacheName: 'REDIS_CACHE_NAME',
} as const;

/** The region's cache as an environment names it (see {@link redisEnv}). */
export interface RedisEndpointInputs {
  readonly nodes: string;
  readonly mode: 'cluster' | 'standalone';
  readonly tls: boolean;
  /** ElastiCache IAM authentication (AWS only). @default none (no AUTH) */
  readonly iam?: { readonly userId: string; readonly cacheName: string };
}

/**
 * Writes the {@link redisEnv} variables of `redis` into `env`. The cache name is the IAM one, else
 * `cacheName` when given (a function finds peer regions' caches by it also without IAM).
 */
function putRedisEnv(env: Record<string, string>, redis: RedisEndpointInputs, cacheName?: string): void {
  env[redisEnv.nodes] = redis.nodes;
  env[redisEnv.mode] = redis.mode;
  env[redisEnv.tls] = String(redis.tls);
  const name = redis.iam?.cacheName ?? cacheName;
  if (name !== undefined) env[redisEnv.cacheName] = name;
  if (redis.iam) env[redisEnv.iamUser] = redis.iam.userId;
}

/** `PACELINE_REGIONS` when the deployment has several regions (a single region sets nothing). */
function putDeploymentRegions(env: Record<string, string>, regions: readonly string[] | undefined): void {
  if (regions && regions.length > 1) env[REGIONS_ENV] = regions.join(',');
}

/**
 * How a function's environment refers to resources. The CDK passes CloudFormation tokens, the
 * local runner plain strings; the mapping itself lives only here.
 */
export interface EnvironmentInputs {
  readonly region: string;
  readonly tableName: (key: TableKey) => string;
  readonly streamName: (key: StreamKey) => string;
  readonly bucketName: (key: BucketKey) => string;
  readonly redis?: RedisEndpointInputs;
  /** The deployment's names (parameter root, cache id). @default the default names */
  readonly names?: ResourceNames;
  /**
   * Every region of the deployment, in its order (the first is every plan's allocation home).
   * With more than one, the pacer learns its peers and paces in strict allocations from it.
   * @default this region alone
   */
  readonly deploymentRegions?: readonly string[];
}

/** Environment variables carrying the deployment's SSM parameter names into a function. */
export const parameterEnv = {
  /** This region's prefix, e.g. `/paceline/us-east-1/`. */
  prefix: 'PARAMETER_PREFIX',
  /** The deployment's root, e.g. `/paceline/` (a peer region's prefix is `<root><peer>/`). */
  root: 'PARAMETER_ROOT',
} as const;

/** The environment of one function, derived from what its spec says it uses. */
export function functionEnvironment(spec: FunctionSpec, inputs: EnvironmentInputs): Record<string, string> {
  const env: Record<string, string> = {
    PACELINE_REGION: inputs.region,
    POWERTOOLS_SERVICE_NAME: spec.name,
    POWERTOOLS_METRICS_NAMESPACE: 'Paceline',
    ...spec.settings,
  };
  if (spec.nodeOptions !== undefined && spec.nodeOptions.length > 0)
    env.NODE_OPTIONS = spec.nodeOptions.join(' ');
  for (const key of Object.keys(spec.tables) as TableKey[]) {
    env[tables[key].envVar] = inputs.tableName(key);
  }
  const streamKeys = new Set<StreamKey>(spec.writesStreams);
  if (spec.source) streamKeys.add(spec.source.stream);
  for (const key of streamKeys) env[streams[key].envVar] = inputs.streamName(key);
  for (const key of Object.keys(spec.buckets ?? {}) as BucketKey[]) {
    env[buckets[key].envVar] = inputs.bucketName(key);
  }
  const names = inputs.names ?? defaultNames;
  if (spec.readsParameters) {
    env[parameterEnv.prefix] = names.parameterPrefix(inputs.region);
    env[parameterEnv.root] = names.parameterRoot;
    // The pacer: its peers (their publish switches and caches) and its allocations.
    putDeploymentRegions(env, inputs.deploymentRegions);
  }
  if (spec.usesRedis) {
    if (!inputs.redis) throw new Error(`Function ${spec.name} uses Redis but no Redis endpoint was given.`);
    // The group id names the cache for IAM auth and for peer discovery (also without IAM: local).
    putRedisEnv(env, inputs.redis, names.cacheReplicationGroupId);
  }
  return env;
}

/** What an ad server's environment refers to (see {@link clientEnvironment}). */
export interface ClientEnvironmentInputs {
  readonly region: string;
  readonly tableName: (key: TableKey) => string;
  readonly streamName: (key: StreamKey) => string;
  readonly redis: RedisEndpointInputs;
  /** The pacer shard count, when the fleet should not read it from SSM. @default read from SSM */
  readonly pacerShards?: number;
  /**
   * Every region of the deployment, in its order: with more than one, the client's guards lease
   * within their region's allocation (strict), from a plan-day's first instant. @default one region
   */
  readonly deploymentRegions?: readonly string[];
}

/**
 * The environment the ad-server client library (`configFromEnv` of `paceline/client`) needs in a
 * region, derived from what the description says the client uses: the region, Redis (and its IAM
 * user), the tables and streams it reads and writes by name, `PACER_SHARDS` when given, and the
 * deployment's regions when there are several (`PACELINE_REGIONS`: strict allocations).
 */
export function clientEnvironment(
  description: Pick<RegionDescription, 'adServer'>,
  inputs: ClientEnvironmentInputs,
): Record<string, string> {
  const env: Record<string, string> = { AWS_REGION: inputs.region };
  for (const key of Object.keys(description.adServer.tables) as TableKey[])
    env[tables[key].envVar] = inputs.tableName(key);
  for (const key of description.adServer.putsStreams) env[streams[key].envVar] = inputs.streamName(key);
  putRedisEnv(env, inputs.redis);
  if (inputs.pacerShards !== undefined) env[pacerEnv.shards] = String(inputs.pacerShards);
  putDeploymentRegions(env, inputs.deploymentRegions);
  return env;
}
