/**
 * Encoding action events as producers send them (`encodeActionEvent`, the client's `sendAction`):
 * each field validated and written at its layout's offset, the oldest layout that holds the
 * event chosen, and the record checked as the ingest function will check it, so a producer
 * learns of a bad event when it builds it, not from the dead letter.
 */
import { inputErrorKind } from '../errors.js';
import { validateRecord } from './event-decode.js';
import { IDENTITY_KINDS, identityFieldsOf, identityTag } from './identities.js';
import {
  type ActionName,
  actionEventSchema,
  type EventSchema,
  type FieldSpec,
  type Layout,
  USER_ID_FIELD,
  type ViewTypeName,
} from './schema.js';

/** An entity/user id as callers may give it. */
export type Id = bigint | number | string;

/** An event as producers build it. */
export interface ActionEvent {
  /** The user; may be left out (or 0) when the event gives a device or household id. */
  readonly userId?: Id;
  /** A device id (layout v2). */
  readonly deviceId?: Id;
  /** A household id, e.g. derived from the IP (layout v2). */
  readonly householdId?: Id;
  /** A stream (viewing) session id (layout v3). */
  readonly sessionId?: Id;
  /**
   * The identities as a list, `[{ kind: 'household', id: '77' }]` — the same as the fields above,
   * at most one per kind.
   */
  readonly identities?: readonly { readonly kind: string; readonly id: Id }[];
  /** Epoch milliseconds. */
  readonly timestamp: number;
  /** 16 bytes, or 32 hex characters (a UUID with or without dashes). */
  readonly insertionId: string | Uint8Array;
  readonly action: ActionName | number;
  /** @default 'unknown' (0) */
  readonly viewType?: ViewTypeName | number;
  readonly ad: Id;
  readonly adGroup: Id;
  readonly campaign: Id;
  readonly advertiser: Id;
  /** Extra dimensions of newer layouts, by name. */
  readonly [extra: string]: unknown;
}

const U64_MAX = (1n << 64n) - 1n;

/**
 * A value a caller gave for an action event (`sendAction`, `encodeActionEvent`) or a cap check's
 * entities that cannot be encoded or would be refused by the ingest function; the message names
 * the field and what to send instead; `field` is the field at fault (`userId`, `campaign`, `timestamp`…).
 * (The ingest function's own refusals are {@link ActionEventError}s.)
 */
export class InvalidActionFieldError extends inputErrorKind(
  'InvalidActionFieldError',
  'counting.invalid-field-value',
  'field',
) {}

function fail(field: string, problem: string): never {
  throw new InvalidActionFieldError(field, `Action event field "${field}" ${problem}`);
}

function toU64(field: string, value: unknown): bigint {
  let v: bigint;
  if (typeof value === 'bigint') v = value;
  else if (typeof value === 'number') {
    if (!Number.isSafeInteger(value))
      fail(field, `is ${value}: expected a safe integer (use a bigint or string above 2^53).`);
    v = BigInt(value);
  } else if (typeof value === 'string' && /^\d{1,20}$/.test(value)) v = BigInt(value);
  else
    fail(
      field,
      `is ${JSON.stringify(value)}: expected an unsigned 64-bit integer (bigint, number or decimal string).`,
    );
  if (v < 0n || v > U64_MAX) fail(field, `is ${v}: expected 0..2^64-1.`);
  return v;
}

/**
 * Encodes a field value to its raw bytes (as a latin1 string, the form filters compare against).
 * Throws {@link InvalidActionFieldError} naming the field for values that cannot be encoded.
 */
export function rawValue(spec: FieldSpec, value: unknown): string {
  const buf = Buffer.alloc(spec.width);
  writeField(buf, 0, spec, value);
  return buf.toString('latin1', 0, spec.width);
}

