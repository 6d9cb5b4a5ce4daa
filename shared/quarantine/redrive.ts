/**
 * Re-drive of batches Lambda gave up on. A Kinesis event source sends the metadata of a batch
 * whose retries or age ran out to its on-failure destination — shard and sequence range, not the
 * data (AWS: SQS; locally: a JSON-lines file). `redrive` reads each entry, fetches exactly those
 * records back from the stream (within its retention), puts them on the stream again with their
 * partition keys, and only then marks the entry done. Running it twice, or after a crash between
 * the put and the mark, only delivers records again: every consumer is idempotent per record
 * (spend: ledger + per-bid dedup; counting: dedup on the full event bytes), so nothing is lost
 * and nothing counts twice.
 */

import { appendFile, readFile } from 'node:fs/promises';
import { GetRecordsCommand, GetShardIteratorCommand, type KinesisClient } from '@aws-sdk/client-kinesis';
import { DeleteMessageCommand, ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { errorKind } from '../errors.js';
import type { ProducerRecord } from '../kinesis/aggregation.js';

/** The part of Lambda's on-failure record (`KinesisBatchInfo`) a redrive needs. */
export interface OnFailureBatch {
  readonly shardId: string;
  readonly startSequenceNumber: string;
  readonly endSequenceNumber: string;
  readonly batchSize: number;
  readonly streamArn?: string;
}

/** One on-failure entry. */
export interface OnFailureEntry {
  /** Stable id within its source (local: request id + range; SQS: message id). */
  readonly id: string;
  readonly batch: OnFailureBatch;
  /** `RetryAttemptsExhausted` or `RecordAgeExceeded`. */
  readonly condition: string;
  readonly timestamp: string;
  /** Local runs record the last error; AWS keeps it in the function's logs. */
  readonly error?: string;
}

/** Where on-failure entries are read from and acknowledged. */
export interface OnFailureSource {
  /** Shown to the operator before anything happens. */
  readonly location: string;
  /** The entries not re-driven yet. */
  entries(): Promise<OnFailureEntry[]>;
  /** Marks an entry re-driven (after its records are back on the stream). */
  done(entry: OnFailureEntry): Promise<void>;
}

interface RawOnFailureRecord {
  readonly requestContext?: { readonly requestId?: string; readonly condition?: string };
  readonly timestamp?: string;
  readonly KinesisBatchInfo?: OnFailureBatch;
  readonly localErrorInfo?: { readonly errorType?: string; readonly errorMessage?: string };
}

function toEntry(raw: RawOnFailureRecord, id: string): OnFailureEntry {
  const batch = raw.KinesisBatchInfo;
  if (!batch?.shardId || !batch.startSequenceNumber || !batch.endSequenceNumber) {
    throw new Error(`On-failure entry ${id} has no KinesisBatchInfo (shard and sequence range).`);
  }
  const e = raw.localErrorInfo;
  return {
    id,
    batch,
    condition: raw.requestContext?.condition ?? 'unknown',
    timestamp: raw.timestamp ?? '',
    ...(e ? { error: `${e.errorType ?? 'Error'}: ${e.errorMessage ?? ''}` } : {}),
  };
}

/**
 * The local runner's on-failure destination: JSON lines appended by the poller. Re-driven ids are
 * appended to `<file>.redriven` — append-only, so a poller writing new entries meanwhile never
 * races a rewrite of the file.
 */
export class JsonLinesOnFailureSource implements OnFailureSource {
  readonly location: string;
  constructor(private readonly file: string) {
    this.location = file;
  }

  async entries(): Promise<OnFailureEntry[]> {
    const lines = await readLines(this.file);
    const done = new Set(await readLines(`${this.file}.redriven`));
    const out: OnFailureEntry[] = [];
    for (const line of lines) {
      const raw = JSON.parse(line) as RawOnFailureRecord;
      const b = raw.KinesisBatchInfo;
      const id = `${raw.requestContext?.requestId ?? ''}/${b?.shardId}/${b?.startSequenceNumber}-${b?.endSequenceNumber}`;
      if (!done.has(id)) out.push(toEntry(raw, id));
    }
    return out;
  }

  async done(entry: OnFailureEntry): Promise<void> {
    await appendFile(`${this.file}.redriven`, `${entry.id}\n`);
  }
}

async function readLines(file: string): Promise<string[]> {
  try {
    return (await readFile(file, 'utf8')).split('\n').filter((l) => l.trim() !== '');
  } catch (error) {
    if ((error as { code?: string }).code === 'ENOENT') return [];
    throw error;
  }
}

/** An SQS on-failure queue (AWS). Messages are deleted once their records are re-driven. */
export class SqsOnFailureSource implements OnFailureSource {
  readonly location: string;
  private readonly receipts = new Map<string, string>();

  constructor(
    private readonly sqs: SQSClient,
    private readonly queueUrl: string,
    /** While a run holds messages, others do not see them. @default 900 */
    private readonly visibilityTimeoutSeconds = 900,
  ) {
    this.location = queueUrl;
  }

  async entries(): Promise<OnFailureEntry[]> {
    const out: OnFailureEntry[] = [];
    for (;;) {
      const page = await this.sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: this.queueUrl,
          MaxNumberOfMessages: 10,
          VisibilityTimeout: this.visibilityTimeoutSeconds,
          WaitTimeSeconds: 0,
        }),
      );
      const messages = page.Messages ?? [];
      if (messages.length === 0) return out;
      for (const m of messages) {
        if (!m.MessageId || !m.ReceiptHandle) continue;
        this.receipts.set(m.MessageId, m.ReceiptHandle);
        out.push(toEntry(JSON.parse(m.Body ?? '{}') as RawOnFailureRecord, m.MessageId));
      }
    }
  }

  async done(entry: OnFailureEntry): Promise<void> {
    const receipt = this.receipts.get(entry.id);
    if (!receipt) throw new Error(`No receipt for message ${entry.id}: list the entries first.`);
    await this.sqs.send(new DeleteMessageCommand({ QueueUrl: this.queueUrl, ReceiptHandle: receipt }));
  }
}

