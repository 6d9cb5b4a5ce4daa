/**
 * Replay of quarantined records: once the cause is fixed (a producer bug, a schema version the
 * consumer did not know yet), the raw bytes go back on the function's stream with their original
 * partition key, and each dead letter is deleted only after its record is on the stream — a
 * failed put leaves it in the store, so nothing is lost either way. A record that is still
 * malformed is simply quarantined again by the consumer.
 */
import type { ProducerRecord } from '../kinesis/aggregation.js';
import type { DeadLetter, DeadLetterStore } from './dead-letter-store.js';

/** Which dead letters to list or replay. */
export interface DeadLetterSelection {
  /** Dead letters of this source (function name). */
  readonly source: string;
  /** Only those with this reason code. @default every reason */
  readonly reasonCode?: string;
  /** At most this many, in stream order. @default all */
  readonly limit?: number;
}

/** The dead letters a selection names. */
export async function selectDeadLetters(
  store: DeadLetterStore,
  selection: DeadLetterSelection,
): Promise<DeadLetter[]> {
  return (await store.list(selection.source))
    .filter((l) => selection.reasonCode === undefined || l.reasonCode === selection.reasonCode)
    .slice(0, selection.limit ?? Number.POSITIVE_INFINITY);
}

/** Options of {@link replayDeadLetters}. */
export interface ReplayOptions extends DeadLetterSelection {
  readonly store: DeadLetterStore;
  /** Puts one record on the stream; resolves once it is there (e.g. `KinesisProducer.put`). */
  readonly put: (record: ProducerRecord) => Promise<void>;
}

/** Outcome of a replay. */
export interface ReplayResult {
  readonly replayed: number;
  /** Letters whose put failed; they are still in the store. */
  readonly failed: readonly { readonly letter: DeadLetter; readonly error: string }[];
}

/** Puts matching dead letters back on the stream and deletes each one that made it. */
export async function replayDeadLetters(options: ReplayOptions): Promise<ReplayResult> {
  const letters = await selectDeadLetters(options.store, options);
  let replayed = 0;
  const failed: { letter: DeadLetter; error: string }[] = [];
  await Promise.all(
    letters.map(async (letter) => {
      try {
        // An oversized payload comes back from the payload store (S3) it was offloaded to.
        const data = await options.store.payload(letter);
        await options.put({ data, partitionKey: letter.partitionKey || letter.shardId });
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
