/**
 * The spend outbox: an intent item per win, written *before* the ledger and deleted only after
 * the win is applied to the live counters of every plan it falls under. Whatever fails in
 * between — Redis refusing writes longer than the event source retries, a killed worker, the
 * record ending in the on-failure destination — leaves the intent behind, and the scheduled
 * sweeper (functions/sweep-spend) finishes it: ledger write (idempotent, the stored entry wins)
 * then apply (deduplicated per bid). So the live counters converge to the ledger without an
 * operator; the guarantee and its alarm are stated in docs/spend.md.
 *
 * Key design (spend-ledger table, next to the ledger items): pk = `O#<region>#<shard>` (16 shards
 * by a hash of campaign and bid: bounded partitions the sweeper can list, writes spread), sk =
 * `<campaignId>#<day>#<bidId>`. One item per bid and region: a duplicate notice rewrites the same
 * intent, and any writer of the region that applied the bid completely may delete it (the apply is
 * per bid, not per notice). No `expiresAt`: an intent must never vanish before it is applied.
 *
 * Per region because the table is a global table: every replica holds every region's intents, and
 * an intent is a promise to apply a win to the live counters of the region that wrote it. A sweeper
 * that settled another region's intent would apply that region's win to its own counters and,
 * through the replicated delete, take the promise away from the region that needs it. Version 1
 * intents (pk `O#<shard>`, written before intents named their region) are still swept by every
 * region (docs/spend.md, "The ledger contract").
 *
 * Cost: the records of a Lambda batch are handled concurrently, so the opens (and the closes)
 * issued in the same turn of the event loop are coalesced into BatchWriteItem requests of up to
 * 25 items; each caller's promise resolves only once its own item is written (unprocessed items
 * are retried). A close lost with a crashed process only leaves an intent the sweeper settles
 * again, harmlessly.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { BatchWriteCommand, DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { errorKind } from '../errors.js';
import type { LedgerEntry } from './ledger.js';

/** {@link SpendOutbox} options it cannot run with; the message names the option and what to give. */
export class InvalidOutboxOptionsError extends errorKind(
  'InvalidOutboxOptionsError',
  'spend.invalid-outbox-options',
) {}

/** A win whose Redis apply is not confirmed yet. */
export interface PendingWin {
  readonly entry: LedgerEntry;
  /** When the intent was (last) written, epoch ms of the writer's clock. */
  readonly since: number;
  /** Item version: 2 = this region's partition, 1 = the shared partition of older intents. */
  readonly version: 1 | 2;
  /** Where the intent was found (what {@link SpendOutbox.closeFound} deletes). */
  readonly key: { readonly pk: string; readonly sk: string };
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
  /** The region whose intents this outbox writes and lists (`PACELINE_REGION`). */
  readonly region: string;
  /** Partitions of the outbox. @default 16 */
  readonly shards?: number;
}