/** A record read back from the stream. */
export interface StreamedRecord extends ProducerRecord {
  readonly sequenceNumber: string;
}

/** Thrown when a batch's records cannot all be read back (past the stream's retention). */
export class RecordsUnavailableError extends errorKind(
  'RecordsUnavailableError',
  'quarantine.records-unavailable',
) {}

/** Reads the records of `batch` back from its shard, in order. */
export async function readBatch(
  kinesis: KinesisClient,
  streamName: string,
  batch: OnFailureBatch,
): Promise<StreamedRecord[]> {
  const end = BigInt(batch.endSequenceNumber);
  const start = BigInt(batch.startSequenceNumber);
  let iterator = (
    await kinesis.send(
      new GetShardIteratorCommand({
        StreamName: streamName,
        ShardId: batch.shardId,
        ShardIteratorType: 'AT_SEQUENCE_NUMBER',
        StartingSequenceNumber: batch.startSequenceNumber,
      }),
    )
  ).ShardIterator;
  const out: StreamedRecord[] = [];
  let emptyPages = 0;
  while (iterator && emptyPages < 3) {
    const page = await kinesis.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: 1000 }));
    const records = page.Records ?? [];
    emptyPages = records.length === 0 ? emptyPages + 1 : 0;
    for (const r of records) {
      const seq = BigInt(r.SequenceNumber ?? '0');
      if (seq < start) continue;
      if (seq > end) return out;
      out.push({
        data: r.Data ?? new Uint8Array(),
        partitionKey: r.PartitionKey ?? '',
        sequenceNumber: String(seq),
      });
      if (seq === end) return out;
    }
    iterator = page.NextShardIterator;
  }
  if (out.at(-1)?.sequenceNumber !== batch.endSequenceNumber) {
    throw new RecordsUnavailableError(
      `Shard ${batch.shardId} no longer holds records ${batch.startSequenceNumber}…${batch.endSequenceNumber} ` +
        `(found ${out.length} of ${batch.batchSize}): past the stream's retention. Recover them from the producer.`,
    );
  }
  return out;
}

/** Options of {@link redrive}. */
export interface RedriveOptions {
  readonly source: OnFailureSource;
  readonly kinesis: KinesisClient;
  readonly streamName: string;
  /** Puts records on the stream; resolves once they are there (e.g. KinesisProducer.putAll). */
  readonly put: (records: readonly ProducerRecord[]) => Promise<void>;
  /** Only report what would be re-driven. @default false */
  readonly dryRun?: boolean;
}

/** Outcome of a redrive. */
export interface RedriveResult {
  readonly entries: number;
  readonly redriven: number;
  readonly records: number;
  readonly failed: readonly { readonly id: string; readonly error: string }[];
}

/** Re-drives every pending entry of `source`; each entry is marked done after its records are back. */
export async function redrive(options: RedriveOptions): Promise<RedriveResult> {
  const entries = await options.source.entries();
  let redriven = 0;
  let records = 0;
  const failed: { id: string; error: string }[] = [];
  for (const entry of entries) {
    try {
      const batch = await readBatch(options.kinesis, options.streamName, entry.batch);
      records += batch.length;
      if (options.dryRun) continue;
      await options.put(batch.map((r) => ({ data: r.data, partitionKey: r.partitionKey })));
      await options.source.done(entry);
      redriven++;
    } catch (error) {
      failed.push({ id: entry.id, error: `${(error as Error).name}: ${(error as Error).message}` });
    }
  }
  return { entries: entries.length, redriven, records, failed };
}
