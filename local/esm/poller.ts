/**
 * A local Kinesis event-source mapping: polls every shard of a stream and invokes a function
 * with Lambda's semantics, configured from the same {@link KinesisSourceSpec} the CDK stack uses.
 *
 * - one batch in flight per shard, shards in parallel (ParallelizationFactor 1);
 * - batches of up to `batchSize`, gathered for up to `maxBatchingWindowSeconds`;
 * - ReportBatchItemFailures: resume from the lowest failed sequence number; an empty string, a
 *   missing or unknown `itemIdentifier` makes the whole batch a failure;
 * - BisectBatchOnFunctionError: a function error (throw, crash, timeout) splits the batch in two
 *   and each half is retried; splitting does not use up a retry;
 * - MaximumRetryAttempts and MaximumRecordAgeInSeconds (age from the injected clock against the
 *   record's arrival time) end in the on-failure destination, after which the shard moves on;
 * - per-shard checkpoints in a {@link CheckpointStore}.
 *
 * Decisions where AWS is silent are written down in docs/local-region.md.
 */

import { randomUUID } from 'node:crypto';
import {
  type _Record,
  DescribeStreamSummaryCommand,
  GetRecordsCommand,
  type GetRecordsCommandOutput,
  GetShardIteratorCommand,
  type KinesisClient,
  ListShardsCommand,
  type ShardIteratorType,
} from '@aws-sdk/client-kinesis';
import { errorKind } from '../../shared/errors.js';
import type { KinesisSourceSpec } from '../../shared/region/resources.js';
import { type Clock, systemClock } from '../../shared/time/clock.js';
import type { InvokeResult, Invoker } from '../worker/invoker.js';
import { type CheckpointStore, MemoryCheckpointStore } from './checkpoints.js';
import {
  functionArn,
  type KinesisOnFailureRecord,
  kinesisEvent,
  type OnFailureCondition,
  type StreamRecord,
} from './lambda-shapes.js';
import type { OnFailureDestination } from './on-failure.js';

/** Event-source settings the poller honours (the stream is given by name). */
export type PollerSourceSettings = Omit<KinesisSourceSpec, 'stream' | 'reportBatchItemFailures'> & {
  readonly reportBatchItemFailures: boolean;
};

/** Options of {@link KinesisPoller}. */
export interface KinesisPollerOptions {
  readonly kinesis: KinesisClient;
  readonly streamName: string;
  readonly source: PollerSourceSettings;
  readonly invoker: Invoker;
  readonly onFailure: OnFailureDestination;
  /** Region written into events and ARNs. @default 'us-east-1' */
  readonly region?: string;
  /** @default a fresh {@link MemoryCheckpointStore} */
  readonly checkpoints?: CheckpointStore;
  /** Record age is measured on this clock against each record's arrival time. @default systemClock */
  readonly clock?: Clock;
  /** Pause between polls of a shard that returned nothing (Lambda polls about once a second). @default 200 */
  readonly idlePollMs?: number;
  /** First retry delay; doubles per retry of the same records. @default 100 */
  readonly retryBaseDelayMs?: number;
  /** @default 2000 */
  readonly retryMaxDelayMs?: number;
  /** Operational log lines (function errors, bisections, on-failure records). @default no-op */
  readonly log?: (line: string) => void;
}

/** What happened to one invocation (kept for tests and operators; the last 1000). */
export interface BatchAttempt {
  readonly shardId: string;
  readonly firstSequenceNumber: string;
  readonly lastSequenceNumber: string;
  readonly size: number;
  readonly outcome: 'success' | 'partial' | 'error';
  readonly detail?: string;
}

type Outcome =
  | { readonly kind: 'success' }
  | { readonly kind: 'partial'; readonly index: number }
  | { readonly kind: 'error'; readonly errorType: string; readonly errorMessage: string };

interface WorkItem {
  records: StreamRecord[];
  /** Retries used by these records (bisection does not use any). */
  retries: number;
  /** Invocations that included these records. */
  invokes: number;
  lastError?: { errorType: string; errorMessage: string };
}

interface ShardState {
  readonly shardId: string;
  iterator?: string;
  closed: boolean;
  pending: StreamRecord[];
  lastFetched?: string;
  busy: boolean;
  /** Poll counter value of the latest poll that found the shard drained. */
  idleAt: number;
  windowStart?: number;
  lastError?: string;
}

/** Raised by {@link KinesisPoller.waitForIdle} when the mapping does not catch up in time. */
export class PollerNotIdleError extends errorKind('PollerNotIdleError', 'local.poller-not-idle') {}

