/**
 * The dead-letter store: where malformed or poison records go, with their reason, instead of
 * being dropped or retried forever (DESIGN.md requirement 4). One DynamoDB table for every
 * source; items can be listed per source and replayed (the caller puts the raw bytes back on
 * the stream once the cause is fixed) and deleted once handled.
 *
 * Key design: pk = `<source>`, sk = `<shardId>#<zero-padded sequenceNumber>` — listing a source is
 * one Query in stream order per shard, and re-quarantining the same record (a redelivery) writes
 * the same key, so a record is stored once however often it is redelivered.
 *
 * Quarantine must not fail on the record's own size: a Kinesis record may carry 1 MB, a DynamoDB
 * item only 400 KB. Payloads above `inlineLimitBytes` go to the payload store first (an encrypted
 * S3 bucket; locally s3rver) and the letter keeps the reference (`dataRef`, `dataBytes`). Reasons,
 * reason codes and partition keys are cut to bounded lengths, so no field value echoed in a reason
 * can push the item over the limit either.
 */

import {
  type AttributeValue,
  DeleteItemCommand,
  type DynamoDBClient,
  PutItemCommand,
  QueryCommand,
} from '@aws-sdk/client-dynamodb';
import { DeleteObjectCommand, GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { s3Client } from '../aws/ops-clients.js';
import { requireEnv } from '../config/env.js';
import { errorKind } from '../errors.js';
import { regionResources } from '../region/resources.js';

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
  /**
   * Where the payload is when it was too large to keep in the letter (`s3://bucket/key`); `data`
   * is then empty and {@link DeadLetterStore.payload} fetches the bytes.
   */
  readonly dataRef?: string;
  /** Size of the payload in bytes (also when it is stored by reference). */
  readonly dataBytes?: number;
}

/** Where payloads too large for a DynamoDB item are kept. */
export interface PayloadStore {
  /** Stores the bytes under `key`; returns the reference to keep in the letter. Idempotent. */
  put(key: string, data: Uint8Array): Promise<string>;
  get(ref: string): Promise<Uint8Array>;
  delete(ref: string): Promise<void>;
}

/** Bounds of the fields of a letter (a DynamoDB item holds at most 400 KB). */
export const DEAD_LETTER_LIMITS = {
  /** Payloads above this are stored by reference. */
  inlineBytes: 256 * 1024,
  reasonChars: 2_000,
  reasonCodeChars: 100,
  partitionKeyChars: 256,
} as const;

/** Cuts text to `max` characters, saying how long it was. */
export function bounded(text: string, max: number): string {
  if (text.length <= max) return text;
  const note = `… [cut, ${text.length} chars]`;
  return text.slice(0, Math.max(0, max - note.length)) + note;
}

/** Payloads in an S3 bucket (encrypted with the bucket's KMS key; TLS enforced by its policy). */
export class S3PayloadStore implements PayloadStore {
  constructor(private readonly options: { readonly client: S3Client; readonly bucket: string }) {}

  async put(key: string, data: Uint8Array): Promise<string> {
    await this.options.client.send(
      new PutObjectCommand({ Bucket: this.options.bucket, Key: key, Body: data }),
    );
    return `s3://${this.options.bucket}/${key}`;
  }

  async get(ref: string): Promise<Uint8Array> {
    const out = await this.options.client.send(new GetObjectCommand(parseS3Ref(ref)));
    if (!out.Body) throw new Error(`Dead-letter payload ${ref} has no body.`);
    return out.Body.transformToByteArray();
  }

  async delete(ref: string): Promise<void> {
    await this.options.client.send(new DeleteObjectCommand(parseS3Ref(ref)));
  }
}

function parseS3Ref(ref: string): { Bucket: string; Key: string } {
  const m = /^s3:\/\/([^/]+)\/(.+)$/.exec(ref);
  if (!m) throw new Error(`Not an s3:// reference: ${ref}`);
  return { Bucket: m[1] as string, Key: m[2] as string };
}

/** Options of {@link DeadLetterStore}. */
export interface DeadLetterStoreOptions {
  readonly client: DynamoDBClient;
  readonly tableName: string;
  /**
   * Where oversized payloads go. Without one, a payload above the inline limit cannot be
   * quarantined (the write fails and the record is retried): configure it in every function.
   */
  readonly payloads?: PayloadStore;
  /** @default DEAD_LETTER_LIMITS.inlineBytes */
  readonly inlineLimitBytes?: number;
}

