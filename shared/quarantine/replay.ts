/**
 * Replay of quarantined records: once the cause is fixed (a producer bug, a schema version the
 * consumer did not know yet), the raw bytes go back on the function's stream with their original
 * partition key, and each dead letter is deleted only after its record is on the stream — a
 * failed put leaves it in the store, so nothing is lost either way. A record that is still
 * malformed is simply quarantined again by the consumer.
 */
import type { ProducerRecord } from '../kinesis/aggregation.js';
import type { DeadLetter, DeadLetterStore } from './dead-letter-store.js';

/** Options of {@link replayDeadLetters}. */
export interface ReplayOptions {
  readonly store: DeadLetterStore;
  /** Puts one record on the stream; resolves once it is there (e.g. `KinesisProducer.put`). */
  readonly put: (record: ProducerRecord) => Promise<void>;
  /** Dead letters of this source (function name) are replayed. */
  readonly source: string;
  /** Only those with this reason code. @default every reason */
  readonly reasonCode?: string;
  /** At most this many. @default all */
  readonly limit?: number;
}

/** Outcome of a replay. */
export interface ReplayResult {
  readonly replayed: number;
  /** Letters whose put failed; they are still in the store. */
  readonly failed: readonly { readonly letter: DeadLetter; readonly error: string }[];
}

/** Puts matching dead letters back on the stream and deletes each one that made it. */
export async function replayDeadLetters(options: ReplayOptions): Promise<ReplayResult> {
  const letters = (await options.store.list(options.source))
    .filter((l) => options.reasonCode === undefined || l.reasonCode === options.reasonCode)
    .slice(0, options.limit ?? Number.POSITIVE_INFINITY);
  let replayed = 0;
  const failed: { letter: DeadLetter; error: string }[] = [];
  await Promise.all(
    letters.map(async (letter) => {
      try {
        await options.put({ data: letter.data, partitionKey: letter.partitionKey || letter.shardId });
      } catch (error) {
        failed.push({ letter, error: (error as Error).message });
        return;
      }
      await options.store.delete(letter);
      replayed++;
    }),
  );
  return { replayed, failed };
}
