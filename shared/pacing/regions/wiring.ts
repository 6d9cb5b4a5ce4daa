/**
 * Builds a shard's pacer across regions from its dependencies — the one wiring the pacer
 * function (functions/pacer/handler.ts) and the tests share: the own cache's ShardPacer with
 * this region's shares, and for every peer region a pacer built on demand (when the peer's
 * switch names this region) over the peer's discovered cache, with the peer's shares.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { ElastiCacheClient } from '@aws-sdk/client-elasticache';
import type { SSMClient } from '@aws-sdk/client-ssm';
import { BudgetRepository } from '../../budget/repository.js';
import type { RedisClient } from '../../redis/connect.js';
import type { Clock } from '../../time/clock.js';
import { ShardBudgets } from '../budgets-cache.js';
import { PacerControl } from '../control.js';
import type { PacingController } from '../controller/api.js';
import { ShardPacer, type ShardPacerOptions } from '../pacer.js';
import { pacerShardKey } from '../shard.js';
import { rawSpendSource, type SpendSource } from '../spend-source.js';
import { PeerCaches, RegionalShardPacer } from './cross-region.js';
import { RegionShares } from './region-shares.js';
import type { ShareConfig } from './shares.js';

/** A peer region's API clients (SSM for its switch, ElastiCache for its cache endpoint). */
export interface PeerRegionClients {
  readonly region: string;
  readonly ssm: SSMClient;
  readonly elasticache: ElastiCacheClient;
}

/** Dependencies of {@link regionalShardPacer}. */
export interface RegionalShardPacerDeps {
  readonly region: string;
  readonly shard: number;
  readonly shards: number;
  readonly dynamodb: DynamoDBClient;
  readonly ssm: SSMClient;
  readonly budgetsTable: string;
  readonly regionSpendTable: string;
  /** This region's cache. */
  readonly redis: RedisClient;
  /**
   * Live-spend reader of this region's cache. @default rawSpendSource(redis) — the reader the
   * pacer benchmark measures (raw RESP, folded from the reply bytes, read in parts)
   */
  readonly spend?: SpendSource;
  readonly peers: readonly PeerRegionClients[];
  readonly controller: PacingController<unknown, unknown>;
  readonly clock: Clock;
  readonly tickMs: number;
  /** @default defaultShareConfig */
  readonly shareConfig?: Partial<ShareConfig>;
  /** Passed to every ShardPacer (audit cap, batch size, fault injection). */
  readonly pacerOptions?: Pick<ShardPacerOptions, 'logMaxLen' | 'maxArgsPerBatch' | 'beforePublish'>;
  /** Full reload period of the budgets caches, ms. @default ShardBudgets' */
  readonly budgetsFullReloadMs?: number;
  /** The deployment's SSM parameter root (`PARAMETER_ROOT`). @default the default names' */
  readonly parameterRoot?: string;
  /**
   * The caches' replication group id and IAM user, the same in every region (`REDIS_CACHE_NAME`,
   * `REDIS_IAM_USER`): how peer caches are discovered and authenticated. @default the default
   * names' group id, no IAM auth
   */
  readonly cache?: { readonly replicationGroupId: string; readonly iamUserId?: string };
  /**
   * Longest silence of a cache node while the pacer's raw reads (live spend, the state reload)
   * wait for replies, ms (PacerConfig.redisSilenceMs). @default the raw readers' 1,000
   */
  readonly redisSilenceMs?: number;
}

/** A shard's pacer across regions and the own control reader it ticks with. */
export interface RegionalShardPacerWiring {
  readonly pacer: RegionalShardPacer;
  readonly control: PacerControl;
  /** The own cache's shares (status, tests). */
  readonly shares: RegionShares;
}

/** Builds {@link RegionalShardPacer} for one shard in one process. */
export function regionalShardPacer(d: RegionalShardPacerDeps): RegionalShardPacerWiring {
  const repo = new BudgetRepository({ client: d.dynamodb, tableName: d.budgetsTable });
  const budgets = () =>
    new ShardBudgets({
      source: (since, start) => repo.shardItemsPage(pacerShardKey(d.shard, d.shards), since, start),
      clock: d.clock,
      ...(d.budgetsFullReloadMs === undefined ? {} : { fullReloadMs: d.budgetsFullReloadMs }),
    });
  const shares = (cacheRegion: string) =>
    new RegionShares({
      dynamodb: d.dynamodb,
      tableName: d.regionSpendTable,
      shard: d.shard,
      shards: d.shards,
      cacheRegion,
      tickMs: d.tickMs,
      ...(d.shareConfig ? { config: d.shareConfig } : {}),
    });
  const ownShares = shares(d.region);
  const pacer = (redis: RedisClient, spend: SpendSource, sharing: RegionShares) =>
    new ShardPacer({
      shard: d.shard,
      region: d.region,
      redis,
      controller: d.controller,
      budgets: budgets(),
      spend,
      sharing,
      clock: d.clock,
      tickMs: d.tickMs,
      ...d.pacerOptions,
    });
  const spendOf = (redis: RedisClient) =>
    rawSpendSource(redis, d.redisSilenceMs === undefined ? {} : { timeoutMs: d.redisSilenceMs });
  const byRegion = new Map(d.peers.map((p) => [p.region, p]));
  const regional = new RegionalShardPacer({
    region: d.region,
    own: pacer(d.redis, d.spend ?? spendOf(d.redis), ownShares),
    caches: new PeerCaches({
      clock: d.clock,
      ...(d.cache
        ? {
            replicationGroupId: d.cache.replicationGroupId,
            ...(d.cache.iamUserId ? { iamUserId: d.cache.iamUserId } : {}),
          }
        : {}),
      elasticache: (region) => {
        const p = byRegion.get(region);
        if (!p) throw new Error(`No ElastiCache client for peer region ${region}.`);
        return p.elasticache;
      },
    }),
    peers: d.peers.map((p) => ({
      region: p.region,
      control: new PacerControl({
        ssm: d.ssm,
        region: d.region,
        shard: d.shard,
        clock: d.clock,
        switchRegion: { region: p.region, ssm: p.ssm },
        ...(d.parameterRoot ? { parameterRoot: d.parameterRoot } : {}),
      }),
      pacer: (redis: RedisClient) => pacer(redis, spendOf(redis), shares(p.region)),
    })),
  });
  return {
    pacer: regional,
    control: new PacerControl({
      ssm: d.ssm,
      region: d.region,
      shard: d.shard,
      clock: d.clock,
      ...(d.parameterRoot ? { parameterRoot: d.parameterRoot } : {}),
    }),
    shares: ownShares,
  };
}
