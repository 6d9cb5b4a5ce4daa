/**
 * Every reason code a stream function quarantines a record with, by function: what
 * `dead-letters list|replay --reason` accepts, so a mistyped code is refused instead of listing
 * nothing. `test/unit/cli/dead-letter-reasons.test.ts` keeps it equal to the codes the sources
 * raise (`MalformedRecordError` subclasses in shared/).
 */

/** Raised by the KPL de-aggregation every stream function runs first (shared/lambda/kinesis-batch.ts). */
const KPL_REASONS = ['kpl.bad-partition-key-index', 'kpl.corrupt-aggregate'] as const;

/** Reason codes per stream function name. */
export const DEAD_LETTER_REASONS: Readonly<Record<string, readonly string[]>> = {
  // shared/counting/schema.ts ActionEventReason
  'ingest-actions': [
    ...KPL_REASONS,
    'counting.empty-record',
    'counting.invalid-field',
    'counting.timestamp-in-future',
    'counting.timestamp-not-ms',
    'counting.timestamp-out-of-range',
    'counting.unknown-version',
    'counting.wrong-length',
  ],
  // shared/spend/events.ts and shared/spend/tracker.ts
  'track-spend': [
    ...KPL_REASONS,
    'spend.ambiguous-price',
    'spend.auction-price-format',
    'spend.bid-in-future',
    'spend.bid-too-old',
    'spend.clearing-above-bid',
    'spend.invalid-field',
    'spend.invalid-time',
    'spend.missing-price',
    'spend.not-json',
    'spend.not-object',
    'spend.notice-before-bid',
    'spend.notice-in-future',
    'spend.price-absurd',
    'spend.price-nan',
    'spend.price-negative',
    'spend.price-not-integer',
    'spend.unknown-campaign',
    'spend.unknown-type',
    'spend.unsubstituted-macro',
    'spend.unsupported-version',
  ],
};
