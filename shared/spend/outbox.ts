/**
 * The spend outbox: an intent item per win, written *before* the ledger and deleted only after
 * the win is applied to the live counters of every plan it falls under. Whatever fails in
 * between — Redis refusing writes longer than the event source retries, a killed worker, the
 * record ending in the on-failure destination — leaves the intent behind, and the scheduled
 * sweeper (functions/sweep-spend) finishes it: ledger write (idempotent, the stored entry wins)
 * then apply (deduplicated per bid). So the live counters converge to the ledger without an
 * operator; the guarantee and its alarm are stated in docs/spend.md.
 *
 * Key design (spend-ledger table, next to the ledger items): pk = `O#<shard>` (16 shards by a hash
 * of campaign and bid: bounded partitions the sweeper can list, writes spread), sk =
 * `<campaignId>#<day>#<bidId>`. One item per bid: a duplicate notice rewrites the same intent, and
 * any writer that applied the bid completely may delete it (the apply is per bid, not per notice).
 * No `expiresAt`: an intent must never vanish before it is applied.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DeleteCommand, DynamoDBDocumentClient, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { LedgerEntry } from './ledger.js';

/** A win whose Redis apply is not confirmed yet. */
export interface PendingWin {
  readonly entry: LedgerEntry;
  /** When the intent was (last) written, epoch ms of the writer's clock. */
  readonly since: number;
}

/** What the tracker needs from an outbox (SpendOutbox; tests may stand in). */
export interface WinOutbox {
  /** Records the intent to book `entry`; must be durable before the ledger write. */
  open(entry: LedgerEntry, now: number): Promise<void>;
  /** Removes the intent once the bid is applied to every plan. */
  close(entry: Pick<LedgerEntry, 'campaignId' | 'day' | 'bidId'>): Promise<void>;
}

/** Options of {@link SpendOutbox}. */
export interface SpendOutboxOptions {
  readonly client: DynamoDBClient;
  /** The spend-ledger table (`SPEND_LEDGER_TABLE`). */
  readonly tableName: string;
  /** Partitions of the outbox. @default 16 */
  readonly shards?: number;
}

/** FNV-1a of a string: a stable shard that does not depend on the runtime's hash seed. */
function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/** The DynamoDB outbox of pending wins. */
export class SpendOutbox implements WinOutbox {
  private readonly doc: DynamoDBDocumentClient;
  private readonly tableName: string;
  readonly shards: number;

  constructor(options: SpendOutboxOptions) {
    this.doc = DynamoDBDocumentClient.from(options.client, {
      marshallOptions: { removeUndefinedValues: true },
    });
    this.tableName = options.tableName;
    this.shards = options.shards ?? 16;
  }

  private key(e: Pick<LedgerEntry, 'campaignId' | 'day' | 'bidId'>) {
    const shard = fnv1a(`${e.campaignId}/${e.bidId}`) % this.shards;
    return { pk: `O#${String(shard).padStart(2, '0')}`, sk: `${e.campaignId}#${e.day}#${e.bidId}` };
  }

  async open(entry: LedgerEntry, now: number): Promise<void> {
    await this.doc.send(
      new PutCommand({ TableName: this.tableName, Item: { ...this.key(entry), entry, since: now } }),
    );
  }

  async close(entry: Pick<LedgerEntry, 'campaignId' | 'day' | 'bidId'>): Promise<void> {
    await this.doc.send(new DeleteCommand({ TableName: this.tableName, Key: this.key(entry) }));
  }

  /**
   * Every intent written before `olderThan` (consistent reads, paged, shard by shard). Younger
   * ones are most likely being applied right now by track-spend; taking them too would be
   * harmless (everything is idempotent), only wasted work.
   */
  async *pending(olderThan: number): AsyncGenerator<PendingWin> {
    for (let shard = 0; shard < this.shards; shard++) {
      let start: Record<string, unknown> | undefined;
      do {
        const page = await this.doc.send(
          new QueryCommand({
            TableName: this.tableName,
            KeyConditionExpression: 'pk = :pk',
            FilterExpression: 'since < :t',
            ExpressionAttributeValues: { ':pk': `O#${String(shard).padStart(2, '0')}`, ':t': olderThan },
            ConsistentRead: true,
            ExclusiveStartKey: start,
          }),
        );
        for (const item of page.Items ?? []) {
          yield { entry: item.entry as LedgerEntry, since: Number(item.since) };
        }
        start = page.LastEvaluatedKey;
      } while (start);
    }
  }
}