/** Polls a Kinesis stream and invokes a function with Lambda's event-source-mapping semantics. */
export class KinesisPoller {
  private readonly shards: ShardState[] = [];
  private readonly loops: Promise<void>[] = [];
  private readonly checkpoints: CheckpointStore;
  private readonly clock: Clock;
  private readonly region: string;
  private readonly log: (line: string) => void;
  private readonly abort = new AbortController();
  private streamArn = '';
  private pollCounter = 0;
  private started = false;
  private stopped = false;
  /** Recent invocations, oldest first. */
  readonly history: BatchAttempt[] = [];

  constructor(private readonly options: KinesisPollerOptions) {
    this.checkpoints = options.checkpoints ?? new MemoryCheckpointStore();
    this.clock = options.clock ?? systemClock;
    this.region = options.region ?? 'us-east-1';
    this.log = options.log ?? (() => {});
    const { batchSize, retryAttempts } = options.source;
    if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 10_000) {
      throw new RangeError(`batchSize must be an integer in 1..10000 (Kinesis), got ${batchSize}`);
    }
    if (!Number.isInteger(retryAttempts) || retryAttempts < -1) {
      throw new RangeError(`retryAttempts must be -1 (until expiry) or ≥ 0, got ${retryAttempts}`);
    }
  }

  /** The stream's ARN (known after {@link start}). */
  get eventSourceArn(): string {
    return this.streamArn;
  }

  /** Discovers the shards and starts one polling loop per shard. */
  async start(): Promise<void> {
    if (this.started) throw new Error('poller already started');
    this.started = true;
    const { kinesis, streamName } = this.options;
    const summary = await kinesis.send(new DescribeStreamSummaryCommand({ StreamName: streamName }));
    this.streamArn = summary.StreamDescriptionSummary?.StreamARN ?? '';
    let token: string | undefined;
    do {
      const page = await kinesis.send(
        new ListShardsCommand(token ? { NextToken: token } : { StreamName: streamName }),
      );
      for (const shard of page.Shards ?? []) {
        if (shard.ShardId)
          this.shards.push({ shardId: shard.ShardId, closed: false, pending: [], busy: false, idleAt: -1 });
      }
      token = page.NextToken;
    } while (token);
    for (const shard of this.shards) this.loops.push(this.runShard(shard));
  }

  /** Stops polling; waits for in-flight invocations to return (close the invoker to cut them short). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    await Promise.all(this.loops);
  }

  /**
   * Resolves once every shard is drained: a poll that *started after this call* found no new
   * records, nothing is buffered and no batch is in flight. Records put before the call are
   * therefore processed (or in the on-failure destination) when it resolves. Kinesalite always
   * reports `MillisBehindLatest` 0, so that field cannot be used for this.
   */
  async waitForIdle(timeoutMs = 15_000): Promise<void> {
    const mark = this.pollCounter;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const drained = this.shards.every(
        (s) => s.closed || (s.idleAt > mark && s.pending.length === 0 && !s.busy),
      );
      if (drained && this.started) return;
      if (Date.now() > deadline) {
        const state = this.shards
          .map(
            (s) => `${s.shardId}: pending=${s.pending.length} busy=${s.busy} lastError=${s.lastError ?? '-'}`,
          )
          .join('; ');
        throw new PollerNotIdleError(
          `Poller of ${this.options.streamName} not idle after ${timeoutMs} ms (${state})`,
        );
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  private async runShard(shard: ShardState): Promise<void> {
    const { batchSize, maxBatchingWindowSeconds } = this.options.source;
    const windowMs = maxBatchingWindowSeconds * 1000;
    const idlePollMs = this.options.idlePollMs ?? 200;
    while (!this.stopped) {
      try {
        if (shard.pending.length < batchSize && !shard.closed) {
          const pollId = ++this.pollCounter;
          const fetched = await this.fetch(shard, batchSize - shard.pending.length);
          if (fetched === 0 && shard.pending.length === 0) {
            shard.idleAt = pollId;
            if (shard.closed) return;
            await this.sleep(idlePollMs);
            continue;
          }
        }
        if (shard.pending.length === 0) continue;
        if (shard.pending.length < batchSize && windowMs > 0 && !shard.closed) {
          shard.windowStart ??= Date.now();
          const left = shard.windowStart + windowMs - Date.now();
          if (left > 0) {
            await this.sleep(Math.min(idlePollMs, left));
            continue;
          }
        }
        shard.windowStart = undefined;
        const batch = shard.pending.slice(0, batchSize);
        shard.busy = true;
        try {
          const done = await this.deliver(shard, batch);
          if (!done) return;
        } finally {
          shard.busy = false;
        }
        shard.pending.splice(0, batch.length);
      } catch (error) {
        // Emulator hiccups (throttling, restarts): log, back off, poll again; nothing is skipped.
        shard.lastError = error instanceof Error ? error.message : String(error);
        this.log(`poller ${this.options.streamName}/${shard.shardId}: ${shard.lastError}`);
        await this.sleep(500);
      }
    }
  }

  private async fetch(shard: ShardState, limit: number): Promise<number> {
    const { kinesis, streamName } = this.options;
    if (!shard.iterator) {
      const after = shard.lastFetched ?? (await this.checkpoints.get(shard.shardId));
      const type: ShardIteratorType = after ? 'AFTER_SEQUENCE_NUMBER' : this.options.source.startingPosition;
      const res = await kinesis.send(
        new GetShardIteratorCommand({
          StreamName: streamName,
          ShardId: shard.shardId,
          ShardIteratorType: type,
          ...(after ? { StartingSequenceNumber: after } : {}),
        }),
      );
      shard.iterator = res.ShardIterator;
      if (!shard.iterator) throw new Error(`no shard iterator for ${shard.shardId}`);
    }
    let res: GetRecordsCommandOutput;
    try {
      res = await kinesis.send(
        new GetRecordsCommand({ ShardIterator: shard.iterator, Limit: Math.min(10_000, limit) }),
      );
    } catch (error) {
      if ((error as { name?: string }).name === 'ExpiredIteratorException') {
        shard.iterator = undefined; // re-acquired after the last fetched record on the next poll
        return 0;
      }
      throw error;
    }
    shard.iterator = res.NextShardIterator;
    if (!shard.iterator) shard.closed = true;
    const records = (res.Records ?? []).map((r) => toStreamRecord(shard.shardId, r));
    shard.pending.push(...records);
    const last = records.at(-1);
    if (last) shard.lastFetched = last.sequenceNumber;
    return records.length;
  }

  /**
   * Delivers one batch until every record in it is done: processed, or sent to the on-failure
   * destination. Returns false when the poller stopped first (nothing is checkpointed then).
   */
  private async deliver(shard: ShardState, batch: StreamRecord[]): Promise<boolean> {
    const { source } = this.options;
    const maxAgeMs =
      source.maxRecordAgeSeconds === -1 ? Number.POSITIVE_INFINITY : source.maxRecordAgeSeconds * 1000;
    const work: WorkItem[] = [{ records: batch, retries: 0, invokes: 0 }];
    while (work.length > 0) {
      if (this.stopped) return false;
      const item = work[0] as WorkItem;
      // Records are in arrival order, so the expired ones form a prefix.
      const now = this.clock.now();
      let expired = 0;
      while (
        expired < item.records.length &&
        now - (item.records[expired] as StreamRecord).arrivalMs > maxAgeMs
      )
        expired++;
      if (expired > 0) {
        const gone = item.records.slice(0, expired);
        if (!(await this.sendToOnFailure(shard, 'RecordAgeExceeded', gone, item))) return false;
        item.records = item.records.slice(expired);
        if (item.records.length === 0) {
          work.shift();
          continue;
        }
      }
      const result = await this.options.invoker.invoke(
        kinesisEvent(item.records, {
          region: this.region,
          streamArn: this.streamArn,
          functionName: this.options.invoker.functionName,
        }),
      );
      if (this.stopped) return false;
      item.invokes++;
      const outcome = this.interpret(result, item.records);
      this.record(shard, item.records, outcome);
      if (outcome.kind === 'success') {
        await this.checkpoint(shard, item.records);
        work.shift();
        continue;
      }
      if (outcome.kind === 'partial') {
        // Everything before the lowest failed record succeeded: checkpoint it, retry the rest.
        await this.checkpoint(shard, item.records.slice(0, outcome.index));
        item.records = item.records.slice(outcome.index);
        item.lastError = {
          errorType: 'BatchItemFailure',
          errorMessage: `function reported ${item.records[0]?.sequenceNumber} as failed`,
        };
      } else {
        item.lastError = { errorType: outcome.errorType, errorMessage: outcome.errorMessage };
        if (source.bisectBatchOnFunctionError && item.records.length > 1) {
          const half = Math.ceil(item.records.length / 2);
          const first: WorkItem = { ...item, records: item.records.slice(0, half) };
          const second: WorkItem = { ...item, records: item.records.slice(half) };
          work.splice(0, 1, first, second);
          this.log(
            `${this.label(shard)}: ${outcome.errorType} on ${item.records.length} records, bisecting into ${first.records.length} + ${second.records.length}`,
          );
          continue;
        }
      }
      item.retries++;
      if (source.retryAttempts !== -1 && item.retries > source.retryAttempts) {
        if (!(await this.sendToOnFailure(shard, 'RetryAttemptsExhausted', item.records, item))) return false;
        work.shift();
        continue;
      }
      const base = this.options.retryBaseDelayMs ?? 100;
      await this.sleep(Math.min(this.options.retryMaxDelayMs ?? 2000, base * 2 ** (item.retries - 1)));
    }
    return true;
  }

  private interpret(result: InvokeResult, records: readonly StreamRecord[]): Outcome {
    if (!result.ok) return { kind: 'error', errorType: result.errorType, errorMessage: result.errorMessage };
    if (!this.options.source.reportBatchItemFailures) return { kind: 'success' };
    const payload = result.payload;
    if (payload === null || typeof payload !== 'object') return { kind: 'success' };
    const failures = (payload as { batchItemFailures?: unknown }).batchItemFailures;
    if (failures === undefined || failures === null) return { kind: 'success' };
    if (!Array.isArray(failures)) {
      return {
        kind: 'error',
        errorType: 'InvalidBatchItemFailures',
        errorMessage: 'batchItemFailures is not a list',
      };
    }
    if (failures.length === 0) return { kind: 'success' };
    let lowest = Number.POSITIVE_INFINITY;
    for (const failure of failures) {
      const id = (failure as { itemIdentifier?: unknown } | null)?.itemIdentifier;
      const index =
        typeof id === 'string' && id !== '' ? records.findIndex((r) => r.sequenceNumber === id) : -1;
      if (index < 0) {
        return {
          kind: 'error',
          errorType: 'InvalidBatchItemFailures',
          errorMessage: `itemIdentifier ${JSON.stringify(id)} is not a sequence number of this batch; the whole batch counts as failed`,
        };
      }
      lowest = Math.min(lowest, index);
    }
    return { kind: 'partial', index: lowest };
  }

  private async checkpoint(shard: ShardState, done: readonly StreamRecord[]): Promise<void> {
    const last = done.at(-1);
    if (last) await this.checkpoints.set(shard.shardId, last.sequenceNumber);
  }

  /** Sends the records' metadata to the destination (retrying until it takes them), then skips them. */
  private async sendToOnFailure(
    shard: ShardState,
    condition: OnFailureCondition,
    records: readonly StreamRecord[],
    item: WorkItem,
  ): Promise<boolean> {
    const first = records[0] as StreamRecord;
    const last = records.at(-1) as StreamRecord;
    const message: KinesisOnFailureRecord = {
      requestContext: {
        requestId: randomUUID(),
        functionArn: functionArn(this.region, this.options.invoker.functionName),
        condition,
        approximateInvokeCount: item.invokes,
      },
      responseContext: {
        statusCode: item.invokes > 0 ? 200 : 0,
        executedVersion: '$LATEST',
        functionError: item.lastError ? 'Unhandled' : '',
      },
      version: '1.0',
      timestamp: new Date(this.clock.now()).toISOString(),
      KinesisBatchInfo: {
        shardId: shard.shardId,
        startSequenceNumber: first.sequenceNumber,
        endSequenceNumber: last.sequenceNumber,
        approximateArrivalOfFirstRecord: new Date(first.arrivalMs).toISOString(),
        approximateArrivalOfLastRecord: new Date(last.arrivalMs).toISOString(),
        batchSize: records.length,
        streamArn: this.streamArn,
      },
      ...(item.lastError ? { localErrorInfo: item.lastError } : {}),
    };
    for (let attempt = 1; ; attempt++) {
      if (this.stopped) return false;
      try {
        await this.options.onFailure.send(message);
        break;
      } catch (error) {
        this.log(
          `${this.label(shard)}: on-failure destination refused a record (${String(error)}); retrying`,
        );
        await this.sleep(Math.min(5000, 100 * 2 ** attempt));
      }
    }
    this.log(
      `${this.label(shard)}: ${condition}: ${records.length} record(s) ${first.sequenceNumber}…${last.sequenceNumber} sent to ${this.options.onFailure.location}`,
    );
    await this.checkpoint(shard, records);
    return true;
  }

  private record(shard: ShardState, records: readonly StreamRecord[], outcome: Outcome): void {
    this.history.push({
      shardId: shard.shardId,
      firstSequenceNumber: records[0]?.sequenceNumber ?? '',
      lastSequenceNumber: records.at(-1)?.sequenceNumber ?? '',
      size: records.length,
      outcome: outcome.kind,
      ...(outcome.kind === 'error' ? { detail: `${outcome.errorType}: ${outcome.errorMessage}` } : {}),
    });
    if (this.history.length > 1000) this.history.shift();
  }

  private label(shard: ShardState): string {
    return `${this.options.invoker.functionName} ← ${this.options.streamName}/${shard.shardId}`;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      if (this.abort.signal.aborted) {
        resolve();
        return;
      }
      const signal = this.abort.signal;
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done, { once: true });
    });
  }
}

function toStreamRecord(shardId: string, r: _Record): StreamRecord {
  return {
    shardId,
    sequenceNumber: r.SequenceNumber ?? '',
    partitionKey: r.PartitionKey ?? '',
    data: r.Data ?? new Uint8Array(),
    arrivalMs: r.ApproximateArrivalTimestamp?.getTime() ?? Date.now(),
  };
}
