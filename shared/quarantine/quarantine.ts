/**
 * Quarantine wiring for Kinesis record handlers: a record whose *content* is wrong (it will never
 * succeed however often it is retried) goes to the dead-letter store with its reason and is
 * counted; anything else (Redis down, throttling) is rethrown so Lambda retries it as a partial
 * batch failure. Domain decoders signal "content is wrong" by throwing {@link MalformedRecordError}.
 */
import type { KinesisStreamRecord } from 'aws-lambda';
import type { Clock } from '../time/clock.js';
import type { DeadLetterStore } from './dead-letter-store.js';

/**
 * A record that can never be processed (bad schema, impossible values). Subclass it per domain;
 * `reasonCode` is stable (metrics dimension), `message` says what was wrong and what to do.
 */
export class MalformedRecordError extends Error {
  override readonly name: string = 'MalformedRecordError';
  constructor(
    readonly reasonCode: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Options of {@link quarantining}. */
export interface QuarantineOptions {
  readonly store: DeadLetterStore;
  /** Name recorded as the dead letter's source, e.g. the function name. */
  readonly source: string;
  readonly clock: Clock;
  /** Called once per quarantined record, e.g. to add a metric. */
  readonly onQuarantined?: (reasonCode: string) => void;
}

/** Outcome of a quarantined record. */
export interface Quarantined {
  readonly quarantined: true;
  readonly reasonCode: string;
}

/**
 * Wraps a record handler: {@link MalformedRecordError} → dead-letter store + `onQuarantined`,
 * and the record counts as processed; every other error propagates unchanged.
 */
export function quarantining<R>(
  handle: (record: KinesisStreamRecord) => Promise<R>,
  options: QuarantineOptions,
): (record: KinesisStreamRecord) => Promise<R | Quarantined> {
  return async (record) => {
    try {
      return await handle(record);
    } catch (error) {
      if (!(error instanceof MalformedRecordError)) throw error;
      await options.store.put({
        source: options.source,
        shardId: record.eventID.split(':')[0] ?? 'unknown',
        sequenceNumber: record.kinesis.sequenceNumber,
        partitionKey: record.kinesis.partitionKey,
        data: Buffer.from(record.kinesis.data, 'base64'),
        reasonCode: error.reasonCode,
        reason: error.message,
        arrivedAt: Math.round(record.kinesis.approximateArrivalTimestamp * 1000),
        quarantinedAt: options.clock.now(),
      });
      options.onQuarantined?.(error.reasonCode);
      return { quarantined: true, reasonCode: error.reasonCode };
    }
  };
}
