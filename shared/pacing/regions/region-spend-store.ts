/**
 * The `region-spend` table behind {@link RegionSpendStore}: DynamoDB (the pacer function; locally
 * dynalite behind the global-tables stand-in) or one in-memory replica (unit tests, and the unit
 * the simulator's replicated table is built from). Items are written whole and conditionally: a
 * write never replaces a newer tick (a late duplicate), nor — for authority items — an item of a
 * higher lease epoch (a stale leader).
 */
import { ConditionalCheckFailedException, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DeleteCommand, DynamoDBDocumentClient, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { RawItem, RegionSpendStore } from './region-spend-items.js';

/** The table in DynamoDB (this region's replica). */
export function dynamoRegionSpendStore(dynamodb: DynamoDBClient, tableName: string): RegionSpendStore {
  const doc = DynamoDBDocumentClient.from(dynamodb);
  return {
    async query(pk) {
      const out: RawItem[] = [];
      let start: Record<string, unknown> | undefined;
      do {
        const page = await doc.send(
          new QueryCommand({
            TableName: tableName,
            KeyConditionExpression: 'pk = :pk',
            ExpressionAttributeValues: { ':pk': pk },
            ConsistentRead: true,
            ...(start ? { ExclusiveStartKey: start } : {}),
          }),
        );
        out.push(...((page.Items ?? []) as RawItem[]));
        start = page.LastEvaluatedKey;
      } while (start);
      return out;
    },
    async put(item, options = {}) {
      const epoch = options.epoch;
      try {
        await doc.send(
          new PutCommand({
            TableName: tableName,
            Item: item,
            // Ticks only move forward in one replica; a stale leader (lower epoch) never overwrites.
            ConditionExpression:
              epoch === undefined
                ? 'attribute_not_exists(pk) OR #t < :t'
                : 'attribute_not_exists(pk) OR (#t < :t AND (attribute_not_exists(#e) OR #e <= :e))',
            ExpressionAttributeNames: { '#t': 'tick', ...(epoch === undefined ? {} : { '#e': 'epoch' }) },
            ExpressionAttributeValues: { ':t': item.tick, ...(epoch === undefined ? {} : { ':e': epoch }) },
          }),
        );
        return true;
      } catch (error) {
        if (error instanceof ConditionalCheckFailedException) return false;
        throw error;
      }
    },
    async delete(pk, sk) {
      await doc.send(new DeleteCommand({ TableName: tableName, Key: { pk, sk } }));
    },
  };
}

/** One in-memory replica with the same conditions (items are copied in and out). */
export class MemoryRegionSpendStore implements RegionSpendStore {
  private readonly items = new Map<string, RawItem>();

  async query(pk: string): Promise<RawItem[]> {
    return [...this.items.values()].filter((i) => i.pk === pk).map((i) => ({ ...i }));
  }

  async put(item: RawItem, options: { readonly epoch?: number } = {}): Promise<boolean> {
    const key = `${String(item.pk)}|${String(item.sk)}`;
    const stored = this.items.get(key);
    if (stored) {
      if (Number(stored.tick) >= Number(item.tick)) return false;
      if (options.epoch !== undefined && stored.epoch !== undefined && Number(stored.epoch) > options.epoch)
        return false;
    }
    this.items.set(key, { ...item });
    return true;
  }

  async delete(pk: string, sk: string): Promise<void> {
    this.items.delete(`${pk}|${sk}`);
  }

  /** Applies an item as replication does (whole image, no condition): the simulator's link. */
  replicate(item: RawItem): void {
    this.items.set(`${String(item.pk)}|${String(item.sk)}`, { ...item });
  }

  /** Every item (the simulator copies them to the other replicas). */
  all(): RawItem[] {
    return [...this.items.values()].map((i) => ({ ...i }));
  }
}
