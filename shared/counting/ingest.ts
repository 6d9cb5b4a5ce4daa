/**
 * Ingest of raw action-event records: decode + validate (malformed → {@link ActionEventError},
 * which the batch handler quarantines), then store (dedup by event identity within the window).
 * Shared by the Lambda handler (records handed over one at a time, coalesced into one write by
 * {@link IngestCoalescer}) and batch callers (tools, benchmarks).
 */
import { errorKind } from '../errors.js';
import { type DecodedRecord, decodeRecord } from './event-decode.js';
import type { ActionStore, AddResult } from './store.js';

/** Decodes, validates and stores one wire record. Idempotent. */
export async function ingestRecord(store: ActionStore, data: Buffer): Promise<AddResult> {
  const record = decodeRecord(data);
  store.checkTimestamp(record);
  return store.add([record]);
}

/**
 * Decodes and stores many records in one pipelined round trip per node. Malformed records do
 * not stop the others: they are returned with their errors for the caller to quarantine.
 */
export async function ingestRecords(
  store: ActionStore,
  data: readonly Buffer[],
): Promise<AddResult & { readonly malformed: readonly { readonly index: number; readonly error: Error }[] }> {
  const malformed: { index: number; error: Error }[] = [];
  const records = [];
  for (let i = 0; i < data.length; i++) {
    try {
      const record = decodeRecord(data[i] as Buffer);
      store.checkTimestamp(record);
      records.push(record);
    } catch (error) {
      malformed.push({ index: i, error: error as Error });
    }
  }
  const result = await store.add(records);
  return { ...result, malformed };
}

/** Where a write's outcome is counted (the batch handler's per-invocation metrics fit). */
export interface IngestMetrics {
  count(name: string, value: number): void;
}

/** Adds one write's outcome to `metrics` under the ingest function's metric names. */
export function countIngest(metrics: IngestMetrics, result: AddResult): void {
  metrics.count('ActionsCounted', result.added);
  metrics.count('ActionsDuplicate', result.duplicates);
  metrics.count('ActionsRestamped', result.restamped);
  metrics.count('ActionsExpired', result.expired);
  metrics.count('ActionKeyGroupsRepaired', result.repaired);
  metrics.count('ActionUsersMigratedFromV1', result.migrated);
}

/** {@link IngestCoalescer} options out of range; the message names the option and what to give. */
export class InvalidIngestOptionsError extends errorKind(
  'InvalidIngestOptionsError',
  'counting.invalid-ingest-options',
) {}

/** Options of {@link IngestCoalescer}. */
export interface IngestCoalescerOptions {
  readonly store: ActionStore;
  /**
   * Flush early once this many records wait (bounds one write's size and the records a failed
   * write sends back for retry together). @default 2_000
   */
  readonly maxPending?: number;
}

interface Pending {
  readonly record: DecodedRecord;
  readonly settle: { resolve: () => void; reject: (error: unknown) => void };
}

/**
 * Coalesces concurrent single-record ingests into one {@link ActionStore.add} (one script call
 * per node and 256 arrivals, instead of one per record).
 *
 * Why: the Lambda batch handler hands records over one at a time, in parallel; storing each
 * alone costs a script call per record, which made ingest ~4× more expensive than the batched
 * path the benchmark measures. Every call made before the next macrotask joins one write, in
 * call order (a user's first occurrence stays the one counted). Malformed records throw from
 * {@link ingest} synchronously-early (before joining), so each is quarantined on its own; a
 * failed write (Redis down) rejects every record that joined it, and the batch handler reports
 * them for retry — storing is idempotent, so retrying records that had been stored is harmless.
 */
export class IngestCoalescer {
  private readonly store: ActionStore;
  private readonly maxPending: number;
  private pending: Pending[] = [];
  private scheduled = false;
  private readonly sinks = new Set<IngestMetrics>();

  constructor(options: IngestCoalescerOptions) {
    this.store = options.store;
    const max = options.maxPending ?? 2_000;
    if (!Number.isSafeInteger(max) || max < 1) {
      throw new InvalidIngestOptionsError(`maxPending is ${max}: give a positive integer (default 2000).`);
    }
    this.maxPending = max;
  }

  /**
   * Decodes and validates one wire record (throws {@link ActionEventError} at once when it is
   * malformed) and resolves when the write it joined is stored. The write's summed outcome is
   * counted once into each distinct `metrics` object of the records that joined it.
   */
  async ingest(data: Buffer, metrics?: IngestMetrics): Promise<void> {
    const record = decodeRecord(data);
    this.store.checkTimestamp(record);
    if (metrics) this.sinks.add(metrics);
    const done = new Promise<void>((resolve, reject) => {
      this.pending.push({ record, settle: { resolve, reject } });
    });
    if (this.pending.length >= this.maxPending) void this.flush();
    else if (!this.scheduled) {
      this.scheduled = true;
      // setImmediate, not a microtask: the batch handler starts its records across several
      // microtask turns (de-aggregation, middleware), all before the next macrotask.
      setImmediate(() => void this.flush());
    }
    return done;
  }

  private async flush(): Promise<void> {
    this.scheduled = false;
    const batch = this.pending;
    const sinks = [...this.sinks];
    this.pending = [];
    this.sinks.clear();
    if (batch.length === 0) return;
    try {
      const result = await this.store.add(batch.map((p) => p.record));
      for (const sink of sinks) countIngest(sink, result);
      for (const p of batch) p.settle.resolve();
    } catch (error) {
      for (const p of batch) p.settle.reject(error);
    }
  }
}
