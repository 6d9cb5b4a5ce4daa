/**
 * Ingest of raw action-event records: decode + validate (malformed → {@link ActionEventError},
 * which the batch handler quarantines), then store (dedup by event identity within the window).
 * Shared by the Lambda handler (one record at a time, auto-pipelined) and batch callers (tools,
 * benchmarks).
 */
import { decodeRecord } from './schema.js';
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
