/**
 * The dead-letter store: where malformed or poison records go, with their reason, instead of
 * being dropped or retried forever (DESIGN.md requirement 4). One DynamoDB table for every
 * source; items can be listed per source and replayed (the caller puts the raw bytes back on
 * the stream once the cause is fixed) and deleted once handled.
 *
 * Key design: pk = `<source>`, sk = `<shardId>#<zero-padded sequenceNumber>` — listing a source is
 * one Query in stream order per shard, and re-quarantining the same record (a redelivery) writes
 * the same key, so a record is stored once however often it is redelivered.
 */
import {
  type AttributeValue,
  DeleteItemCommand,
  type DynamoDBClient,
  PutItemCommand,
  QueryCommand,
} from '@aws-sdk/client-dynamodb';

/** A quarantined record. */
export interface DeadLetter {
  /** Who quarantined it, e.g. `ingest-actions`. */
  readonly source: string;
  /** Kinesis shard and sequence number: the record's identity on the stream. */
  readonly shardId: string;
  readonly sequenceNumber: string;
  readonly partitionKey: string;
  /** The raw record bytes, exactly as received (after de-aggregation). */
  readonly data: Uint8Array;
  /** Machine-readable reason code, e.g. `schema.invalid-field`. */
  readonly reasonCode: string;
  /** Human-readable reason: what was wrong and what to do. */
  readonly reason: string;
  /** When the record arrived on the stream (epoch ms). */
  readonly arrivedAt: number;
  /** When it was quarantined (epoch ms, from the injected clock). */
  readonly quarantinedAt: number;
}

/** Options of {@link DeadLetterStore}. */
export interface DeadLetterStoreOptions {
  readonly client: DynamoDBClient;
  readonly tableName: string;
}

/** Thrown when the dead-letter store cannot be written: the record must then be retried, not lost. */
export class DeadLetterWriteError extends Error {
  override readonly name = 'DeadLetterWriteError';
}

/** DynamoDB-backed dead-letter store. */
export class DeadLetterStore {
  private readonly client: DynamoDBClient;
  private readonly tableName: string;

  constructor(options: DeadLetterStoreOptions) {
    this.client = options.client;
    this.tableName = options.tableName;
  }

  /** Stores a record; idempotent per (source, shard, sequence number). */
  async put(letter: DeadLetter): Promise<void> {
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.tableName,
          Item: {
            pk: { S: letter.source },
            // The stream identity first in the key makes redeliveries overwrite, not duplicate.
            sk: { S: `${letter.shardId}#${letter.sequenceNumber.padStart(64, '0')}` },
            partitionKey: { S: letter.partitionKey },
            data: { B: letter.data },
            reasonCode: { S: letter.reasonCode },
            reason: { S: letter.reason },
            arrivedAt: { N: String(letter.arrivedAt) },
            quarantinedAt: { N: String(letter.quarantinedAt) },
          },
        }),
      );
    } catch (cause) {
      throw new DeadLetterWriteError(`Could not quarantine record ${letter.sequenceNumber}`, { cause });
    }
  }

  /** Lists a source's dead letters, paging through all of them. */
  async list(source: string, options: { readonly limit?: number } = {}): Promise<DeadLetter[]> {
    const out: DeadLetter[] = [];
    let startKey: Record<string, AttributeValue> | undefined;
    do {
      const page = await this.client.send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': { S: source } },
          ExclusiveStartKey: startKey,
          ...(options.limit ? { Limit: options.limit - out.length } : {}),
        }),
      );
      for (const item of page.Items ?? []) out.push(fromItem(item));
      startKey = page.LastEvaluatedKey;
    } while (startKey && (!options.limit || out.length < options.limit));
    return out;
  }

  /** Removes a dead letter (after a successful replay). */
  async delete(letter: Pick<DeadLetter, 'source' | 'shardId' | 'sequenceNumber'>): Promise<void> {
    await this.client.send(
      new DeleteItemCommand({
        TableName: this.tableName,
        Key: {
          pk: { S: letter.source },
          sk: { S: `${letter.shardId}#${letter.sequenceNumber.padStart(64, '0')}` },
        },
      }),
    );
  }
}

function fromItem(item: Record<string, AttributeValue>): DeadLetter {
  const sk = item.sk?.S ?? '';
  const hash = sk.indexOf('#');
  return {
    source: item.pk?.S ?? '',
    shardId: sk.slice(0, hash),
    sequenceNumber: sk.slice(hash + 1).replace(/^0+(?=\d)/, ''),
    partitionKey: item.partitionKey?.S ?? '',
    data: item.data?.B ?? new Uint8Array(),
    reasonCode: item.reasonCode?.S ?? '',
    reason: item.reason?.S ?? '',
    arrivedAt: Number(item.arrivedAt?.N ?? 0),
    quarantinedAt: Number(item.quarantinedAt?.N ?? 0),
  };
}
