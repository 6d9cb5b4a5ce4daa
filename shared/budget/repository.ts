/**
 * DynamoDB repository of the budget model on the budgets table (generic `pk`/`sk`).
 *
 * Key design (one table, no GSI):
 * - account:          pk `ACCOUNT#<accountId>`   sk `ACCOUNT`
 * - account plan:     pk `ACCOUNT#<accountId>`   sk `PLAN#account`
 * - campaign index:   pk `ACCOUNT#<accountId>`   sk `CAMPAIGN#<campaignId>` (lists an account's campaigns)
 * - campaign:         pk `CAMPAIGN#<campaignId>` sk `CAMPAIGN`
 * - campaign/arm plan pk `CAMPAIGN#<campaignId>` sk `PLAN#campaign` | `PLAN#arm:<armId>`
 *
 * Everything a bid of a campaign needs is one Query (campaign partition) plus one BatchGet
 * (account and its plan). Every item carries a `version`; writes are conditional on it so two
 * operators cannot silently overwrite each other (optimistic concurrency, no transactions —
 * dynalite has none). Plans hold budgets only: spend lives in the ledger and live counters.
 *
 * Pacer shards: every account, campaign and plan item also carries `pacerShard` =
 * `<N>:<fnv1a32(accountId) mod N>` and `updatedAt`, the keys of the `by-pacer-shard` index, so a
 * pacer reads only its shard, incrementally (shared/pacing/budgets-cache.ts). Writers therefore
 * need the region's shard count N (`pacerShards`); see docs/pacing.md for how N is found and
 * changed.
 */

