/**
 * Decoding and validating wire records (the ingest function's side): a record is checked field by
 * field against its layout (a bad one is an {@link ActionEventError} naming the field, quarantined
 * by the ingest function), then read into what ingest needs without materialising every field.
 */
import { IDENTITY_KINDS, identityNames, identityTag } from './identities.js';
import {
  ActionEventError,
  actionEventSchema,
  type EventSchema,
  type FieldSpec,
  type Layout,
  MAX_TIMESTAMP_MS,
  timestampUnitHint,
  USER_ID_FIELD,
} from './schema.js';

/** What ingest needs from a record, without materialising every field. */
export interface DecodedRecord {
  readonly version: number;
  /** Decimal user id (the user key group's hash tag); '0' when the event carries no user id. */
  readonly userId: string;
  /**
   * The hash tags of the key groups the event counts in, one per identity it carries (the user's
   * is its decimal id, so a v1 event's only tag is its user id; docs/counting.md "Identities").
   */
  readonly keys: readonly string[];
  readonly timestamp: number;
  /** The stored member: the record minus the trailing user id. */
  readonly member: Buffer;
}

function isZero(buf: Buffer, offset: number, width: number): boolean {
  for (let i = offset; i < offset + width; i++) if (buf[i] !== 0) return false;
  return true;
}

const advice = 'Fix the producer (encodeActionEvent validates before sending) and replay the dead letter.';

const checkedFields = new WeakMap<Layout, readonly (FieldSpec & { readonly offset: number })[]>();

export function validateRecord(buf: Buffer, layout: Layout): ActionEventError | undefined {
  let fields = checkedFields.get(layout);
  if (!fields) {
    fields = [...layout.fields, { ...USER_ID_FIELD, offset: layout.memberLength }];
    checkedFields.set(layout, fields);
  }
  for (const f of fields) {
    if (f.required && isZero(buf, f.offset, f.width)) {
      if (f === fields[fields.length - 1] && carriesIdentity(buf, layout)) continue;
      return new ActionEventError(
        'counting.invalid-field',
        f.name,
        `Action event v${layout.version} field "${f.name}" (bytes ${f.offset}..${f.offset + f.width - 1}) is zero: ` +
          (f.name === USER_ID_FIELD.name
            ? `an event needs at least one identity (${identityNames()}). ${advice}`
            : `it is required. ${advice}`),
      );
    }
    if (f.kind === 'timestamp' && (buf[f.offset] !== 0 || buf[f.offset + 1] !== 0)) {
      const value = buf.readBigUInt64BE(f.offset);
      return new ActionEventError(
        'counting.timestamp-out-of-range',
        f.name,
        `Action event v${layout.version} field "${f.name}" (bytes ${f.offset}..${f.offset + f.width - 1}) is ${value}, ` +
          `above ${MAX_TIMESTAMP_MS} (2^48-1 ms, year 10889): expected epoch milliseconds.` +
          `${timestampUnitHint(value)} ${advice}`,
      );
    }
  }
  return undefined;
}

/** Whether a record whose user id is zero carries another identity (so it still has a key). */
function carriesIdentity(buf: Buffer, layout: Layout): boolean {
  for (const k of IDENTITY_KINDS) {
    const f = layout.byName.get(k.field);
    if (f && !isZero(buf, f.offset, f.width)) return true;
  }
  return false;
}

/** The key-group tags of a valid record: its user id's, then one per other identity it carries. */
function keysOf(data: Buffer, layout: Layout, userId: string): readonly string[] {
  const keys = userId === '0' ? [] : [userId];
  if (layout.version === 1) return keys;
  for (const k of IDENTITY_KINDS) {
    const f = layout.byName.get(k.field);
    if (f && !isZero(data, f.offset, f.width)) keys.push(identityTag(k, decimalU64(data, f.offset)));
  }
  return keys;
}

/** A u64 as a decimal string; below 2^53 (every real id) without a BigInt (it is per record). */
function decimalU64(buf: Buffer, offset: number): string {
  const hi = buf.readUInt32BE(offset);
  if (hi < 0x200000) return String(hi * 4294967296 + buf.readUInt32BE(offset + 4));
  return buf.readBigUInt64BE(offset).toString();
}