function keyOf(request: WriteRequest): string {
  const item = 'PutRequest' in request ? request.PutRequest.Item : request.DeleteRequest.Key;
  return `${String(item.pk)}|${String(item.sk)}`;
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

type WriteRequest =
  | { readonly PutRequest: { readonly Item: Record<string, unknown> } }
  | { readonly DeleteRequest: { readonly Key: Record<string, unknown> } };

interface Pending {
  readonly request: WriteRequest;
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

/** The DynamoDB outbox of pending wins. */
export class SpendOutbox implements WinOutbox {
  private readonly doc: DynamoDBDocumentClient;
  private readonly tableName: string;
  readonly region: string;
  readonly shards: number;
  private queue: Pending[] = [];
  private scheduled = false;

  constructor(options: SpendOutboxOptions) {
    this.doc = DynamoDBDocumentClient.from(options.client, {
      marshallOptions: { removeUndefinedValues: true },
    });
    this.tableName = options.tableName;
    if (!/^[a-z0-9-]+$/.test(options.region ?? '')) {
      throw new InvalidOutboxOptionsError(
        `Spend outbox region ${JSON.stringify(options.region)} is not a region name like us-east-1: ` +
          'give the region whose live counters this process keeps (PACELINE_REGION).',
      );
    }
    this.region = options.region;
    this.shards = options.shards ?? 16;
  }

  /** Partition of a shard: this region's (version 2), or the shared version 1 one. */
  private partition(shard: number, version: 1 | 2 = 2): string {
    const n = String(shard).padStart(2, '0');
    return version === 2 ? `O#${this.region}#${n}` : `O#${n}`;
  }

  private key(e: Pick<LedgerEntry, 'campaignId' | 'day' | 'bidId'>) {
    const shard = fnv1a(`${e.campaignId}/${e.bidId}`) % this.shards;
    return { pk: this.partition(shard), sk: `${e.campaignId}#${e.day}#${e.bidId}` };
  }

  open(entry: LedgerEntry, now: number): Promise<void> {
    return this.write({ PutRequest: { Item: { ...this.key(entry), entry, since: now } } });
  }

  close(entry: Pick<LedgerEntry, 'campaignId' | 'day' | 'bidId'>): Promise<void> {
    return this.write({ DeleteRequest: { Key: this.key(entry) } });
  }

  /** Removes an intent where {@link pending} found it (a version 1 intent lives in the shared partition). */
  closeFound(p: Pick<PendingWin, 'key'>): Promise<void> {
    return this.write({ DeleteRequest: { Key: { pk: p.key.pk, sk: p.key.sk } } });
  }

  /** Queues one write; everything queued in this turn of the event loop goes out together. */
  private write(request: WriteRequest): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ request, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => {
          this.scheduled = false;
          const queued = this.queue;
          this.queue = [];
          // One item per key per request (DynamoDB refuses duplicates): a later write of the same
          // key waits for the next request, keeping the callers' order.
          const chunks: Pending[][] = [];
          let current: Pending[] = [];
          let keys = new Set<string>();
          for (const p of queued) {
            const k = keyOf(p.request);
            if (current.length === 25 || keys.has(k)) {
              chunks.push(current);
              current = [];
              keys = new Set();
            }
            current.push(p);
            keys.add(k);
          }
          if (current.length > 0) chunks.push(current);
          void (async () => {
            for (const chunk of chunks) await this.flush(chunk);
          })();
        });
      }
    });
  }

  private async flush(chunk: Pending[]): Promise<void> {
    let left = chunk;
    try {
      for (let attempt = 0; left.length > 0; attempt++) {
        const out = await this.doc.send(
          new BatchWriteCommand({ RequestItems: { [this.tableName]: left.map((p) => p.request) } }),
        );
        const unprocessed = new Set(
          (out.UnprocessedItems?.[this.tableName] ?? []).map((r) => keyOf(r as WriteRequest)),
        );
        for (const p of left) if (!unprocessed.has(keyOf(p.request))) p.resolve();
        left = left.filter((p) => unprocessed.has(keyOf(p.request)));
        if (left.length > 0) {
          if (attempt >= 8) throw new Error(`${left.length} outbox writes stayed unprocessed (throttled)`);
          await new Promise((r) => setTimeout(r, 2 ** attempt * 10));
        }
      }
    } catch (error) {
      for (const p of left) p.reject(error);
    }
  }

  /**
   * Every intent of this region written before `olderThan` (consistent reads, paged, shard by
   * shard), then the version 1 intents left from before intents named their region. Younger ones
   * are most likely being applied right now by track-spend; taking them too would be harmless
   * (everything is idempotent), only wasted work. Other regions' intents are never listed.
   */
  async *pending(olderThan: number): AsyncGenerator<PendingWin> {
    for (const version of [2, 1] as const) {
      for (let shard = 0; shard < this.shards; shard++) {
        let start: Record<string, unknown> | undefined;
        do {
          const page = await this.doc.send(
            new QueryCommand({
              TableName: this.tableName,
              KeyConditionExpression: 'pk = :pk',
              FilterExpression: 'since < :t',
              ExpressionAttributeValues: { ':pk': this.partition(shard, version), ':t': olderThan },
              ConsistentRead: true,
              ExclusiveStartKey: start,
            }),
          );
          for (const item of page.Items ?? []) {
            yield {
              entry: item.entry as LedgerEntry,
              since: Number(item.since),
              version,
              key: { pk: String(item.pk), sk: String(item.sk) },
            };
          }
          start = page.LastEvaluatedKey;
        } while (start);
      }
    }
  }
}
