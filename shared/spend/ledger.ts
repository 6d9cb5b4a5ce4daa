/**
 * The durable spend ledger (DynamoDB, spend-ledger table): one item per won bid, written with a
 * conditional put so a redelivered or duplicated win notice can never add a second item. It is
 * the source of truth: live counters are rebuilt from it (reconcile.ts).
 *
 * Key design: pk = `S#<campaignId>#<day>` (the bid's advertiser-local day), sk = `<bidId>`;
 * plan-day start markers: pk = `P#<scope>#<planId>#<day>`, sk = `started`.
 * A campaign-day is one partition: reconciling a campaign or arm plan is one paged Query; an
 * account plan queries each of the account's campaigns. (No transactions: dynalite has none, and
 * none are needed — one item per bid is naturally idempotent.)
 */
import { ConditionalCheckFailedException, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { type Clock, systemClock } from '../time/clock.js';

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
}

/** Options of {@link SpendLedger}. */
export interface SpendLedgerOptions {
  readonly client: DynamoDBClient;
  /** `SPEND_LEDGER_TABLE`. */
  readonly tableName: string;
  /**
   * How long items are kept (the `expiresAt` attribute for DynamoDB TTL; storage only), counted
   * from the writer's clock — never from a time the record claims, which could be centuries away.
   * @default 400 days
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
}

const partition = (campaignId: string, day: string) => `S#${campaignId}#${day}`;

/** What the tracker and reconcile need from a ledger (SpendLedger; tests may stand in). */
export type LedgerStore = Pick<SpendLedger, 'record' | 'entries' | 'markPlanDayStarted'>;

/** The ledger. */
export class SpendLedger {
  private readonly doc: DynamoDBDocumentClient;
  private readonly tableName: string;
  private readonly retentionMs: number;
  private readonly clock: Clock;

  constructor(options: SpendLedgerOptions) {
    this.clock = options.clock ?? systemClock;
    this.doc = DynamoDBDocumentClient.from(options.client, {
      marshallOptions: { removeUndefinedValues: true },
    });
    this.tableName = options.tableName;
    this.retentionMs = (options.retentionDays ?? 400) * 86_400_000;
  }

  /**
   * Records a win exactly once per (campaign, day, bid). On a duplicate the stored entry is read
   * back so every later effect uses the first notice's price, whatever a duplicate says.
   */
  async record(entry: LedgerEntry): Promise<RecordOutcome> {
    try {
      await this.doc.send(
        new PutCommand({
          TableName: this.tableName,
          Item: {
            pk: partition(entry.campaignId, entry.day),
            sk: entry.bidId,
            ...entry,
            expiresAt: Math.floor((this.clock.now() + this.retentionMs) / 1000),
          },
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
      return { created: true, entry };
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
    }
    const got = await this.doc.send(
      new GetCommand({
        TableName: this.tableName,
        Key: { pk: partition(entry.campaignId, entry.day), sk: entry.bidId },
        ConsistentRead: true,
      }),
    );
    if (!got.Item)
      throw new Error(`Ledger item for bid ${entry.bidId} vanished after a conditional-check failure.`);
    return { created: false, entry: toEntry(got.Item) };
  }

  /**
   * Records that a plan-day's live counters were initialised (pk `P#<scope>#<planId>#<day>`,
   * conditional put). True only for the first call: later initialisations are resets (Redis
   * restarted, keys evicted, forced reconcile), after which guards get a rejoin grace.
   */
  async markPlanDayStarted(scope: string, planId: string, day: string, at: number): Promise<boolean> {
    try {
      await this.doc.send(
        new PutCommand({
          TableName: this.tableName,
          Item: {
            pk: `P#${scope}#${planId}#${day}`,
            sk: 'started',
            at,
            expiresAt: Math.floor((at + this.retentionMs) / 1000),
          },
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
  }

  /** Every entry of a campaign-day, optionally only one arm's (paged Query, consistent). */
  async entries(campaignId: string, day: string, armId?: string): Promise<LedgerEntry[]> {
    const out: LedgerEntry[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.doc.send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: {
            ':pk': partition(campaignId, day),
            ...(armId === undefined ? {} : { ':arm': armId }),
          },
          ...(armId === undefined ? {} : { FilterExpression: 'armId = :arm' }),
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
  const { pk: _pk, sk: _sk, expiresAt: _e, ...rest } = item;
  return rest as unknown as LedgerEntry;
}
