/**
 * How domain code says "this record's *content* is wrong": it will never succeed however often it
 * is retried, so it must be quarantined (dead-letter store, reason, metric) rather than retried.
 * `shared/lambda/kinesis-batch.ts` does the quarantining; anything else thrown there is treated
 * as transient and retried as a partial batch failure.
 */

import { PacelineError } from '../errors.js';

/**
 * A record that can never be processed (bad schema, impossible values). Subclass it per domain;
 * `reasonCode` is stable (metrics dimension), `message` says what was wrong and what to do.
 */
export class MalformedRecordError extends PacelineError {
  override readonly name: string = 'MalformedRecordError';
  constructor(
    readonly reasonCode: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  /** The {@link reasonCode} (e.g. `counting.unknown-version`): the finest stable kind of the failure. */
  override get code(): string {
    return this.reasonCode;
  }
}
