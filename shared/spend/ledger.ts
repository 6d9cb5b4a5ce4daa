/**
 * The durable spend ledger (DynamoDB, spend-ledger table — a global table, one replica per
 * region): one item per won bid, written with a conditional put so a redelivered or duplicated
 * win notice can never add a second item. It is the source of truth: live counters are rebuilt
 * from it (reconcile.ts).
 *
 * Every region's replica holds every region's wins, but a region's live counters hold only the
 * wins its own track-spend booked (the other regions' spend reaches its pacer as their
 * region-spend summaries). So each item names the region that booked it, and a region's view of
 * the ledger — what it rebuilds its counters from — is its own items.
 *
 * Item contract, version 2 (docs/spend.md, "The ledger contract"):
 * - win: pk = `S#<campaignId>#<day>` (the bid's advertiser-local day), sk = `<bidId>`, the entry's
 *   fields, `region`, `v` = 2, `expiresAt`. The key carries no region on purpose: one bid is one
 *   item in every replica, so a notice that reaches a second region after the first region's
 *   item replicated finds it (and is not counted twice).
 * - plan-day start marker: pk = `P#<scope>#<planId>#<day>`, sk = `started#<region>` — per region,
 *   because each region's live counters start (and reset) on their own.
 * Version 1 items (written before items named their region) have no `region` / `v`: a v1 win
 * counts in every region, a v1 marker (sk `started`) marks the plan-day started in every region.
 *
 * A campaign-day is one partition: reconciling a campaign or arm plan is one paged Query; an
 * account plan queries each of the account's campaigns. (No transactions: dynalite has none, and
 * none are needed — one item per bid is naturally idempotent.)
 */