function writeField(buf: Buffer, offset: number, spec: FieldSpec, value: unknown): void {
  switch (spec.kind) {
    case 'code': {
      let code: unknown = value;
      if (typeof value === 'string' && spec.names && value in spec.names) code = spec.names[value];
      if (typeof code !== 'number' || !Number.isInteger(code) || code < 0 || code > 255) {
        const names = spec.names ? ` or one of ${Object.keys(spec.names).join(', ')}` : '';
        fail(spec.name, `is ${JSON.stringify(value)}: expected a code 0..255${names}.`);
      }
      buf[offset] = code;
      return;
    }
    case 'id':
      buf.writeBigUInt64BE(toU64(spec.name, value), offset);
      return;
    case 'timestamp': {
      if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
        fail(
          spec.name,
          `is ${JSON.stringify(value)}: expected epoch milliseconds as a non-negative safe integer.`,
        );
      }
      buf.writeBigUInt64BE(BigInt(value), offset);
      return;
    }
    case 'bytes': {
      let bytes: Uint8Array;
      if (value instanceof Uint8Array) bytes = value;
      else if (typeof value === 'string' && /^[0-9a-fA-F-]+$/.test(value)) {
        bytes = Buffer.from(value.replaceAll('-', ''), 'hex');
      } else
        fail(
          spec.name,
          `is ${JSON.stringify(value)}: expected ${spec.width} bytes or ${spec.width * 2} hex characters.`,
        );
      if (bytes.length !== spec.width) {
        fail(
          spec.name,
          `has ${bytes.length} bytes: expected exactly ${spec.width} (${spec.width * 2} hex characters).`,
        );
      }
      buf.set(bytes, offset);
      return;
    }
  }
}

/**
 * Encodes an event in the schema's current layout. Throws {@link InvalidActionFieldError} naming
 * the bad field (what the ingest function would quarantine is refused here, its
 * {@link ActionEventError} as the `cause`).
 */
export function encodeActionEvent(event: ActionEvent, schema: EventSchema = actionEventSchema): Buffer {
  const normalized = identityFieldsOf(event);
  if ('problem' in normalized) fail(normalized.field, normalized.problem);
  const fields = normalized.fields;
  const layout = layoutFor(fields, schema);
  const buf = Buffer.alloc(layout.recordLength);
  buf[0] = layout.version;
  for (const f of layout.fields) {
    const value = fields[f.name] ?? (f.required ? undefined : 0);
    if (value === undefined) fail(f.name, 'is missing.');
    writeField(buf, f.offset, f, value);
  }
  // The user id may be left out when another identity is given (v2 on): 0 on the wire.
  writeField(buf, layout.memberLength, USER_ID_FIELD, fields.userId ?? 0);
  const error = validateRecord(buf, layout);
  if (error) throw new InvalidActionFieldError(error.field ?? 'record', error.message, { cause: error });
  return buf;
}

/**
 * The Kinesis partition key of an event: its first identity's key-group tag (the decimal user id
 * when it has one), so one identity's events stay in order on one shard. Call after
 * {@link encodeActionEvent} accepted the event.
 */
export function actionPartitionKey(event: ActionEvent): string {
  const normalized = identityFieldsOf(event);
  const fields = 'fields' in normalized ? normalized.fields : event;
  for (const kind of IDENTITY_KINDS) {
    const value = fields[kind.field];
    if (!isUnset(value)) return identityTag(kind, String(value));
  }
  return String(event.userId);
}

function isUnset(value: unknown): boolean {
  return value === undefined || value === 0 || value === 0n || value === '0';
}

/**
 * The oldest layout that holds every field the event sets: an event without the newer fields is
 * written exactly as before they existed (same bytes, so a retry across a producer upgrade is
 * still a duplicate, and readers that know only the old layout still read it).
 */
function layoutFor(fields: Readonly<Record<string, unknown>>, schema: EventSchema): Layout {
  let chosen = schema.current;
  for (const layout of [...schema.layouts.values()].sort((a, b) => b.version - a.version)) {
    let holds = true;
    for (const f of schema.current.fields) {
      if (!layout.byName.has(f.name) && !isUnset(fields[f.name])) holds = false;
    }
    if (holds) chosen = layout;
  }
  return chosen;
}
