/**
 * A Kinesis producer for ad servers (and any other Paceline event source): event-agnostic, it
 * takes bytes and a partition key.
 *
 * - batches into PutRecords calls (≤ 500 entries, ≤ 5 MiB) after a short linger;
 * - retries only the entries a PutRecords call reports as failed (throttled shards), with
 *   exponential backoff and jitter, and whole calls that failed transiently;
 * - back-pressure: while `maxBufferedRecords` are buffered or in flight, new records wait in a
 *   FIFO; each freed slot admits exactly one waiting record (in arrival order), so any number of
 *   waiting records costs O(1) each — a slow or throttled stream slows the caller instead of
 *   growing memory without bound;
 * - optional KPL aggregation (aws-kinesis-agg), which the consumer de-aggregates.
 *
 * `put()` resolves once the record is durably on the stream and rejects with
 * {@link KinesisPutError} when it could not be put within `maxAttempts`. `enqueue()` is the
 * request path's fire-and-forget form: it never waits, reports failures to a callback, and refuses
 * records (code `ProducerFull`) once `maxWaitingRecords` are already waiting.
 */
import { type KinesisClient, PutRecordsCommand, type PutRecordsCommandOutput } from '@aws-sdk/client-kinesis';
import { PacelineError } from '../errors.js';
import { type AggregationOptions, aggregateRecords, type ProducerRecord } from './aggregation.js';

export type { ProducerRecord } from './aggregation.js';

