/**
 * Builds a shard's pacer across regions from its dependencies — the one wiring the pacer
 * function (functions/pacer/handler.ts) and the tests share: the own cache's ShardPacer with
 * this region's shares, and for every peer region a pacer built on demand (when the peer's
 * switch names this region) over the peer's discovered cache, with the peer's shares.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { ElastiCacheClient } from '@aws-sdk/client-elasticache';
import type { SSMClient } from '@aws-sdk/client-ssm';
import { recordFlightDay } from '../../budget/flight-store.js';
import { BudgetRepository } from '../../budget/repository.js';
import type { RedisClient } from '../../redis/connect.js';
import type { Clock } from '../../time/clock.js';
import { ShardBudgets } from '../budgets-cache.js';
import { PacerControl } from '../control.js';
import type { PacingController } from '../controller/api.js';
import { FlightCloser } from '../flight-closer.js';
import { planField } from '../keys.js';
import { ShardPacer, type ShardPacerOptions } from '../pacer.js';
import { plansOfCampaign } from '../plan-list.js';
import { pacerShardKey } from '../shard.js';
import { rawSpendSource, type SpendSource } from '../spend-source.js';
import { AllocationAuthority, type AllocationAuthorityOptions } from './allocation-authority.js';
import { type AllocationConfig, allocationConfig, homeOf } from './allocation-config.js';
import { type FlightTarget, PeerCaches, RegionalShardPacer } from './cross-region.js';
import { ledgerConfirmedOf, ledgerPlanDaySpendOf } from './ledger-confirmed.js';
import { RegionAllocations } from './region-allocations.js';
import { RegionShares } from './region-shares.js';
import { dynamoRegionSpendStore } from './region-spend-store.js';
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
  /**
   * Every region of the deployment in `PACELINE_REGIONS` order (the first is the default home of
   * every plan's allocation authority). @default this region alone (allocations off)
   */
  readonly regions?: readonly string[];
  /** Allocation settings (docs/pacing.md, "Many regions"). @default strict with > 1 region */
  readonly allocations?: Partial<Omit<AllocationConfig, 'regions'>>;
  /**
   * The spend-ledger table (this region's replica of the global table): what a lost region
   * confirmed, for the reclaim of its allocation. Without it (or `confirmedOf`) nothing is reclaimed.
   */
  readonly spendLedgerTable?: string;
  /** A region's confirmed spend of a plan-day (default: from `spendLedgerTable`). */
  readonly confirmedOf?: AllocationAuthorityOptions['confirmedOf'];
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
  /** The allocation settings in force. */
  readonly allocations: AllocationConfig;
  /** This region's home step (strict allocations). */
  readonly authority?: AllocationAuthority;
  /** The flight closer (with the spend ledger). */
  readonly flights?: FlightCloser;
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
  const allocations = allocationConfig(d.regions ?? [d.region], d.allocations);
  const store = dynamoRegionSpendStore(d.dynamodb, d.regionSpendTable);
  const shares = (cacheRegion: string, redis: RedisClient) =>
    new RegionShares({
      store,
      shard: d.shard,
      shards: d.shards,
      cacheRegion,
      tickMs: d.tickMs,
      regions: allocations.regions,
      stalePeerMs: allocations.ackFreshMs,
      allocations: new RegionAllocations({ redis, cacheRegion, config: allocations }),
      ...(d.shareConfig ? { config: d.shareConfig } : {}),
    });
  const ownShares = shares(d.region, d.redis);
  const spendOf = (redis: RedisClient) =>
    rawSpendSource(redis, {
      allocations: allocations.mode,
      ...(d.redisSilenceMs === undefined ? {} : { timeoutMs: d.redisSilenceMs }),
    });
  const pacer = (redis: RedisClient, spend: SpendSource, sharing: RegionShares, own = budgets()) =>
    new ShardPacer({
      shard: d.shard,
      region: d.region,
      redis,
      controller: d.controller,
      budgets: own,
      spend,
      sharing,
      clock: d.clock,
      tickMs: d.tickMs,
      ...d.pacerOptions,
    });
  const ownBudgets = budgets();
  const confirmedOf =
    d.confirmedOf ??
    (d.spendLedgerTable === undefined
      ? undefined
      : ledgerConfirmedOf({
          client: d.dynamodb,
          tableName: d.spendLedgerTable,
          campaignsOfAccount: campaignsOfAccountIn(ownBudgets),
        }));
  const authority =
    allocations.mode === 'strict'
      ? new AllocationAuthority({
          store,
          region: d.region,
          pk: ownShares.partitionKey,
          config: allocations,
          budgets: ownBudgets,
          ...(confirmedOf ? { confirmedOf } : {}),
        })
      : undefined;
  const flights = flightTarget(d, allocations, ownBudgets);
  const byRegion = new Map(d.peers.map((p) => [p.region, p]));
  const regional = new RegionalShardPacer({
    region: d.region,
    own: pacer(d.redis, d.spend ?? spendOf(d.redis), ownShares, ownBudgets),
    clock: d.clock,
    ...(authority ? { authority: { authority, view: () => ownShares.view } } : {}),
    ...(flights ? { flights } : {}),
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
      pacer: (redis: RedisClient) => pacer(redis, spendOf(redis), shares(p.region, redis)),
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
    allocations,
    ...(authority ? { authority } : {}),
    ...(flights ? { flights: flights.closer } : {}),
  };
}

/**
 * The flight closer of the shard (docs/spend.md, "Flights"): needs the spend ledger (every
 * region's wins) and writes the plans whose allocation home is this region.
 */
function flightTarget(
  d: RegionalShardPacerDeps,
  allocations: AllocationConfig,
  budgets: ShardBudgets,
): FlightTarget | undefined {
  if (d.spendLedgerTable === undefined) return undefined;
  const table = { client: d.dynamodb, tableName: d.budgetsTable };
  const closer = new FlightCloser({
    spendOf: ledgerPlanDaySpendOf({
      client: d.dynamodb,
      tableName: d.spendLedgerTable,
      region: d.region,
      campaignsOfAccount: campaignsOfAccountIn(budgets),
    }),
    record: (plan, day, micros, nowMs) => recordFlightDay(table, plan, day, micros, nowMs),
  });
  return {
    closer,
    *plans() {
      if (!budgets.loaded) return;
      const seen = new Set<string>();
      for (const b of budgets.campaigns()) {
        for (const plan of plansOfCampaign(b)) {
          const field = planField(plan);
          if (!plan.flight || seen.has(field) || homeOf(plan, allocations) !== d.region) continue;
          seen.add(field);
          yield plan;
        }
      }
    },
  };
}

/** An account's campaigns: all in its shard, so the shard's budgets list them. */
function campaignsOfAccountIn(budgets: ShardBudgets): (accountId: string) => string[] {
  return (accountId) =>
    budgets
      .campaigns()
      .filter((b) => b.account.accountId === accountId)
      .map((b) => b.campaign.campaignId);
}
