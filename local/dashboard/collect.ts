/**
 * Reads one region's stores for the dashboard (thin adapter; the shaping is in `model.ts`):
 * campaigns and budgets from the budgets table (`BudgetRepository`, refreshed every
 * `campaignsRefreshMs`), the published campaign hashes and the live spend hashes from Redis,
 * shard leaders and parameter age as `paceline status` computes them (`readShardStatuses`), and
 * the dead-letter table's count per source. A part that fails is reported in the sample's
 * `errors`, so one unreachable store does not blank the whole page.
 */
import { type AttributeValue, type DynamoDBClient, QueryCommand } from '@aws-sdk/client-dynamodb';
import type { SSMClient } from '@aws-sdk/client-ssm';
import { dynamoDbClient, endpointsFromEnv, ssmClient } from '../../shared/aws/clients.js';
import { BudgetRepository } from '../../shared/budget/repository.js';
import { resolvePacerShards } from '../../shared/pacing/control.js';
import { campaignParamsKey, shardClaimKey } from '../../shared/pacing/keys.js';
import { allocationSettingsFromEnv } from '../../shared/pacing/regions/allocation-config.js';
import { type PublishSwitch, readPublishSwitch, readShardStatuses } from '../../shared/pacing/status.js';
import { connectRedis, type RedisClient, redisConfigFromEnv } from '../../shared/redis/connect.js';
import { regionResources, resourceName } from '../../shared/region/resources.js';
import { planDayKeys } from '../../shared/spend/keys.js';
import {
  type CampaignReading,
  type CampaignRef,
  campaignReading,
  type RegionSample,
  readPublished,
  type ShardReading,
  spendDay,
  topCampaigns,
} from './model.js';

type Env = Readonly<Record<string, string | undefined>>;

/** Options of {@link RegionCollector}. */
export interface CollectorOptions {
  readonly region: string;
  /** The region's client environment (`Client env` of `npm start`). */
  readonly env: Env;
  /** Campaigns charted. @default 5 */
  readonly topCampaigns?: number;
  /** How often the campaign list is re-read from the budgets table, ms. @default 10_000 */
  readonly campaignsRefreshMs?: number;
}

/** Longest a dashboard round waits for one Redis command. */
export const REDIS_COMMAND_TIMEOUT_MS = 2_000;

/** Sources that quarantine records: the stream-triggered functions. */
export const deadLetterSources: readonly string[] = Object.values(regionResources.functions)
  .filter((f) => 'source' in f && f.source !== undefined)
  .map((f) => f.name);

