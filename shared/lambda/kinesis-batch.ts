/**
 * The one way Paceline's Kinesis-triggered functions process a batch, so every such function
 * has the same guarantees (DESIGN.md requirement 4):
 *
 * - KPL-aggregated records are de-aggregated (real producers aggregate; Lambda does not undo it);
 * - each user record is handled; a {@link MalformedRecordError} quarantines *that user record*
 *   in the dead-letter store with its reason and counts it, and the batch moves on;
 * - any other error fails the Kinesis record, reported through `batchItemFailures`
 *   (ReportBatchItemFailures) so Lambda retries from it; a batch where everything failed throws,
 *   letting bisect-on-error isolate it;
 * - a failure to write the dead-letter store is itself a transient failure (retried), so a
 *   record is never lost between "rejected" and "quarantined".
 *
 * - metrics are counted per invocation ({@link BatchMetrics}) and published as one value per
 *   metric when it ends: one EMF line per invocation, whatever the batch size.
 *
 * Handlers must be idempotent per user record: a retried Kinesis record is handled again whole.
 */

import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import type { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { type Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import middy from '@middy/core';
import { deaggregateSync, type UserRecord } from 'aws-kinesis-agg';
import type { KinesisStreamBatchResponse, KinesisStreamEvent, KinesisStreamRecord } from 'aws-lambda';
import type { DeadLetterStore } from '../quarantine/dead-letter-store.js';
import { MalformedRecordError } from '../quarantine/quarantine.js';
import type { Clock } from '../time/clock.js';

/** One user record (after de-aggregation) as handed to a record handler. */
export interface UserRecordInput {
  readonly data: Buffer;
  readonly partitionKey: string;
  readonly shardId: string;
  readonly sequenceNumber: string;
  /** Position inside a KPL aggregate; 0 for plain records. */
  readonly subSequenceNumber: number;
  /** Approximate arrival on the stream, epoch ms. */
  readonly arrivedAt: number;
  /**
   * Set when the user record itself is unusable before any handler sees it (e.g. a KPL
   * sub-record whose partition-key index is out of range): it is quarantined with this reason.
   */
  readonly rejection?: MalformedRecordError;
}

/**
 * Counts of one invocation. Record handlers add to it; the batch handler publishes each metric
 * once (the sum) when the invocation ends. Powertools would otherwise store one value per
 * `addMetric` call and flush every 100 values — many log lines per batch, and a "No application
 * metrics to publish" warning when a flush happened to empty the store just before the end.
 */
export interface BatchMetrics {
  /** Adds `value` to the metric's count for this invocation (unit Count). */
  count(name: string, value: number): void;
}

/**
 * The sums behind {@link BatchMetrics}. One per handler: invocations run one at a time per
 * execution environment (with several concurrent invocations in one environment the sums would
 * mix across them, the totals staying exact).
 */
class BatchCounts implements BatchMetrics {
  private readonly sums = new Map<string, number>();

  count(name: string, value: number): void {
    this.sums.set(name, (this.sums.get(name) ?? 0) + value);
  }

  /** Adds one value per metric to `metrics` (logMetrics then flushes them once) and resets. */
  publishTo(metrics: Metrics): void {
    for (const [name, sum] of this.sums) metrics.addMetric(name, MetricUnit.Count, sum);
    this.sums.clear();
  }
}

/** Options of {@link kinesisBatchHandler}. */
export interface KinesisBatchHandlerOptions {
  /** Function name; recorded as the dead letters' source. */
  readonly source: string;
  readonly deadLetters: DeadLetterStore;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics: Metrics;
  /**
   * Handles one user record; throws {@link MalformedRecordError} for bad content. Must be
   * idempotent. Counts its metrics in `metrics` (published once per invocation).
   */
  readonly handleRecord: (record: UserRecordInput, metrics: BatchMetrics) => Promise<void>;
  /**
   * Handle a batch's records concurrently. Safe for idempotent, commutative effects (counts,
   * deduplicated spend); with ioredis auto-pipelining the whole batch then costs a few round trips.
   * @default true
   */
  readonly processInParallel?: boolean;
}

/** Shard and arrival time of a Kinesis event record (`eventID` is `<shardId>:<sequenceNumber>`). */
function positionOf(record: KinesisStreamRecord): { shardId: string; arrivedAt: number } {
  return {
    shardId: record.eventID.split(':')[0] ?? 'unknown',
    arrivedAt: Math.round(record.kinesis.approximateArrivalTimestamp * 1000),
  };
}

/** Splits a Kinesis record into its user records (KPL de-aggregation; plain records pass through). */
export function userRecordsOf(record: KinesisStreamRecord): UserRecordInput[] {
  const { shardId, arrivedAt } = positionOf(record);
  let out: UserRecord[] = [];
  let failure: Error | undefined;
  deaggregateSync(record.kinesis, true, (err, userRecords) => {
    if (err) failure = err;
    else out = userRecords ?? [];
  });
  if (failure) {
    throw new MalformedRecordError(
      'kpl.corrupt-aggregate',
      `Record ${record.kinesis.sequenceNumber} looks KPL-aggregated but could not be de-aggregated ` +
        `(${failure.message}); re-send it from a KPL-compatible producer.`,
      { cause: failure },
    );
  }
  return out.map((u) => {
    const sub = u.subSequenceNumber ?? 0;
    const input = {
      data: Buffer.from(u.data, 'base64'),
      partitionKey: u.partitionKey,
      shardId,
      sequenceNumber: record.kinesis.sequenceNumber,
      subSequenceNumber: sub,
      arrivedAt,
    };
    // The KPL format stores partition keys in a table and each sub-record an index into it; an
    // index out of range leaves the key undefined. The data may be fine, but the record cannot
    // be trusted to be routed right: quarantine it under the aggregate's key, so it is replayable.
    if (typeof u.partitionKey !== 'string') {
      return {
        ...input,
        partitionKey: record.kinesis.partitionKey,
        rejection: new MalformedRecordError(
          'kpl.bad-partition-key-index',
          `Sub-record ${sub} of KPL aggregate ${record.kinesis.sequenceNumber} names a partition-key index ` +
            "outside the aggregate's key table: the producer wrote a corrupt aggregate. Fix the producer; " +
            "replay puts the sub-record back under the aggregate's partition key.",
        ),
      };
    }
    return input;
  });
}

/** Builds a middy handler for a Kinesis event source with Paceline's batch semantics. */
export function kinesisBatchHandler(options: KinesisBatchHandlerOptions) {
  const processor = new BatchProcessor(EventType.KinesisDataStreams);
  const counts = new BatchCounts();

  const quarantine = async (input: UserRecordInput, error: MalformedRecordError): Promise<void> => {
    await options.deadLetters.put({
      source: options.source,
      shardId: input.shardId,
      // Sub-records of an aggregate share a sequence number: keep them apart.
      sequenceNumber: `${input.sequenceNumber}.${input.subSequenceNumber}`,
      partitionKey: input.partitionKey,
      data: input.data,
      reasonCode: error.reasonCode,
      reason: error.message,
      arrivedAt: input.arrivedAt,
      quarantinedAt: options.clock.now(),
    });
    counts.count('RecordsQuarantined', 1);
    options.logger.warn('record quarantined', {
      reasonCode: error.reasonCode,
      reason: error.message,
      shardId: input.shardId,
      sequenceNumber: input.sequenceNumber,
    });
  };

  const handleKinesisRecord = async (record: KinesisStreamRecord): Promise<void> => {
    let inputs: UserRecordInput[];
    try {
      inputs = userRecordsOf(record);
    } catch (error) {
      if (!(error instanceof MalformedRecordError)) throw error;
      await quarantine(
        {
          ...positionOf(record),
          data: Buffer.from(record.kinesis.data, 'base64'),
          partitionKey: record.kinesis.partitionKey,
          sequenceNumber: record.kinesis.sequenceNumber,
          subSequenceNumber: 0,
        },
        error,
      );
      return;
    }
    await Promise.all(
      inputs.map(async (input) => {
        try {
          if (input.rejection) throw input.rejection;
          await options.handleRecord(input, counts);
        } catch (error) {
          if (error instanceof MalformedRecordError) await quarantine(input, error);
          else throw error;
        }
      }),
    );
    counts.count('RecordsProcessed', inputs.length);
  };

  return middy<KinesisStreamEvent, KinesisStreamBatchResponse>()
    .use(injectLambdaContext(options.logger))
    .use(logMetrics(options.metrics))
    .handler(async (event, context) => {
      // Always present, so every invocation publishes something (no empty-metrics warning).
      counts.count('RecordsProcessed', 0);
      let failed = event.Records.length;
      try {
        const response = await processPartialResponse(event, handleKinesisRecord, processor, {
          context,
          processInParallel: options.processInParallel ?? true,
        });
        failed = response.batchItemFailures.length;
        return response;
      } finally {
        // Kinesis records left for Lambda to retry (all of them when the batch threw).
        counts.count('RecordsFailed', failed);
        counts.publishTo(options.metrics);
      }
    });
}