/**
 * Decodes and validates a wire record. Throws {@link ActionEventError} (a MalformedRecordError:
 * the ingest function quarantines it) with a message naming the field and the problem.
 */
export function decodeRecord(data: Buffer, schema: EventSchema = actionEventSchema): DecodedRecord {
  if (data.length === 0) {
    throw new ActionEventError('counting.empty-record', undefined, `Action event record is empty. ${advice}`);
  }
  const version = data[0] as number;
  const layout = schema.layouts.get(version);
  if (!layout) {
    throw new ActionEventError(
      'counting.unknown-version',
      'version',
      `Action event field "version" (byte 0) is ${version}: this consumer knows layout versions ` +
        `${[...schema.layouts.keys()].join(', ')}. Deploy a consumer that knows v${version}, then replay.`,
    );
  }
  if (data.length !== layout.recordLength) {
    throw new ActionEventError(
      'counting.wrong-length',
      undefined,
      `Action event v${version} record has ${data.length} bytes: layout v${version} is exactly ` +
        `${layout.recordLength} bytes. ${advice}`,
    );
  }
  const error = validateRecord(data, layout);
  if (error) throw error;
  const userId = decimalU64(data, layout.memberLength);
  return {
    version,
    userId,
    keys: keysOf(data, layout, userId),
    timestamp: data.readUIntBE(3, 6),
    member: data.subarray(0, layout.memberLength),
  };
}

/** Smallest believable event time (2001-09-09, 10^12 ms): below it the producer sent seconds. */
const MIN_PLAUSIBLE_MS = 1e12;

/**
 * Rejects an event time before 2001-09-09 (`counting.timestamp-not-ms`: seconds sent as
 * milliseconds) or more than `maxFutureSkewMs` after the consumer's clock (a producer clock
 * bug: it would count in windows that have not happened yet). Throws {@link ActionEventError}
 * (`counting.timestamp-in-future`, quarantined) whose message shows the time as a number and a
 * date, and the unit it looks like when it is not milliseconds.
 */
export function checkEventTime(timestamp: number, now: number, maxFutureSkewMs: number): void {
  // Epoch *seconds* (or a zero-padded or truncated value) read as milliseconds land before
  // 2001-09-09: such an event would be skipped as "expired" and silently lost. No real event of
  // this system is that old, so it is a producer bug: quarantine it with its reason.
  if (timestamp < MIN_PLAUSIBLE_MS) {
    throw new ActionEventError(
      'counting.timestamp-not-ms',
      'timestamp',
      `Action event field "timestamp" is ${timestamp} (${new Date(timestamp).toISOString()}), ` +
        'before 2001-09-09: expected epoch milliseconds — seconds × 1000? Fix the producer and replay the dead letter.',
    );
  }
  if (timestamp <= now + maxFutureSkewMs) return;
  throw new ActionEventError(
    'counting.timestamp-in-future',
    'timestamp',
    `Action event field "timestamp" is ${timestamp} (${new Date(timestamp).toISOString()}), ` +
      `more than ${maxFutureSkewMs} ms after the consumer's clock (${new Date(now).toISOString()}).` +
      `${timestampUnitHint(timestamp)} Fix the producer's clock and replay the dead letter.`,
  );
}

/** Renders a field's bytes for humans and group-by keys: ids decimal, codes by name, bytes hex. */
export function formatValue(spec: FieldSpec, raw: Buffer, offset: number): string {
  switch (spec.kind) {
    case 'code': {
      const code = raw[offset] as number;
      if (spec.names) for (const [name, c] of Object.entries(spec.names)) if (c === code) return name;
      return String(code);
    }
    case 'id':
      return raw.readBigUInt64BE(offset).toString();
    case 'timestamp':
      return String(raw.readUIntBE(offset + 2, 6));
    case 'bytes':
      return raw.toString('hex', offset, offset + spec.width);
  }
}

/** A fully decoded member (tools, tests, the reference implementation). */
export function decodeMember(
  member: Buffer,
  schema: EventSchema = actionEventSchema,
): Record<string, string> {
  const layout = schema.layouts.get(member[0] as number);
  if (!layout) throw new RangeError(`Unknown action event layout version ${member[0]}.`);
  const out: Record<string, string> = { version: String(layout.version) };
  for (const f of layout.fields) out[f.name] = formatValue(f, member, f.offset);
  return out;
}