/** Raised for records that could not be put; `code` is Kinesis's ErrorCode or the error's name. */
export class KinesisPutError extends PacelineError {
  override readonly name = 'KinesisPutError';
  constructor(
    override readonly code: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Options of {@link KinesisProducer}. */
export interface KinesisProducerOptions {
  /** Any object with the SDK client's `send` (the real client, or a wrapper). */
  readonly client: Pick<KinesisClient, 'send'>;
  readonly streamName: string;
  /** Entries per PutRecords call (Kinesis allows 500). @default 500 */
  readonly maxBatchRecords?: number;
  /** Bytes per PutRecords call, data plus partition keys (Kinesis allows 5 MiB). @default 5242880 */
  readonly maxBatchBytes?: number;
  /** How long a partial batch waits for more records. @default 20 */
  readonly lingerMs?: number;
  /** Records buffered or in flight before new ones wait (back-pressure). @default 20000 */
  readonly maxBufferedRecords?: number;
  /**
   * Records `enqueue()` lets wait for room beyond `maxBufferedRecords` before refusing new ones
   * (`put()` callers wait whatever the number: they hold their own promises). @default 100000
   */
  readonly maxWaitingRecords?: number;
  /** Concurrent PutRecords calls. @default 4 */
  readonly maxInFlightBatches?: number;
  /** Attempts per entry (first try included). @default 8 */
  readonly maxAttempts?: number;
  /** First retry delay; doubles per attempt, with full jitter. @default 50 */
  readonly baseDelayMs?: number;
  /** @default 2000 */
  readonly maxDelayMs?: number;
  /** KPL-aggregate records before putting them. @default false */
  readonly aggregate?: boolean | AggregationOptions;
  /** Waits `ms` (injectable so tests need not sleep). @default setTimeout */
  readonly sleep?: (ms: number) => Promise<void>;
}

interface Pending {
  readonly record: ProducerRecord;
  readonly resolve: () => void;
  readonly reject: (error: KinesisPutError) => void;
}

/**
 * A first-in first-out queue with O(1) push and shift (`Array.prototype.shift` moves every
 * element: tens of thousands of waiting records made it quadratic).
 */
class Fifo<T> {
  private items: (T | undefined)[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(item: T): void {
    this.items.push(item);
  }

  peek(): T | undefined {
    return this.items[this.head];
  }

  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined;
    const item = this.items[this.head];
    this.items[this.head++] = undefined;
    // Drop the consumed prefix once it is most of the array (amortised O(1)).
    if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }
}

/** Called with the error of a record `enqueue()` could not put. */
export type EnqueueErrorHandler = (error: KinesisPutError, record: ProducerRecord) => void;

/** One PutRecords entry: a plain record, or an aggregate of several. */
interface Entry {
  readonly data: Uint8Array;
  readonly partitionKey: string;
  readonly waiters: readonly Pending[];
}

/** Errors of a whole PutRecords call that retrying cannot fix. */
const PERMANENT = new Set([
  'ResourceNotFoundException',
  'ValidationException',
  'InvalidArgumentException',
  'AccessDeniedException',
  'KMSAccessDeniedException',
  'KMSDisabledException',
  'KMSNotFoundException',
]);

/** Counters of a producer (for metrics and tests). */
export interface ProducerStats {
  putRecordsCalls: number;
  entriesSent: number;
  entriesRetried: number;
  recordsFailed: number;
  /** Records `enqueue()` refused because `maxWaitingRecords` were already waiting. */
  recordsRefused: number;
}

const noop = (): void => {};

/** Batched, retrying, back-pressured Kinesis producer. */
export class KinesisProducer {
  readonly stats: ProducerStats = {
    putRecordsCalls: 0,
    entriesSent: 0,
    entriesRetried: 0,
    recordsFailed: 0,
    recordsRefused: 0,
  };
  private readonly o: Required<Omit<KinesisProducerOptions, 'aggregate'>> & {
    readonly aggregate: AggregationOptions | undefined;
  };
  /** Admitted records not yet taken into a PutRecords call (counted in `outstanding`). */
  private readonly queue = new Fifo<Pending>();
  /** Records waiting for room (not counted in `outstanding`), in arrival order. */
  private readonly waiting = new Fifo<Pending>();
  private outstanding = 0;
  private inFlight = 0;
  private timer: NodeJS.Timeout | undefined;
  private idleWaiters: (() => void)[] = [];

  constructor(options: KinesisProducerOptions) {
    this.o = {
      client: options.client,
      streamName: options.streamName,
      maxBatchRecords: Math.min(500, options.maxBatchRecords ?? 500),
      maxBatchBytes: Math.min(5 * 1024 * 1024, options.maxBatchBytes ?? 5 * 1024 * 1024),
      lingerMs: options.lingerMs ?? 20,
      maxBufferedRecords: options.maxBufferedRecords ?? 20_000,
      maxWaitingRecords: options.maxWaitingRecords ?? 100_000,
      maxInFlightBatches: options.maxInFlightBatches ?? 4,
      maxAttempts: options.maxAttempts ?? 8,
      baseDelayMs: options.baseDelayMs ?? 50,
      maxDelayMs: options.maxDelayMs ?? 2000,
      sleep: options.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms))),
      aggregate: options.aggregate === true ? {} : options.aggregate || undefined,
    };
  }

  /** Records buffered or in flight. */
  get buffered(): number {
    return this.outstanding;
  }

  /** Records waiting for room (beyond {@link buffered}). */
  get waitingRecords(): number {
    return this.waiting.length;
  }

  /**
   * Puts one record; resolves when it is on the stream. While the producer is full the record
   * waits its turn first (back-pressure): `await` it, or at least bound how many you leave pending.
   */
  put(record: ProducerRecord): Promise<void> {
    return new Promise<void>((resolve, reject) => this.accept({ record, resolve, reject }));
  }

  /**
   * Fire-and-forget put for the request path: never waits and never throws. A record that cannot
   * be put — refused because `maxWaitingRecords` are already waiting (code `ProducerFull`), or
   * failed after its retries — is handed to `onError` with its {@link KinesisPutError}. Records
   * keep their order with those of `put()`.
   */
  enqueue(record: ProducerRecord, onError: EnqueueErrorHandler): void {
    const pending: Pending = { record, resolve: noop, reject: (error) => onError(error, record) };
    if (this.hasRoom() || this.waiting.length < this.o.maxWaitingRecords) {
      this.accept(pending);
      return;
    }
    this.stats.recordsRefused++;
    const error = new KinesisPutError(
      'ProducerFull',
      `Record not queued for ${this.o.streamName}: ${this.outstanding} records are in flight and ` +
        `${this.waiting.length} waiting (maxWaitingRecords). The stream is slower than the producer: ` +
        'add shards, or raise maxWaitingRecords if the memory allows it.',
    );
    // Asynchronously, like every other outcome: the caller is not re-entered from enqueue().
    queueMicrotask(() => onError(error, record));
  }

  /** Puts many records; resolves when all are on the stream, rejects with the first failure. */
  async putAll(records: readonly ProducerRecord[]): Promise<void> {
    const results = await Promise.allSettled(records.map((r) => this.put(r)));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /** Sends everything buffered and waits until nothing is outstanding. */
  async flush(): Promise<void> {
    this.drain();
    if (this.outstanding === 0) return;
    await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  private hasRoom(): boolean {
    return this.waiting.length === 0 && this.outstanding < this.o.maxBufferedRecords;
  }

  /** Admits a record now when there is room (and nobody waiting before it), else queues it. */
  private accept(pending: Pending): void {
    if (this.hasRoom()) this.admit(pending);
    else this.waiting.push(pending);
  }

  /** Takes a slot for the record: from here it counts as outstanding. */
  private admit(pending: Pending): void {
    this.outstanding++;
    this.queue.push(pending);
    this.schedule();
  }

  private schedule(): void {
    // A full batch goes now; a partial one waits up to lingerMs for company.
    if (this.queue.length >= this.o.maxBatchRecords * (this.o.aggregate ? 50 : 1)) this.drain();
    else this.timer ??= setTimeout(() => this.drain(), this.o.lingerMs);
  }

  private drain(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    while (this.queue.length > 0 && this.inFlight < this.o.maxInFlightBatches) {
      const entries = this.takeBatch();
      this.inFlight++;
      void this.send(entries).finally(() => {
        this.inFlight--;
        this.drain();
      });
    }
  }

  /** Takes the next PutRecords worth of entries from the queue. */
  private takeBatch(): Entry[] {
    const entries: Entry[] = [];
    let bytes = 0;
    if (this.o.aggregate) {
      // Aggregate what is queued (bounded by the batch byte limit), then cut into entries.
      const taken: Pending[] = [];
      while (this.queue.length > 0 && bytes < this.o.maxBatchBytes / 2 && taken.length < 100_000) {
        const p = this.queue.shift() as Pending;
        bytes += p.record.data.length + p.record.partitionKey.length + 8;
        taken.push(p);
      }
      for (const a of aggregateRecords(
        taken.map((p) => p.record),
        this.o.aggregate,
      )) {
        entries.push({
          data: a.data,
          partitionKey: a.partitionKey,
          waiters: a.members.map((i) => taken[i] as Pending),
        });
      }
      return entries;
    }
    while (this.queue.length > 0 && entries.length < this.o.maxBatchRecords) {
      const next = this.queue.peek() as Pending;
      const size = next.record.data.length + Buffer.byteLength(next.record.partitionKey);
      if (entries.length > 0 && bytes + size > this.o.maxBatchBytes) break;
      this.queue.shift();
      bytes += size;
      entries.push({ data: next.record.data, partitionKey: next.record.partitionKey, waiters: [next] });
    }
    return entries;
  }

  private async send(initial: Entry[]): Promise<void> {
    let entries = initial;
    for (let attempt = 1; entries.length > 0; attempt++) {
      let output: PutRecordsCommandOutput | undefined;
      let callError: Error | undefined;
      try {
        this.stats.putRecordsCalls++;
        this.stats.entriesSent += entries.length;
        output = await this.o.client.send(
          new PutRecordsCommand({
            StreamName: this.o.streamName,
            Records: entries.map((e) => ({ Data: e.data, PartitionKey: e.partitionKey })),
          }),
        );
      } catch (error) {
        callError = error as Error;
        if (PERMANENT.has(callError.name)) {
          this.settle(
            entries,
            new KinesisPutError(callError.name, `PutRecords failed: ${callError.message}`, { cause: error }),
          );
          return;
        }
      }
      const failed: Entry[] = [];
      const codes: string[] = [];
      if (output) {
        const results = output.Records ?? [];
        entries.forEach((e, i) => {
          const r = results[i];
          if (r && !r.ErrorCode && r.SequenceNumber) this.settle([e]);
          else {
            failed.push(e);
            codes.push(`${r?.ErrorCode ?? 'NoResult'}: ${r?.ErrorMessage ?? 'no result for this entry'}`);
          }
        });
      } else failed.push(...entries);
      if (failed.length === 0) return;
      if (attempt >= this.o.maxAttempts) {
        const code = output ? (codes[0]?.split(':')[0] ?? 'Unknown') : (callError?.name ?? 'Unknown');
        const detail = output ? codes[0] : callError?.message;
        this.settle(
          failed,
          new KinesisPutError(
            code,
            `Record not put on ${this.o.streamName} after ${attempt} attempts (${detail}). ` +
              'The stream is throttled or unavailable: add shards or slow the producer, then resend.',
            { cause: callError },
          ),
        );
        return;
      }
      this.stats.entriesRetried += failed.length;
      entries = failed;
      const cap = Math.min(this.o.maxDelayMs, this.o.baseDelayMs * 2 ** (attempt - 1));
      await this.o.sleep(Math.random() * cap);
    }
  }

  private settle(entries: readonly Entry[], error?: KinesisPutError): void {
    for (const e of entries) {
      for (const w of e.waiters) {
        if (error) {
          this.stats.recordsFailed++;
          w.reject(error);
        } else w.resolve();
        this.outstanding--;
      }
    }
    // Each freed slot admits exactly one waiting record, oldest first.
    while (this.waiting.length > 0 && this.outstanding < this.o.maxBufferedRecords) {
      this.admit(this.waiting.shift() as Pending);
    }
    if (this.outstanding === 0) for (const w of this.idleWaiters.splice(0)) w();
  }
}
