/**
 * The settings a region's description is derived from (resources.ts, `regionDescription`): the
 * cache's and the streams' sizing with their validation, the pacer's (pacer-settings.ts), the
 * stage, and the error every invalid setting raises.
 */
import { PacelineError } from '../errors.js';
import type { PacerSettings } from './pacer-settings.js';
import { type StreamKey, streams } from './region-catalog.js';

/** Thrown for region settings that cannot work; the message says which and why. */
export class InvalidRegionSettingsError extends PacelineError {
  override readonly name: string = 'InvalidRegionSettingsError';
  override readonly code: string = 'region.invalid-settings';
  /**
   * @param setting the setting at fault, as its path in the settings (e.g. `pacer.shards`,
   *   `streams.actions.shards`), so the deployment can name the cdk.json key it came from
   */
  constructor(
    message: string,
    readonly setting?: string,
  ) {
    super(message);
  }
}

/** Thrown for pacer settings that cannot work; the message says which and why. */
export class InvalidPacerSettingsError extends InvalidRegionSettingsError {
  override readonly name: string = 'InvalidPacerSettingsError';
  override readonly code: string = 'region.invalid-pacer-settings';
}

/** How the region's Kinesis streams are provisioned. */
export type StreamCapacityMode = 'provisioned' | 'on-demand';

/** The region's cache (ElastiCache Valkey, cluster mode). */
export interface CacheSettings {
  /** Node type. @default 'cache.r7g.large' */
  readonly nodeType: string;
  /** Shards (node groups). @default 3 */
  readonly shards: number;
  /** Replicas per shard; ≥ 1 gives automatic failover. @default 1 */
  readonly replicasPerShard: number;
}

/** One stream's size and how its function consumes it. */
export interface StreamSizing {
  /** Provisioned shards (1 MB/s or 1,000 records/s in each). @default the described shardCount (2) */
  readonly shards: number;
  /** The event source's parallelization factor: concurrent batches per shard (1–10). @default 1 */
  readonly parallelizationFactor: number;
}

/** The region's streams. */
export type StreamSettings = {
  /**
   * `provisioned` (each stream gets its shard count) or `on-demand` (Kinesis scales; the shard
   * count only sizes the local emulator). @default 'provisioned'
   */
  readonly capacityMode: StreamCapacityMode;
} & { readonly [K in StreamKey]: StreamSizing };

/** Partial stream settings (cdk.json): each stream's sizing partially. */
export type StreamSettingsInput = { readonly capacityMode?: StreamCapacityMode } & {
  readonly [K in StreamKey]?: Partial<StreamSizing>;
};

/** The cache defaults of an AWS region. */
export const defaultCacheSettings: CacheSettings = {
  nodeType: 'cache.r7g.large',
  shards: 3,
  replicasPerShard: 1,
};

/** The stream defaults of an AWS region: the described shard counts, parallelization factor 1. */
export const defaultStreamSettings: StreamSettings = {
  capacityMode: 'provisioned',
  actions: { shards: streams.actions.shardCount, parallelizationFactor: 1 },
  spend: { shards: streams.spend.shardCount, parallelizationFactor: 1 },
};

/** Settings a region description is derived from. */
export interface RegionSettings {
  readonly pacer: PacerSettings;
  readonly cache: CacheSettings;
  readonly streams: StreamSettings;
  /** The deployment's stage (names; shared/region/names.ts). @default none: the default names */
  readonly stage?: string;
}

/** Partial settings: whatever is not given takes the AWS default. */
export interface RegionSettingsInput {
  readonly pacer?: Partial<PacerSettings>;
  readonly cache?: Partial<CacheSettings>;
  readonly streams?: StreamSettingsInput;
  readonly stage?: string;
}

/** Validates and completes stream settings. */
export function streamSettingsOf(input: StreamSettingsInput = {}): StreamSettings {
  const mode = input.capacityMode ?? defaultStreamSettings.capacityMode;
  if (mode !== 'provisioned' && mode !== 'on-demand')
    throw new InvalidRegionSettingsError(
      `streams capacityMode = ${JSON.stringify(mode)}: give "provisioned" or "on-demand".`,
      'streams.capacityMode',
    );
  const sizing = (key: StreamKey): StreamSizing => {
    const s = { ...defaultStreamSettings[key], ...input[key] };
    // Kinesis's account quota is 500 shards by default (200 in smaller regions): more needs a raise.
    if (!Number.isSafeInteger(s.shards) || s.shards < 1 || s.shards > 10_000)
      throw new InvalidRegionSettingsError(
        `streams ${key}.shards = ${s.shards}: give a whole number from 1 to 10000 (the account's Kinesis shard quota, 500 by default, bounds it too).`,
        `streams.${key}.shards`,
      );
    if (
      !Number.isSafeInteger(s.parallelizationFactor) ||
      s.parallelizationFactor < 1 ||
      s.parallelizationFactor > 10
    )
      throw new InvalidRegionSettingsError(
        `streams ${key}.parallelizationFactor = ${s.parallelizationFactor}: give a whole number from 1 to 10 (Lambda's range).`,
        `streams.${key}.parallelizationFactor`,
      );
    return s;
  };
  return {
    capacityMode: mode,
    ...(Object.fromEntries((Object.keys(streams) as StreamKey[]).map((k) => [k, sizing(k)])) as {
      [K in StreamKey]: StreamSizing;
    }),
  };
}

/** Validates cache and stream settings (the pacer has {@link validatePacerSettings}). */
export function validateCacheSettings(c: CacheSettings): CacheSettings {
  if (!/^cache\.[a-z0-9-]+\.[a-z0-9]+$/.test(c.nodeType))
    throw new InvalidRegionSettingsError(
      `cache nodeType = ${JSON.stringify(c.nodeType)}: give an ElastiCache node type such as cache.r7g.large.`,
      'cache.nodeType',
    );
  if (!Number.isSafeInteger(c.shards) || c.shards < 1 || c.shards > 500)
    throw new InvalidRegionSettingsError(
      `cache shards = ${c.shards}: give a whole number from 1 to 500.`,
      'cache.shards',
    );
  if (!Number.isSafeInteger(c.replicasPerShard) || c.replicasPerShard < 0 || c.replicasPerShard > 5)
    throw new InvalidRegionSettingsError(
      `cache replicasPerShard = ${c.replicasPerShard}: give a whole number from 0 to 5.`,
      'cache.replicasPerShard',
    );
  return c;
}

/**
 * The whole description of a region for the given settings. Everything that depends on a
 * setting (the pacer's schedule instances, environment and override parameters; the cache
 * layout; the streams' capacity mode) is derived here, so the CDK stack and the local runner
 * cannot disagree.
 */
