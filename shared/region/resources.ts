/**
 * THE description of one Paceline region's resources. Both the CDK stack (`cdk/`) and the local
 * runner (`local/`) are built from this object, so names, keys, shard counts, event-source
 * settings and function environments cannot drift between the cloud and a laptop.
 *
 * Nothing here touches AWS: it is data plus pure functions over it. The description is assembled
 * here from its parts — the spec types (resource-specs.ts), the fixed tables, streams, buckets and
 * functions (region-catalog.ts), the settings (region-settings.ts, pacer-settings.ts) — and the
 * names and environments derived from it are in region-env.ts; all of them are re-exported here.
 */
import { defaultNames, InvalidStageError, type ResourceNames, stageNames } from './names.js';
import {
  defaultPacerSettings,
  pacerFunction,
  pacerParameters,
  pacerShardsPath,
  validatePacerSettings,
} from './pacer-settings.js';
import {
  buckets,
  functions,
  parameters,
  type StreamKey,
  streams,
  type TableKey,
  tables,
} from './region-catalog.js';
import {
  defaultCacheSettings,
  InvalidRegionSettingsError,
  type RegionSettings,
  type RegionSettingsInput,
  streamSettingsOf,
  validateCacheSettings,
} from './region-settings.js';
import type { FunctionSpec, KinesisSourceSpec, ParameterSpec, StreamSpec } from './resource-specs.js';

// The description is one object built from several modules; this module is its one entry, so
// every user imports the region from here.
export {
  AUCTION_KINDS,
  AUTO_LEADER,
  type AuctionKind,
  DEFAULT_PACER_MEMORY_MB,
  defaultPacerSettings,
  LEADER_OVERRIDE_PATH_PREFIX,
  leaderOverridePath,
  localPacerSettings,
  PACER_NODE_OPTIONS,
  type PacerInput,
  type PacerSettings,
  pacerEnv,
  pacerInstanceId,
  pacerShardsPath,
  validatePacerSettings,
} from './pacer-settings.js';
export {
  type BucketKey,
  isGlobal,
  SPEND_CONVERGENCE_SECONDS,
  type StreamKey,
  safeKinesisDefaults,
  type TableKey,
} from './region-catalog.js';
export * from './region-env.js';
export {
  type CacheSettings,
  defaultCacheSettings,
  defaultStreamSettings,
  InvalidPacerSettingsError,
  InvalidRegionSettingsError,
  type RegionSettings,
  type RegionSettingsInput,
  type StreamCapacityMode,
  type StreamSettings,
  type StreamSettingsInput,
  type StreamSizing,
} from './region-settings.js';
export type * from './resource-specs.js';

/**
 * The whole description of a region for the given settings. Everything that depends on a
 * setting (the pacer's schedule instances, environment and override parameters; the cache
 * layout; the streams' capacity mode) is derived here, so the CDK stack and the local runner
 * cannot disagree.
 */
export function regionDescription(settings: RegionSettingsInput = {}) {
  const pacer = validatePacerSettings({ ...defaultPacerSettings, ...settings.pacer });
  const cache = validateCacheSettings({ ...defaultCacheSettings, ...settings.cache });
  const streamSettings = streamSettingsOf(settings.streams);
  let names: ResourceNames;
  try {
    names = stageNames(settings.stage);
  } catch (error) {
    if (error instanceof InvalidStageError) throw new InvalidRegionSettingsError(error.message, 'stage');
    throw error;
  }
  const sized = Object.fromEntries(
    (Object.keys(streams) as StreamKey[]).map((k) => [
      k,
      { ...streams[k], shardCount: streamSettings[k].shards } satisfies StreamSpec,
    ]),
  ) as {
    readonly [K in StreamKey]: Omit<(typeof streams)[K], 'shardCount'> & { readonly shardCount: number };
  };
  // Each stream function consumes its stream with that stream's parallelization factor.
  const consuming = <F extends FunctionSpec & { readonly source: KinesisSourceSpec }>(fn: F) => ({
    ...fn,
    source: { ...fn.source, parallelizationFactor: streamSettings[fn.source.stream].parallelizationFactor },
  });
  return {
    tables,
    streams: sized,
    buckets,
    functions: {
      ingestActions: consuming(functions.ingestActions),
      trackSpend: consuming(functions.trackSpend),
      sweepSpend: functions.sweepSpend,
      pacer: pacerFunction(pacer),
    },
    parameters: { ...pacerParameters(pacer), ...parameters } as typeof parameters &
      Readonly<Record<string, ParameterSpec>>,
    cache: {
      replicationGroupId: names.cacheReplicationGroupId,
      userId: names.cacheUserId,
      port: cacheIdentity.port,
      ...cache,
    },
    /** Physical names of the deployment's stage (shared/region/names.ts). */
    names,
    /** The ad-server client library's use of the region (shared/region/access.ts grants it). */
    adServer: adServerClient,
    settings: {
      pacer,
      cache,
      streams: streamSettings,
      ...(settings.stage === undefined ? {} : { stage: settings.stage }),
    } satisfies RegionSettings,
  } as const;
}

/**
 * The cache's identity with the default names, the same in every region (names are regional):
 * the replication group id (the host part of an IAM auth token and what a peer pacer discovers
 * with DescribeReplicationGroups), the IAM-authenticated user the functions and ad servers
 * connect as (ElastiCache IAM auth requires user id = user name) and the port. A stage's
 * description carries its own (`description.cache`, from `description.names`).
 */
export const cacheIdentity = {
  replicationGroupId: defaultNames.cacheReplicationGroupId,
  userId: defaultNames.cacheUserId,
  port: 6380,
} as const;

/**
 * What the ad-server client library (`paceline/client`: shared/client, shared/spend/guard.ts,
 * shared/pacing/reader.ts, shared/kinesis/producer.ts) does in a region, per resource — the
 * access construct grants exactly this (shared/region/access.ts):
 * - budgets: the campaign's budgets (`BatchGetItem`, `GetItem`) and an account's campaigns and
 *   plans (`Query` of the base table; the shard index is the pacer's);
 * - spend ledger: the guard's rebuild of a plan-day (`Query`) and its start marker (`PutItem`);
 *   it never writes spend entries (track-spend does);
 * - both streams: events and notices (`PutRecord`, `PutRecords`);
 * - the pacer shard count `pacer/shards` (`GetParameter`) unless `PACER_SHARDS` is set;
 * - the cache (IAM authentication as the cache user).
 */
const adServerClient = {
  tables: {
    budgets: ['dynamodb:BatchGetItem', 'dynamodb:GetItem', 'dynamodb:Query'],
    spendLedger: ['dynamodb:PutItem', 'dynamodb:Query'],
  },
  putsStreams: ['actions', 'spend'],
  readsParameters: [pacerShardsPath],
  usesRedis: true,
} as const satisfies {
  tables: Readonly<Partial<Record<TableKey, readonly string[]>>>;
  putsStreams: readonly StreamKey[];
  readsParameters: readonly string[];
  usesRedis: boolean;
};

/** A region's description (see {@link regionDescription}). */
export type RegionDescription = ReturnType<typeof regionDescription>;

/** The description of an AWS region with the default settings. */
export const regionResources: RegionDescription = regionDescription();

/** Keys of the region's functions. */
export type FunctionKey = keyof RegionDescription['functions'];