import { ConditionalCheckFailedException, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { errorKind } from '../errors.js';
import { type Clock, systemClock } from '../time/clock.js';

/** Version of the ledger's item contract written by this code (`v` on every item). */
export const LEDGER_ITEM_VERSION = 2;

/** How long ledger items are kept by default (`expiresAt`, DynamoDB TTL), days. */
export const LEDGER_RETENTION_DAYS = 400;

/** A ledger entry: one confirmed win. */
export interface LedgerEntry {
  readonly campaignId: string;
  readonly accountId: string;
  readonly armId?: string;
  readonly bidId: string;
  /** Local day of the bid in the account's time zone. */
  readonly day: string;
  readonly clearingPriceMicros: number;
  readonly bidPriceMicros: number;
  readonly bidAt: number;
  /** When the notice was received. */
  readonly noticeAt: number;
  /** The notice arrived after the in-flight lifetime T (still real spend). */
  readonly late: boolean;
  /**
   * The region whose track-spend booked the win, i.e. whose live counters count it. Set by the
   * ledger when it records the entry; absent on version 1 items (they count in every region).
   */
  readonly region?: string;
}

/** Options of {@link SpendLedger}. */
export interface SpendLedgerOptions {
  readonly client: DynamoDBClient;
  /** `SPEND_LEDGER_TABLE`. */
  readonly tableName: string;
  /**
   * The region whose live counters this process keeps (`PACELINE_REGION`): the region its wins
   * are booked for, and the only region whose wins {@link SpendLedger.entries} returns.
   */
  readonly region: string;
  /**
   * How long items are kept (the `expiresAt` attribute for DynamoDB TTL; storage only), counted
   * from the writer's clock — never from a time the record claims, which could be centuries away.
   * Readers never look at `expiresAt`: no booking or automatic rebuild touches a day old enough
   * for its items to have expired (spendSettingsFromEnv keeps SPEND_MAX_BID_AGE_MS below it), so
   * whether TTL has deleted an item yet — in one replica or, replicated, in all — never shows.
   * @default LEDGER_RETENTION_DAYS
   */
  readonly retentionDays?: number;
  /** @default systemClock */
  readonly clock?: Clock;
}

/** Outcome of {@link SpendLedger.record}. */
export interface RecordOutcome {
  /** True when this call wrote the item; false when it existed already (duplicate notice). */
  readonly created: boolean;
  /** The stored entry (the first notice's values win on duplicates). */
  readonly entry: LedgerEntry;
  /**
   * The stored entry counts in this region's live counters: this region booked it (or it is a
   * version 1 item). False when another region booked the bid first: that region counts it.
   */
  readonly own: boolean;
}

const partition = (campaignId: string, day: string) => `S#${campaignId}#${day}`;

/** What the tracker and reconcile need from a ledger (SpendLedger; tests may stand in). */
export type LedgerStore = Pick<SpendLedger, 'record' | 'entries' | 'markPlanDayStarted'>;

/** Thrown for a region name the ledger's keys cannot carry. */
export class InvalidLedgerRegionError extends errorKind(
  'InvalidLedgerRegionError',
  'spend.invalid-ledger-region',
) {}

/** The ledger, as one region sees it. */
export class SpendLedger {
  /** The region this ledger books for and reads. */
  readonly region: string;
  private readonly doc: DynamoDBDocumentClient;
  private readonly tableName: string;
  private readonly retentionMs: number;
  private readonly clock: Clock;

  constructor(options: SpendLedgerOptions) {
    if (!/^[a-z0-9-]+$/.test(options.region ?? '')) {
      throw new InvalidLedgerRegionError(
        `Spend ledger region ${JSON.stringify(options.region)} is not a region name like us-east-1: ` +
          'give the region whose live counters this process keeps (PACELINE_REGION).',
      );
    }
    this.region = options.region;
    this.clock = options.clock ?? systemClock;
    this.doc = DynamoDBDocumentClient.from(options.client, {
      marshallOptions: { removeUndefinedValues: true },
    });
    this.tableName = options.tableName;
    this.retentionMs = (options.retentionDays ?? LEDGER_RETENTION_DAYS) * 86_400_000;
  }

  /** Whether an item counts in this region's live counters (its own, or a version 1 item). */
  isOwn(entry: Pick<LedgerEntry, 'region'>): boolean {
    return entry.region === undefined || entry.region === this.region;
  }

  /**
   * Records a win exactly once per (campaign, day, bid), for this region. On a duplicate the
   * stored entry is read back so every later effect uses the first notice's price, whatever a
   * duplicate says — and the first booking's region: a bid another region booked first is that
   * region's (`own: false`). The condition is evaluated on this region's replica only (global
   * tables): a notice that reaches two regions within the replication lag is booked by both, and
   * the replicas converge to one item (last writer wins), docs/spend.md "Across regions".
   */
  async record(entry: LedgerEntry): Promise<RecordOutcome> {
    const mine: LedgerEntry = { ...entry, region: this.region };
    const key = { pk: partition(entry.campaignId, entry.day), sk: entry.bidId };
    try {
      await this.doc.send(
        new PutCommand({
          TableName: this.tableName,
          Item: {
            ...key,
            ...mine,
            v: LEDGER_ITEM_VERSION,
            expiresAt: Math.floor((this.clock.now() + this.retentionMs) / 1000),
          },
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
      return { created: true, entry: mine, own: true };
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
    }
    const got = await this.doc.send(
      new GetCommand({ TableName: this.tableName, Key: key, ConsistentRead: true }),
    );
    if (!got.Item)
      throw new Error(`Ledger item for bid ${entry.bidId} vanished after a conditional-check failure.`);
    const stored = toEntry(got.Item);
    return { created: false, entry: stored, own: this.isOwn(stored) };
  }

  /**
   * Records that this region's live counters of a plan-day were initialised (pk
   * `P#<scope>#<planId>#<day>`, sk `started#<region>`, conditional put). True only for the
   * region's first call: later initialisations are resets (Redis restarted, keys evicted, forced
   * reconcile), after which guards get a rejoin grace. Another region starting the same plan-day
   * is not a reset here. A version 1 marker (sk `started`, no region) counts as started in every
   * region: the conservative reading (a grace that was not needed, never one skipped).
   */
  async markPlanDayStarted(scope: string, planId: string, day: string, at: number): Promise<boolean> {
    const pk = `P#${scope}#${planId}#${day}`;
    try {
      await this.doc.send(
        new PutCommand({
          TableName: this.tableName,
          Item: {
            pk,
            sk: `started#${this.region}`,
            at,
            region: this.region,
            v: LEDGER_ITEM_VERSION,
            expiresAt: Math.floor((at + this.retentionMs) / 1000),
          },
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
    // A Query, not a GetItem: the ad servers' guards initialise plan-days too, and their access
    // policy grants Query and PutItem on the ledger (cdk/constructs/ad-server-access.ts).
    const v1 = await this.doc.send(
      new QueryCommand({
        TableName: this.tableName,
        KeyConditionExpression: 'pk = :pk AND sk = :sk',
        ExpressionAttributeValues: { ':pk': pk, ':sk': 'started' },
        ConsistentRead: true,
      }),
    );
    return (v1.Items ?? []).length === 0;
  }

  /**
   * This region's entries of a campaign-day (its own and version 1 items), optionally only one
   * arm's (paged Query, consistent; the other regions' items are filtered out server-side). With
   * `regions: 'all'`, every region's entries as replicated here (a flight's day total).
   */
  async entries(
    campaignId: string,
    day: string,
    armId?: string,
    regions: 'own' | 'all' = 'own',
  ): Promise<LedgerEntry[]> {
    const out: LedgerEntry[] = [];
    let start: Record<string, unknown> | undefined;
    const filters = [
      ...(regions === 'own' ? ['(attribute_not_exists(#region) OR #region = :region)'] : []),
      ...(armId === undefined ? [] : ['armId = :arm']),
    ];
    do {
      const page = await this.doc.send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: 'pk = :pk',
          ...(filters.length === 0 ? {} : { FilterExpression: filters.join(' AND ') }),
          ...(regions === 'own' ? { ExpressionAttributeNames: { '#region': 'region' } } : {}),
          ExpressionAttributeValues: {
            ':pk': partition(campaignId, day),
            ...(regions === 'own' ? { ':region': this.region } : {}),
            ...(armId === undefined ? {} : { ':arm': armId }),
          },
          ConsistentRead: true,
          ExclusiveStartKey: start,
        }),
      );
      for (const item of page.Items ?? []) out.push(toEntry(item));
      start = page.LastEvaluatedKey;
    } while (start);
    return out;
  }
}

function toEntry(item: Record<string, unknown>): LedgerEntry {
  const { pk: _pk, sk: _sk, expiresAt: _e, v: _v, ...rest } = item;
  return rest as unknown as LedgerEntry;
}
