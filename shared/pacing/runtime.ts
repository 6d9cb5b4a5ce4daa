/**
 * The pacer objects a function builds once at cold start from its environment (the pacer
 * function's module scope, beside `spendRuntimeFromEnv` and `countingRuntimeFromEnv`): DynamoDB
 * and SSM clients with bounded timeouts, the peer regions' clients, Redis, the controller, and
 * each shard's warm state — built on a shard's first invocation and kept for the life of the
 * execution environment, whichever instance of the shard an invocation runs as.
 */
import { randomUUID } from 'node:crypto';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { dynamoDbClient, endpointsFromEnv, peerEndpointsFromEnv, ssmClient } from '../aws/clients.js';
import { elastiCacheClient } from '../aws/ops-clients.js';
import { intEnv, optionalEnv, requireEnv } from '../config/env.js';
import type { RedisClient } from '../redis/connect.js';
import { connectRedis, redisConfigFromEnv } from '../redis/connect.js';
import { parameterEnv, redisEnv, regionResources } from '../region/resources.js';
import { type Clock, systemClock } from '../time/clock.js';
import type { PacerControl } from './control.js';
import type { PacingController } from './controller/api.js';
import { createPacingController, elasticityOf } from './controller/index.js';
import { ProcessTicks } from './process-ticks.js';
import { allocationSettingsFromEnv, regionalRelease } from './regions/allocation-config.js';
import type { RegionalShardPacer } from './regions/cross-region.js';
import { regionalShardPacer } from './regions/wiring.js';
import { type PacerConfig, pacerConfigFromEnv } from './settings.js';

type Env = Readonly<Record<string, string | undefined>>;

/** What the pacer keeps per shard across invocations of one execution environment. */
export interface ShardWarmState {
  readonly pacer: RegionalShardPacer;
  readonly control: PacerControl;
  /** The shard's ticks in this process: one at a time, each once, whichever invocation runs it. */
  readonly ticks: ProcessTicks;
}

/** What {@link pacerRuntimeFromEnv} builds. */
export interface PacerRuntime {
  readonly config: PacerConfig;
  readonly dynamodb: DynamoDBClient;
  readonly redis: RedisClient;
  readonly leasesTable: string;
  readonly clock: Clock;
  readonly sleep: (ms: number) => Promise<void>;
  /**
   * Distinguishes this process from another one running the same instance (publisher ids): the
   * pid (operators and tests map a publisher to its process) and a random part (pids are reused).
   */
  readonly processNonce: string;
  /** The shard's warm state, built on its first use. */
  warmState(shard: number): ShardWarmState;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Builds the pacer's objects from the function's environment (throws naming a missing variable). */
export function pacerRuntimeFromEnv(options: {
  /** Connection errors fail the tick's commands; they are reported here instead of crashing. */
  readonly onRedisError: (error: Error) => void;
  readonly env?: Env;
}): PacerRuntime {
  const env = options.env ?? process.env;
  const config = pacerConfigFromEnv(env);
  const clock = systemClock;
  // A tick must not hang on an unreachable dependency: bounded calls, one retry.
  const timeouts = {
    connectionTimeoutMs: Math.max(250, Math.floor(config.tickMs / 10)),
    requestTimeoutMs: Math.max(500, Math.floor(config.tickMs / 4)),
    maxAttempts: 2,
  };
  const dynamodb = dynamoDbClient(endpointsFromEnv(env), timeouts);
  const ssm = ssmClient(endpointsFromEnv(env), timeouts);
  // Peer regions (PACELINE_REGIONS): their publish switches (SSM) and caches (ElastiCache API).
  const peers = peerEndpointsFromEnv(config.region, env).map((e) => ({
    region: e.region,
    ssm: ssmClient(e, timeouts),
    elasticache: elastiCacheClient(e, timeouts),
  }));
  // Strict multi-region budgets (docs/pacing.md, "Many regions"): the regions in order, the mode.
  const allocationSettings = allocationSettingsFromEnv(config.region, env);
  const redis = connectRedis(redisConfigFromEnv(env));
  redis.on('error', options.onRedisError);
  // A region counts the in-flight release its guards count (their part of the cap, several regions).
  const controller = createPacingController({
    // The region's auction sets the elasticity the controller assumes (docs/pacing.md, "Actuators").
    elasticity: elasticityOf(config.auction),
    // The region's audience zone places the built-in shape (docs/pacing.md, "Prior for new plans").
    audienceTimeZone: config.audienceTimeZone ?? null,
    ...regionalRelease(allocationSettings.mode, allocationSettings.regions.length),
  }) as PacingController<unknown, unknown>;
  // The deployment's names, from the environment the stack derived from its description: the
  // parameter root (a peer region's prefix is `<root><peer>/`) and the caches' group id and IAM user.
  const cacheIamUser = optionalEnv(redisEnv.iamUser, undefined, env);
  const cache = {
    replicationGroupId: requireEnv(redisEnv.cacheName, env),
    ...(cacheIamUser ? { iamUserId: cacheIamUser } : {}),
  };
  /** Fault injection for tests (docs/pacing.md): a pause between claim and publish, ms. */
  const pauseBeforePublishMs = intEnv('PACER_FAULT_PAUSE_BEFORE_PUBLISH_MS', 0, env);
  const shared = {
    region: config.region,
    shards: config.shards,
    dynamodb,
    ssm,
    budgetsTable: requireEnv(regionResources.tables.budgets.envVar, env),
    regionSpendTable: requireEnv(regionResources.tables.regionSpend.envVar, env),
    // A lost region's confirmed spend (its wins in the replicated ledger), for allocation reclaims.
    spendLedgerTable: requireEnv(regionResources.tables.spendLedger.envVar, env),
    redis,
    peers,
    controller,
    clock,
    tickMs: config.tickMs,
    budgetsFullReloadMs: config.budgetsFullReloadMs,
    regions: allocationSettings.regions,
    allocations: { mode: allocationSettings.mode },
    parameterRoot: requireEnv(parameterEnv.root, env),
    cache,
    redisSilenceMs: config.redisSilenceMs,
    pacerOptions: {
      logMaxLen: config.auditLogMaxLen,
      ...(pauseBeforePublishMs > 0 ? { beforePublish: () => sleep(pauseBeforePublishMs) } : {}),
    },
  };
  const shards = new Map<number, ShardWarmState>();
  return {
    config,
    dynamodb,
    redis,
    leasesTable: requireEnv(regionResources.tables.leases.envVar, env),
    clock,
    sleep,
    processNonce: `${process.pid}-${randomUUID().slice(0, 4)}`,
    warmState(shard) {
      let s = shards.get(shard);
      if (!s) {
        const wiring = regionalShardPacer({ ...shared, shard });
        s = { pacer: wiring.pacer, control: wiring.control, ticks: new ProcessTicks() };
        shards.set(shard, s);
      }
      return s;
    },
  };
}
