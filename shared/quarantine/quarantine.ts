/**
 * How domain code says "this record's *content* is wrong": it will never succeed however often it
 * is retried, so it must be quarantined (dead-letter store, reason, metric) rather than retried.
 * `shared/lambda/kinesis-batch.ts` does the quarantining; anything else thrown there is treated
 * as transient and retried as a partial batch failure.
 */

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