import { ConditionalCheckFailedException, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  BatchGetCommand,
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  ScanCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { errorKind } from '../errors.js';
import { accountShardKey } from '../pacing/shard.js';
import {
  type Account,
  type BudgetPlan,
  type Campaign,
  type CampaignBudgets,
  campaignBudgets,
  planIdOf,
  validateAccount,
  validateCampaign,
  validatePlan,
} from './model.js';
import { canonicalTimeZone } from './time-zone.js';

/** Options of {@link BudgetRepository}. */
export interface BudgetRepositoryOptions {
  readonly client: DynamoDBClient;
  /** Physical name of the budgets table (`BUDGETS_TABLE`). */
  readonly tableName: string;
  /**
   * The region's pacer shard count N, needed to write (items are tagged with their shard). Read
   * it from `PACER_SHARDS` or the SSM parameter `/paceline/<region>/pacer/shards`. Reads work
   * without it; a write without it throws {@link BudgetShardingError}.
   */
  readonly pacerShards?: number;
}

/** Thrown when a write cannot tag its item with a pacer shard (no shard count configured). */
export class BudgetShardingError extends errorKind('BudgetShardingError', 'budget.sharding') {}

/** Name of the budgets table's index by pacer shard (keys `pacerShard`, `updatedAt`). */
export const PACER_SHARD_INDEX = 'by-pacer-shard';

/** Item types a pacer reads from its shard's index. */
export type BudgetItemType = 'account' | 'campaign' | 'plan';

/** A raw budgets-table item as the shard index returns it (pk, sk, type and the model's fields). */
export type BudgetItem = Record<string, unknown> & {
  readonly pk: string;
  readonly sk: string;
  readonly type: BudgetItemType;
  readonly version: number;
  readonly updatedAt: number;
  readonly pacerShard: string;
};

/** Thrown when an item to create exists already, or an update lost an optimistic-concurrency race. */
export class BudgetConflictError extends errorKind('BudgetConflictError', 'budget.conflict') {}

/** Thrown when a referenced account or campaign does not exist. */
export class BudgetNotFoundError extends errorKind('BudgetNotFoundError', 'budget.not-found') {}

/** How a write treats an existing item. */
export type WriteMode = 'create' | 'update' | 'upsert';

/** A stored item with its version. */
export type Versioned<T> = T & { readonly version: number; readonly updatedAt: number };

const accountKey = (accountId: string) => ({ pk: `ACCOUNT#${accountId}`, sk: 'ACCOUNT' });
const campaignKey = (campaignId: string) => ({ pk: `CAMPAIGN#${campaignId}`, sk: 'CAMPAIGN' });
/** The key of a plan item. */
export function planKey(p: Pick<BudgetPlan, 'level' | 'accountId' | 'campaignId' | 'armId'>) {
  return p.level === 'account'
    ? { pk: `ACCOUNT#${p.accountId}`, sk: 'PLAN#account' }
    : { pk: `CAMPAIGN#${p.campaignId}`, sk: `PLAN#${planIdOf(p)}` };
}

/**
 * Plan attributes a plan write keeps: the allocation authority's (rehome), the creation time and
 * the flight's closed days (the flight closer's).
 */
const PLAN_KEPT_FIELDS = ['allocHome', 'allocFence', 'allocSettleUntil', 'createdAt', 'flightSpent'] as const;

/** Budget model on DynamoDB. */
export class BudgetRepository {
  private readonly doc: DynamoDBDocumentClient;
  private readonly tableName: string;
  private readonly pacerShards: number | undefined;

  constructor(options: BudgetRepositoryOptions) {
    this.doc = DynamoDBDocumentClient.from(options.client, {
      marshallOptions: { removeUndefinedValues: true },
    });
    this.tableName = options.tableName;
    this.pacerShards = options.pacerShards;
  }

  private shardKey(accountId: string): string {
    if (this.pacerShards === undefined) {
      throw new BudgetShardingError(
        'BudgetRepository needs pacerShards (the region pacer shard count N) to write: set PACER_SHARDS ' +
          'or read /paceline/<region>/pacer/shards from SSM (the local runner prints PACER_SHARDS).',
      );
    }
    return accountShardKey(accountId, this.pacerShards);
  }

  /** Creates or updates an account (validated). */
  async putAccount(
    account: Account,
    mode: WriteMode = 'upsert',
    now = Date.now(),
  ): Promise<Versioned<Account>> {
    // Stored in one spelling (`america/los_angeles` → `America/Los_Angeles`), then validated.
    const canonical = { ...account, timeZone: canonicalZoneOrAsGiven(account.timeZone) };
    validateAccount(canonical);
    return this.write(
      accountKey(account.accountId),
      { type: 'account', ...canonical, pacerShard: this.shardKey(account.accountId) },
      mode,
      now,
      `account ${account.accountId}`,
    );
  }

  /** Creates or updates a campaign; its account must exist. */
  async putCampaign(
    campaign: Campaign,
    mode: WriteMode = 'upsert',
    now = Date.now(),
  ): Promise<Versioned<Campaign>> {
    validateCampaign(campaign);
    const pacerShard = this.shardKey(campaign.accountId);
    await this.requireAccount(campaign.accountId);
    const stored = await this.write(
      campaignKey(campaign.campaignId),
      { type: 'campaign', ...campaign, pacerShard },
      mode,
      now,
      `campaign ${campaign.campaignId}`,
    );
    // The index item is derived data: rewriting it is idempotent.
    await this.doc.send(
      new PutCommand({
        TableName: this.tableName,
        Item: {
          pk: `ACCOUNT#${campaign.accountId}`,
          sk: `CAMPAIGN#${campaign.campaignId}`,
          type: 'campaign-index',
        },
      }),
    );
    return stored;
  }

  /**
   * Creates or updates a budget plan. Changing `dailyBudgetMicros` mid-day takes effect at once
   * from the remaining budget, because spend is stored separately and the remainder derived.
   */
  async putPlan(
    plan: BudgetPlan,
    mode: WriteMode = 'upsert',
    now = Date.now(),
  ): Promise<Versioned<BudgetPlan>> {
    validatePlan(plan);
    const pacerShard = this.shardKey(plan.accountId);
    await this.requireAccount(plan.accountId);
    if (plan.level !== 'account') {
      const c = await this.getCampaign(plan.campaignId as string);
      if (!c) throw new BudgetNotFoundError(`Campaign ${plan.campaignId} does not exist: create it first.`);
      if (c.accountId !== plan.accountId) {
        throw new BudgetConflictError(
          `Campaign ${plan.campaignId} belongs to account ${c.accountId}, not ${plan.accountId}.`,
        );
      }
    }
    // The allocation fields belong to `rehome` (a plan write keeps them); createdAt is the first write's.
    const {
      allocHome: _h,
      allocFence: _f,
      allocSettleUntil: _s,
      createdAt: _c,
      flightSpent: _fs,
      ...fields
    } = plan;
    return this.write(
      planKey(plan),
      { type: 'plan', ...fields, pacerShard },
      mode,
      now,
      `plan ${planIdOf(plan)}`,
      PLAN_KEPT_FIELDS,
    );
  }

  /**
   * One page of a pacer shard's items (accounts, campaigns, plans) with `updatedAt ≥ sinceMs`,
   * oldest change first, from the `by-pacer-shard` index: no scan. Index reads are eventually
   * consistent (DynamoDB propagates index writes asynchronously), so callers re-read an overlap.
   */
  async shardItemsPage(
    shardKey: string,
    sinceMs: number,
    startKey?: Record<string, unknown>,
  ): Promise<{ items: BudgetItem[]; next?: Record<string, unknown> }> {
    const page = await this.doc.send(
      new QueryCommand({
        TableName: this.tableName,
        IndexName: PACER_SHARD_INDEX,
        KeyConditionExpression: 'pacerShard = :s AND updatedAt >= :t',
        ExpressionAttributeValues: { ':s': shardKey, ':t': sinceMs },
        ExclusiveStartKey: startKey,
      }),
    );
    return {
      items: (page.Items ?? []) as BudgetItem[],
      ...(page.LastEvaluatedKey ? { next: page.LastEvaluatedKey } : {}),
    };
  }

  /**
   * Re-tags every item for a new shard count (the re-shard procedure, docs/pacing.md). A Scan:
   * operator tooling, run once per change of N, never on a hot path. Each item is updated only if
   * its version did not change meanwhile (a concurrent edit already wrote the new tag when the
   * writers use the new N); `updatedAt` is bumped so pacers pick the item up incrementally.
   * Returns how many items were re-tagged and how many already had the new tag.
   */
  async reshard(newShards: number, now = Date.now()): Promise<{ retagged: number; unchanged: number }> {
    let retagged = 0;
    let unchanged = 0;
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.doc.send(
        new ScanCommand({
          TableName: this.tableName,
          FilterExpression: '#t IN (:a, :c, :p)',
          ExpressionAttributeNames: { '#t': 'type' },
          ExpressionAttributeValues: { ':a': 'account', ':c': 'campaign', ':p': 'plan' },
          ExclusiveStartKey: start,
        }),
      );
      for (const item of page.Items ?? []) {
        const key = accountShardKey(String(item.accountId), newShards);
        if (item.pacerShard === key) {
          unchanged++;
          continue;
        }
        try {
          await this.doc.send(
            new UpdateCommand({
              TableName: this.tableName,
              Key: { pk: item.pk, sk: item.sk },
              UpdateExpression: 'SET pacerShard = :s, updatedAt = :now',
              ConditionExpression: 'version = :v',
              ExpressionAttributeValues: { ':s': key, ':now': now, ':v': item.version },
            }),
          );
          retagged++;
        } catch (error) {
          if (!(error instanceof ConditionalCheckFailedException)) throw error;
          unchanged++; // rewritten concurrently by a writer (which tags with its own N)
        }
      }
      start = page.LastEvaluatedKey;
    } while (start);
    return { retagged, unchanged };
  }

  /** The account, or undefined. */
  async getAccount(accountId: string): Promise<Versioned<Account> | undefined> {
    const out = await this.doc.send(
      new GetCommand({ TableName: this.tableName, Key: accountKey(accountId), ConsistentRead: true }),
    );
    return out.Item ? strip<Versioned<Account>>(out.Item) : undefined;
  }

  /** The campaign, or undefined. */
  async getCampaign(campaignId: string): Promise<Versioned<Campaign> | undefined> {
    const out = await this.doc.send(
      new GetCommand({ TableName: this.tableName, Key: campaignKey(campaignId), ConsistentRead: true }),
    );
    return out.Item ? strip<Versioned<Campaign>>(out.Item) : undefined;
  }

  /** Every account (a Scan: operator tooling only, never on a hot path). */
  async listAccounts(): Promise<Versioned<Account>[]> {
    const out: Versioned<Account>[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.doc.send(
        new ScanCommand({
          TableName: this.tableName,
          FilterExpression: '#t = :t',
          ExpressionAttributeNames: { '#t': 'type' },
          ExpressionAttributeValues: { ':t': 'account' },
          ExclusiveStartKey: start,
        }),
      );
      for (const item of page.Items ?? []) out.push(strip<Versioned<Account>>(item));
      start = page.LastEvaluatedKey;
    } while (start);
    return out;
  }

  /** Campaign ids of an account. */
  async listCampaignIds(accountId: string): Promise<string[]> {
    const items = await this.queryPartition(`ACCOUNT#${accountId}`, 'CAMPAIGN#');
    return items.map((i) => String(i.sk).slice('CAMPAIGN#'.length));
  }

  /**
   * The account's own plan and the campaign and arm plans of one campaign, or — without
   * `campaignId` — of every campaign of the account.
   */
  async listPlans(accountId: string, campaignId?: string): Promise<Versioned<BudgetPlan>[]> {
    const campaignIds = campaignId === undefined ? await this.listCampaignIds(accountId) : [campaignId];
    const partitions = [`ACCOUNT#${accountId}`, ...campaignIds.map((id) => `CAMPAIGN#${id}`)];
    const pages = await Promise.all(partitions.map((pk) => this.queryPartition(pk, 'PLAN#')));
    return pages.flat().map((i) => strip<Versioned<BudgetPlan>>(i));
  }

  /**
   * Everything that applies to bids of a campaign, or undefined when the campaign (or its
   * account) does not exist. One Query plus one BatchGet.
   */
  async getCampaignBudgets(campaignId: string): Promise<CampaignBudgets | undefined> {
    const items = await this.queryPartition(`CAMPAIGN#${campaignId}`);
    const campaignItem = items.find((i) => i.sk === 'CAMPAIGN');
    if (!campaignItem) return undefined;
    const campaign = strip<Campaign>(campaignItem);
    const got = await this.doc.send(
      new BatchGetCommand({
        RequestItems: {
          [this.tableName]: {
            Keys: [
              accountKey(campaign.accountId),
              { pk: `ACCOUNT#${campaign.accountId}`, sk: 'PLAN#account' },
            ],
            ConsistentRead: true,
          },
        },
      }),
    );
    const accountItems = got.Responses?.[this.tableName] ?? [];
    const accountItem = accountItems.find((i) => i.sk === 'ACCOUNT');
    if (!accountItem) return undefined;
    const plans = [
      ...accountItems.filter((i) => i.sk === 'PLAN#account'),
      ...items.filter((i) => String(i.sk).startsWith('PLAN#')),
    ];
    return campaignBudgets(
      strip<Account>(accountItem),
      campaign,
      plans.map((i) => strip<BudgetPlan>(i)),
    );
  }

  private async requireAccount(accountId: string): Promise<Account> {
    const a = await this.getAccount(accountId);
    if (!a) throw new BudgetNotFoundError(`Account ${accountId} does not exist: create it first.`);
    return a;
  }

  private async queryPartition(pk: string, skPrefix?: string): Promise<Record<string, unknown>[]> {
    const out: Record<string, unknown>[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.doc.send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: skPrefix ? 'pk = :pk AND begins_with(sk, :sk)' : 'pk = :pk',
          ExpressionAttributeValues: skPrefix ? { ':pk': pk, ':sk': skPrefix } : { ':pk': pk },
          ConsistentRead: true,
          ExclusiveStartKey: start,
        }),
      );
      out.push(...(page.Items ?? []));
      start = page.LastEvaluatedKey;
    } while (start);
    return out;
  }

  private async write<T extends object>(
    key: { pk: string; sk: string },
    body: T,
    mode: WriteMode,
    now: number,
    what: string,
    kept: readonly string[] = [],
  ): Promise<Versioned<T>> {
    const current = await this.doc.send(
      new GetCommand({ TableName: this.tableName, Key: key, ConsistentRead: true }),
    );
    const currentVersion = typeof current.Item?.version === 'number' ? current.Item.version : undefined;
    if (mode === 'create' && currentVersion !== undefined) {
      throw new BudgetConflictError(`${what} exists already: use update (or upsert) to change it.`);
    }
    if (mode === 'update' && currentVersion === undefined) {
      throw new BudgetNotFoundError(`${what} does not exist: use create (or upsert).`);
    }
    const version = (currentVersion ?? 0) + 1;
    // Attributes another writer owns survive a rewrite of the item.
    const keep: Record<string, unknown> = {};
    for (const k of kept) if (current.Item?.[k] !== undefined) keep[k] = current.Item[k];
    if (kept.includes('createdAt') && keep.createdAt === undefined) keep.createdAt = now;
    const item = { ...body, ...keep, ...key, version, updatedAt: now };
    try {
      await this.doc.send(
        new PutCommand({
          TableName: this.tableName,
          Item: item,
          ...(currentVersion === undefined
            ? { ConditionExpression: 'attribute_not_exists(pk)' }
            : { ConditionExpression: 'version = :v', ExpressionAttributeValues: { ':v': currentVersion } }),
        }),
      );
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) {
        throw new BudgetConflictError(`${what} was changed concurrently: read it again and retry.`, {
          cause: error,
        });
      }
      throw error;
    }
    return strip<Versioned<T>>(item);
  }
}

function canonicalZoneOrAsGiven(timeZone: unknown): string {
  try {
    return canonicalTimeZone(String(timeZone));
  } catch {
    return timeZone as string; // validateAccount reports it
  }
}

/** Drops the key, type and index attributes of a stored item (the item's shape is ours: we wrote it). */
export function strip<T>(item: Record<string, unknown>): T {
  const { pk: _pk, sk: _sk, type: _type, pacerShard: _shard, ...rest } = item;
  return rest as unknown as T;
}
