/**
 * Two local regions in one test process: each with its own redis-server, dynalite (behind the
 * global-tables stand-in), SSM and ElastiCache endpoints; pacer instances wired exactly as the
 * pacer function wires them (`regionalShardPacer`), driven tick by tick on a manual clock.
 */
import { PutParameterCommand } from '@aws-sdk/client-ssm';
import { GlobalTablesStandIn } from '../../../local/global-tables.js';
import { principalCredentials } from '../../../local/iam/policy.js';
import { type LocalRegion, localDescription, localIam, startLocalRegion } from '../../../local/region.js';
import { type AwsEndpoints, dynamoDbClient, ssmClient } from '../../../shared/aws/clients.js';
import { elastiCacheClient } from '../../../shared/aws/ops-clients.js';
import type { PacingController } from '../../../shared/pacing/controller/api.js';
import { ShardLease } from '../../../shared/pacing/lease.js';
import type { TickOutcome } from '../../../shared/pacing/pacer.js';
import type { PeerTickOutcome } from '../../../shared/pacing/regions/cross-region.js';
import type { ShareConfig } from '../../../shared/pacing/regions/shares.js';
import { type RegionalShardPacerWiring, regionalShardPacer } from '../../../shared/pacing/regions/wiring.js';
import { connectRedis, type RedisClient, redisConfigFromEnv } from '../../../shared/redis/connect.js';
import { pacerInstanceId, parameterPrefix } from '../../../shared/region/resources.js';
import type { ManualClock } from '../../../shared/time/clock.js';

export const REGION_A = 'us-east-1';
export const REGION_B = 'us-west-2';

/** Two linked local regions. */
export interface TwoRegions {
  readonly link: GlobalTablesStandIn;
  readonly regions: Readonly<Record<string, LocalRegion>>;
  /** A client of each region's cache (the tests' view). */
  readonly redis: Readonly<Record<string, RedisClient>>;
  stop(): Promise<void>;
}

/**
 * Starts regions A and B with global tables replicated at `lagMs` on `clock`, under one IAM layer
 * with the policies synthesized for both (a pacer calls its peer's endpoints with its own key).
 */
export async function startTwoRegions(clock: ManualClock, lagMs: number): Promise<TwoRegions> {
  const link = new GlobalTablesStandIn({ clock, lagMs });
  const iam = await localIam([REGION_A, REGION_B], localDescription());
  const [a, b] = await Promise.all([
    startLocalRegion({ region: REGION_A, globalTables: link, iam }),
    startLocalRegion({ region: REGION_B, globalTables: link, iam }),
  ]);
  const regions = { [REGION_A]: a, [REGION_B]: b };
  const redis = {
    [REGION_A]: connectRedis(redisConfigFromEnv(a.clientEnv)),
    [REGION_B]: connectRedis(redisConfigFromEnv(b.clientEnv)),
  };
  return {
    link,
    regions,
    redis,
    async stop() {
      for (const r of Object.values(redis)) r.disconnect();
      await link.stop();
      await Promise.all([a.stop(), b.stop()]);
    },
  };
}

/** One pacer instance of one region (as one process of the pacer function runs it). */
export interface RegionalInstance {
  readonly region: string;
  readonly instanceId: string;
  readonly publisherId: string;
  readonly wiring: RegionalShardPacerWiring;
  tick(tick: number): Promise<{ own: TickOutcome; peers: PeerTickOutcome[] }>;
  close(): void;
}

/** Options of {@link regionalInstance}. */
export interface RegionalInstanceOptions {
  readonly two: TwoRegions;
  readonly region: string;
  readonly shard: number;
  readonly instance: number;
  readonly clock: ManualClock;
  readonly controller: PacingController<unknown, unknown>;
  readonly tickMs: number;
  readonly leaseTtlMs?: number;
  readonly shareConfig?: Partial<ShareConfig>;
}

/**
 * A pacer instance of `region`, its peers being every other region of `two`. Its AWS calls are the
 * pacer function's: made with the pacer's key, held to its synthesized policy here and at the peers.
 */
export function regionalInstance(o: RegionalInstanceOptions): RegionalInstance {
  const home = o.two.regions[o.region] as LocalRegion;
  const redis = connectRedis(redisConfigFromEnv(home.clientEnv));
  const as = (r: LocalRegion): AwsEndpoints => ({
    ...r.endpoints,
    credentials: principalCredentials(o.region, 'pacer'),
  });
  const dynamodb = dynamoDbClient(as(home));
  const peers = Object.values(o.two.regions)
    .filter((r) => r.region !== o.region)
    .map((r) => ({ region: r.region, ssm: ssmClient(as(r)), elasticache: elastiCacheClient(as(r)) }));
  const ssm = ssmClient(as(home));
  const wiring = regionalShardPacer({
    region: o.region,
    shard: o.shard,
    shards: home.description.settings.pacer.shards,
    dynamodb,
    ssm,
    budgetsTable: home.tableName('budgets'),
    regionSpendTable: home.tableName('regionSpend'),
    redis,
    peers,
    controller: o.controller,
    clock: o.clock,
    tickMs: o.tickMs,
    ...(o.shareConfig ? { shareConfig: o.shareConfig } : {}),
  });
  const instanceId = pacerInstanceId(o.shard, o.instance);
  const publisherId = `${o.region}/${instanceId}/p`;
  const lease = new ShardLease({
    client: dynamodb,
    tableName: home.tableName('leases'),
    shard: o.shard,
    instanceId,
    processId: 'p',
    invocationStartMs: o.clock.now(),
    ttlMs: o.leaseTtlMs ?? 25_000,
    clock: o.clock,
  });
  return {
    region: o.region,
    instanceId,
    publisherId,
    wiring,
    tick: (tick) => wiring.pacer.runTick(tick, { instanceId, publisherId, lease, control: wiring.control }),
    close() {
      wiring.pacer.close();
      redis.disconnect();
      for (const c of [dynamodb, ssm, ...peers.flatMap((p) => [p.ssm, p.elasticache])]) c.destroy();
    },
  };
}

/** Sets region `of`'s publish switch to `to`. */
export async function setPublisherRegion(two: TwoRegions, of: string, to: string): Promise<void> {
  await (two.regions[of] as LocalRegion).ssm.send(
    new PutParameterCommand({
      Name: `${parameterPrefix(of)}publisher-region`,
      Value: to,
      Overwrite: true,
      Type: 'String',
    }),
  );
}