/** Reads a region's stores into {@link RegionSample}s. */
export class RegionCollector {
  private readonly dynamodb: DynamoDBClient;
  private readonly ssm: SSMClient;
  private readonly redis: RedisClient;
  private readonly repo: BudgetRepository;
  private readonly deadLetterTable: string;
  private readonly leasesTable: string;
  private shards: number | undefined;
  private campaigns: CampaignRef[] = [];
  private readonly deploymentRegions: readonly string[];
  private campaignsReadAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly options: CollectorOptions) {
    const endpoints = endpointsFromEnv({ ...options.env, AWS_REGION: options.region });
    const timeouts = { connectionTimeoutMs: 2_000, requestTimeoutMs: 5_000, maxAttempts: 1 };
    this.dynamodb = dynamoDbClient(endpoints, timeouts);
    this.ssm = ssmClient(endpoints, timeouts);
    // A paused or unreachable Redis must fail a round, not hang it: rounds never overlap, so one
    // command without a timeout would freeze the page for good.
    this.redis = connectRedis(redisConfigFromEnv(options.env), {
      maxRetriesPerRequest: 1,
      redisOptions: { connectTimeout: 2_000, commandTimeout: REDIS_COMMAND_TIMEOUT_MS },
    });
    // A restarting redis-server shows as an error line on the page, not as a crash.
    this.redis.on('error', () => {});
    this.repo = new BudgetRepository({
      client: this.dynamodb,
      tableName: resourceName(regionResources.tables.budgets, options.env),
    });
    this.deadLetterTable = resourceName(regionResources.tables.deadLetters, options.env);
    // Several regions (PACELINE_REGIONS): the plans' allocation authority is shown.
    this.deploymentRegions = allocationSettingsFromEnv(options.region, options.env).regions;
    this.leasesTable = resourceName(regionResources.tables.leases, options.env);
  }

  /** One sample at `nowMs`. Never throws: failed parts are listed in `errors`. */
  async collect(nowMs: number): Promise<RegionSample> {
    const errors: string[] = [];
    const part = async <T>(name: string, fallback: T, read: () => Promise<T>): Promise<T> => {
      try {
        return await read();
      } catch (error) {
        errors.push(`${name}: ${(error as Error).message ?? String(error)}`);
        return fallback;
      }
    };
    const shards = await part('pacer shard count', undefined, () => this.shardCount());
    const [campaigns, shardReadings, deadLetters, publishSwitch] = await Promise.all([
      shards === undefined
        ? Promise.resolve([])
        : part('campaigns', [] as CampaignReading[], () => this.readCampaigns(shards, nowMs)),
      shards === undefined
        ? Promise.resolve([])
        : part('pacer shards', [] as ShardReading[], () => this.readShards(shards, nowMs)),
      part('dead letters', {} as Record<string, number>, () => this.readDeadLetters()),
      part('publish switch', null as PublishSwitch | null, () =>
        readPublishSwitch(this.ssm, this.options.region),
      ),
    ]);
    return {
      region: this.options.region,
      atMs: nowMs,
      campaigns,
      shards: shardReadings,
      publishSwitch,
      deadLetters,
      errors,
    };
  }

  private async shardCount(): Promise<number> {
    this.shards ??= await resolvePacerShards(this.options.env, this.ssm, this.options.region);
    return this.shards;
  }

  /** Campaign plans of every account (a Scan plus a Query per partition: local tooling only). */
  private async refreshCampaigns(nowMs: number): Promise<void> {
    if (nowMs - this.campaignsReadAt < (this.options.campaignsRefreshMs ?? 10_000)) return;
    const refs: CampaignRef[] = [];
    for (const account of await this.repo.listAccounts()) {
      for (const plan of await this.repo.listPlans(account.accountId)) {
        if (plan.level !== 'campaign' || plan.campaignId === undefined) continue;
        refs.push({
          accountId: account.accountId,
          campaignId: plan.campaignId,
          budgetMicros: plan.dailyBudgetMicros,
          timeZone: account.timeZone,
          ...(plan.allocHome === undefined ? {} : { allocHome: plan.allocHome }),
          ...(plan.allocFence === undefined ? {} : { allocFence: plan.allocFence }),
        });
      }
    }
    this.campaigns = topCampaigns(refs, this.options.topCampaigns ?? 5);
    this.campaignsReadAt = nowMs;
  }

  private async readCampaigns(shards: number, nowMs: number): Promise<CampaignReading[]> {
    await this.refreshCampaigns(nowMs);
    return Promise.all(
      this.campaigns.map(async (ref) => {
        // The shard's completed publish first (contract v2 freshness), then the campaign hash.
        const [pt, pat, rp] = await this.redis.hmget(shardClaimKey(ref.accountId, shards), 'pt', 'pat', 'rp');
        const published = await this.redis.hgetall(campaignParamsKey(ref.accountId, ref.campaignId, shards));
        const day = spendDay(ref, readPublished(published).plan, nowMs);
        const spendKey = planDayKeys({ scope: `c:${ref.campaignId}`, planId: 'campaign' }, day).state;
        return campaignReading(
          ref,
          published,
          await this.redis.hgetall(spendKey),
          nowMs,
          { pt, pat, rp },
          this.deploymentRegions,
        );
      }),
    );
  }

  private async readShards(shards: number, nowMs: number): Promise<ShardReading[]> {
    const statuses = await readShardStatuses({
      region: this.options.region,
      shards,
      dynamodb: this.dynamodb,
      leasesTable: this.leasesTable,
      ssm: this.ssm,
      redis: this.redis,
      nowMs,
    });
    return statuses.map(
      ({ shard, leader, epoch, lastTick, ageMs, override, publisher, publishingRegion }) => ({
        shard,
        leader,
        epoch,
        lastTick,
        ageMs,
        override,
        publisher,
        publishingRegion,
      }),
    );
  }

  /** Count of quarantined records per source (Query with Select COUNT, paged). */
  private async readDeadLetters(): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    await Promise.all(
      deadLetterSources.map(async (source) => {
        let n = 0;
        let start: Record<string, AttributeValue> | undefined;
        do {
          const page = await this.dynamodb.send(
            new QueryCommand({
              TableName: this.deadLetterTable,
              KeyConditionExpression: 'pk = :pk',
              ExpressionAttributeValues: { ':pk': { S: source } },
              Select: 'COUNT',
              ExclusiveStartKey: start,
            }),
          );
          n += page.Count ?? 0;
          start = page.LastEvaluatedKey;
        } while (start);
        out[source] = n;
      }),
    );
    return out;
  }

  close(): void {
    this.redis.disconnect();
    this.dynamodb.destroy();
    this.ssm.destroy();
  }
}