/** Thrown when the dead-letter store cannot be written: the record must then be retried, not lost. */
export class DeadLetterWriteError extends errorKind('DeadLetterWriteError', 'quarantine.dead-letter-write') {}

/** DynamoDB-backed dead-letter store. */
export class DeadLetterStore {
  private readonly client: DynamoDBClient;
  private readonly tableName: string;
  private readonly payloads: PayloadStore | undefined;
  private readonly inlineLimit: number;

  constructor(options: DeadLetterStoreOptions) {
    this.client = options.client;
    this.tableName = options.tableName;
    this.payloads = options.payloads;
    this.inlineLimit = options.inlineLimitBytes ?? DEAD_LETTER_LIMITS.inlineBytes;
  }

  /**
   * Stores a record; idempotent per (source, shard, sequence number). An oversized payload is
   * written to the payload store first, so the letter never points at nothing.
   */
  async put(letter: DeadLetter): Promise<void> {
    try {
      let payload: Record<string, AttributeValue> = { data: { B: letter.data } };
      if (letter.data.length > this.inlineLimit) {
        if (!this.payloads)
          throw new Error('payload too large for the table and no payload store configured');
        const ref = await this.payloads.put(
          `${letter.source}/${letter.shardId}/${letter.sequenceNumber}`,
          letter.data,
        );
        payload = { data: { B: new Uint8Array() }, dataRef: { S: ref } };
      }
      await this.client.send(
        new PutItemCommand({
          TableName: this.tableName,
          Item: {
            pk: { S: letter.source },
            // The stream identity first in the key makes redeliveries overwrite, not duplicate.
            sk: { S: `${letter.shardId}#${letter.sequenceNumber.padStart(64, '0')}` },
            partitionKey: { S: bounded(letter.partitionKey, DEAD_LETTER_LIMITS.partitionKeyChars) },
            ...payload,
            dataBytes: { N: String(letter.data.length) },
            reasonCode: { S: bounded(letter.reasonCode, DEAD_LETTER_LIMITS.reasonCodeChars) },
            reason: { S: bounded(letter.reason, DEAD_LETTER_LIMITS.reasonChars) },
            arrivedAt: { N: String(letter.arrivedAt) },
            quarantinedAt: { N: String(letter.quarantinedAt) },
          },
        }),
      );
    } catch (cause) {
      throw new DeadLetterWriteError(`Could not quarantine record ${letter.sequenceNumber}`, { cause });
    }
  }

  /** A letter's payload bytes, fetched from the payload store when it is stored by reference. */
  async payload(letter: Pick<DeadLetter, 'data' | 'dataRef'>): Promise<Uint8Array> {
    if (letter.dataRef === undefined) return letter.data;
    if (!this.payloads) throw new Error(`Letter payload ${letter.dataRef} needs a payload store to read it.`);
    return this.payloads.get(letter.dataRef);
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

  /** Removes a dead letter (after a successful replay), then its stored payload if any. */
  async delete(letter: Pick<DeadLetter, 'source' | 'shardId' | 'sequenceNumber' | 'dataRef'>): Promise<void> {
    await this.client.send(
      new DeleteItemCommand({
        TableName: this.tableName,
        Key: {
          pk: { S: letter.source },
          sk: { S: `${letter.shardId}#${letter.sequenceNumber.padStart(64, '0')}` },
        },
      }),
    );
    // The letter first: an orphaned object is harmless, a letter pointing at nothing is not.
    if (letter.dataRef !== undefined && this.payloads) await this.payloads.delete(letter.dataRef);
  }
}

/**
 * The dead-letter store of a function or tool: the table and the payload bucket named by its
 * environment (`DEAD_LETTER_TABLE`, `DEAD_LETTER_BUCKET`).
 */
export function deadLetterStoreFromEnv(
  client: DynamoDBClient,
  env: Readonly<Record<string, string | undefined>> = process.env,
): DeadLetterStore {
  return new DeadLetterStore({
    client,
    tableName: requireEnv(regionResources.tables.deadLetters.envVar, env),
    payloads: new S3PayloadStore({
      client: s3Client(),
      bucket: requireEnv(regionResources.buckets.deadLetterPayloads.envVar, env),
    }),
  });
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
    ...(item.dataRef?.S === undefined ? {} : { dataRef: item.dataRef.S }),
    dataBytes: Number(item.dataBytes?.N ?? item.data?.B?.length ?? 0),
  };
}
