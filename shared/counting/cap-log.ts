/**
 * The cap log's format (shared/redis/scripts/counting-caplog.lua writes it; cap-scan-caplog.ts
 * reads it) and {@link capLogOf}, the same encoding from a log in TypeScript: what the ingest
 * script's output is compared with, byte for byte (test/integration/counting/cap-log.test.ts).
 */
import type { EventSchema } from './schema.js';

/** First byte of a cap log the ingest script keeps; any other value: read the log instead. */
export const CAP_LOG_KEPT = 1;
/** First byte of a cap log the ingest script does not keep (too many tuples, unknown layout). */
export const CAP_LOG_NOT_KEPT = 0;
/**
 * Logs shorter than this many bytes (about 35 v1 events) get no cap log: a cap check reads that
 * many bytes of the log beside the cap log, in the same round trip, and takes a shorter log
 * whole from them. Most users' logs are short, and a cap log of a few events would cost more
 * memory and ingest time than it saves (docs/counting.md, "The cap log").
 */
export const CAP_LOG_MIN_LOG_BYTES = 2048;
/** The tuple field of a record that defines the next tuple instead of recording an event. */
export const CAP_LOG_TUPLE = 0xffff;
/** Most tuples a cap log numbers (0 … 65,534). */
export const CAP_LOG_MAX_TUPLES = 0xffff;
/** Bytes of an event record: tuple u16, action u8, view type u8, timestamp u48. */
export const CAP_LOG_EVENT_BYTES = 10;
/**
 * Offset in a member of its first entity id: a tuple record holds the member's version byte and
 * then its bytes from here (so a field at member offset `o` is at tuple offset `o − 26`).
 */
export const CAP_LOG_ENTITY_OFFSET = 27;

/**
 * The cap log of a packed log (members back to back), as the ingest script builds it from the
 * log; a log holding a layout `schema` does not know gives the not-kept marker.
 */
export function capLogOf(log: Buffer, schema: EventSchema): Buffer {
  const parts: Buffer[] = [Buffer.of(CAP_LOG_KEPT)];
  const tuples = new Map<string, number>();
  for (let pos = 0; pos < log.length; ) {
    const layout = schema.layouts.get(log[pos] as number);
    if (layout === undefined) return Buffer.of(CAP_LOG_NOT_KEPT);
    const m = log.subarray(pos, pos + layout.memberLength);
    pos += layout.memberLength;
    const tuple = Buffer.concat([m.subarray(0, 1), m.subarray(CAP_LOG_ENTITY_OFFSET)]);
    const key = tuple.toString('latin1');
    let t = tuples.get(key);
    if (t === undefined) {
      if (tuples.size >= CAP_LOG_MAX_TUPLES) return Buffer.of(CAP_LOG_NOT_KEPT);
      t = tuples.size;
      tuples.set(key, t);
      parts.push(Buffer.of(0xff, 0xff), tuple);
    }
    const event = Buffer.alloc(CAP_LOG_EVENT_BYTES);
    event.writeUInt16BE(t, 0);
    m.copy(event, 2, CAP_LOG_ENTITY_OFFSET - 2, CAP_LOG_ENTITY_OFFSET);
    m.copy(event, 4, 3, 9);
    parts.push(event);
  }
  return Buffer.concat(parts);
}
