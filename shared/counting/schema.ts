/**
 * The user-action event: a fixed-length byte layout declared once, here (the Aperture idea: the
 * store is oblivious to dimensions, the client owns the schema). Everything else — encoder,
 * decoder, validation, the Redis member bytes, filter/group-by offsets, docs/counting.md — is
 * derived from {@link EVENT_LAYOUTS}.
 *
 * Wire record (Kinesis data), all integers big-endian:
 *
 * ```
 * [version u8][timestamp u64 ms][insertionId 16 bytes][action u8][viewType u8]
 * [ad u64][adGroup u64][campaign u64][advertiser u64]   ← v1 dimensions
 * [userId u64]                                          ← the key, always last
 * ```
 *
 * The stored member is the wire record without the trailing user id (the user id is the Redis
 * key). An event's **identity** is its member without the timestamp bytes (version, insertion id,
 * action, view type, ad dimensions; the user is the key): the same identity seen again within the
 * dedup window counts once, whatever its timestamp (Aperture's rule; shared/counting/store.ts).
 *
 * Extending: add a layout version whose field list is the previous one plus the new dimension(s)
 * (appended before the user id). Old records keep decoding; readers give a dimension an event's
 * version lacks its zero value.
 */
import { inputErrorKind } from '../errors.js';
import { MalformedRecordError } from '../quarantine/quarantine.js';
import { IDENTITY_KINDS, identityFieldsOf, identityNames, identityTag } from './identities.js';

/** How a field's bytes are interpreted. */
export type FieldKind =
  /** u8 code with optional names (action, view type). */
  | 'code'
  /** u64 entity or user id; rendered as a decimal string. */
  | 'id'
  /** u64 epoch milliseconds, 1 … 2^48 − 1 (the top two bytes are zero; see {@link MAX_TIMESTAMP_MS}). */
  | 'timestamp'
  /** Opaque bytes rendered as lowercase hex (insertion id). */
  | 'bytes';

/** One field of a layout. */
export interface FieldSpec {
  readonly name: string;
  readonly kind: FieldKind;
  /** Bytes: 1 for codes, 8 for ids/timestamp, any for `bytes`. */
  readonly width: number;
  /** Whether an all-zero value is rejected (zero means "the producer forgot to set it"). */
  readonly required: boolean;
  /** Names of codes (`code` fields only). */
  readonly names?: Readonly<Record<string, number>>;
}

/** Known action codes; any other code 1–255 is accepted and rendered as its number. */
export const ACTIONS = { impression: 1, click: 2, save: 3, hide: 4, conversion: 5 } as const;
/** Known view types (0 = unknown / not given). */
export const VIEW_TYPES = { unknown: 0, home: 1, search: 2, related: 3, profile: 4 } as const;

/** An action name from {@link ACTIONS}. */
export type ActionName = keyof typeof ACTIONS;
/** A view type name from {@link VIEW_TYPES}. */
export type ViewTypeName = keyof typeof VIEW_TYPES;

const v1Fields: readonly FieldSpec[] = [
  { name: 'timestamp', kind: 'timestamp', width: 8, required: true },
  { name: 'insertionId', kind: 'bytes', width: 16, required: true },
  { name: 'action', kind: 'code', width: 1, required: true, names: ACTIONS },
  { name: 'viewType', kind: 'code', width: 1, required: false, names: VIEW_TYPES },
  { name: 'ad', kind: 'id', width: 8, required: true },
  { name: 'adGroup', kind: 'id', width: 8, required: true },
  { name: 'campaign', kind: 'id', width: 8, required: true },
  { name: 'advertiser', kind: 'id', width: 8, required: true },
];

/**
 * v2: the identities other than the user (device, household; docs/counting.md "Identities"),
 * u64 each, 0 when the event does not carry it. From v2 on the user id may be 0 too, when another
 * identity is given (a household-only CTV event).
 */
const v2Fields: readonly FieldSpec[] = [
  ...v1Fields,
  { name: 'deviceId', kind: 'id', width: 8, required: false },
  { name: 'householdId', kind: 'id', width: 8, required: false },
];

/** v3: the stream session (CTV: caps per viewing session), u64, 0 when not given. */
const v3Fields: readonly FieldSpec[] = [
  ...v2Fields,
  { name: 'sessionId', kind: 'id', width: 8, required: false },
];

/** The key field, always the last 8 bytes of a wire record and not part of the stored member. */
export const USER_ID_FIELD: FieldSpec = { name: 'userId', kind: 'id', width: 8, required: true };

/** A compiled layout: fields with their offsets inside the record (byte 0 is the version). */
export interface Layout {
  readonly version: number;
  readonly fields: readonly (FieldSpec & { readonly offset: number })[];
  /** Field offsets by name. */
  readonly byName: ReadonlyMap<string, FieldSpec & { readonly offset: number }>;
  /** Length of the stored member (version byte + fields). */
  readonly memberLength: number;
  /** Length of the wire record (member + user id). */
  readonly recordLength: number;
}

/** Compiles a version's field list into offsets. */
export function compileLayout(version: number, fields: readonly FieldSpec[]): Layout {
  if (!Number.isInteger(version) || version < 1 || version > 255) {
    throw new RangeError(
      `Layout version ${version} must be an integer 1..255 (it is the record's first byte).`,
    );
  }
  let offset = 1;
  const out: (FieldSpec & { offset: number })[] = [];
  for (const f of fields) {
    out.push({ ...f, offset });
    offset += f.width;
  }
  return {
    version,
    fields: out,
    byName: new Map(out.map((f) => [f.name, f])),
    memberLength: offset,
    recordLength: offset + USER_ID_FIELD.width,
  };
}

/** A set of layout versions; the highest is what encoders write. */
export class EventSchema {
  readonly layouts: ReadonlyMap<number, Layout>;
  readonly current: Layout;
  /** Every dimension name of any version (timestamp excluded: it is the time axis, not a dimension). */
  readonly dimensions: readonly string[];

  constructor(versions: Readonly<Record<number, readonly FieldSpec[]>>) {
    const layouts = new Map<number, Layout>();
    for (const [v, fields] of Object.entries(versions))
      layouts.set(Number(v), compileLayout(Number(v), fields));
    const current = [...layouts.values()].sort((a, b) => b.version - a.version)[0];
    if (!current) throw new RangeError('An event schema needs at least one layout version.');
    for (const layout of layouts.values()) {
      if (layout.fields[0]?.name !== 'timestamp' || layout.fields[0].width !== 8) {
        throw new RangeError(`Layout v${layout.version}: the first field must be the u64 timestamp.`);
      }
    }
    this.layouts = layouts;
    this.current = current;
    const dims = new Set<string>();
    for (const l of layouts.values()) for (const f of l.fields) if (f.kind !== 'timestamp') dims.add(f.name);
    this.dimensions = [...dims];
  }

  /** Adds a version with extra dimensions appended (the way to extend the schema). */
  extend(version: number, added: readonly FieldSpec[]): EventSchema {
    const versions: Record<number, readonly FieldSpec[]> = {};
    for (const [v, l] of this.layouts) versions[v] = l.fields;
    versions[version] = [...this.current.fields.map(({ offset: _o, ...f }) => f), ...added];
    return new EventSchema(versions);
  }

  /** The spec of a dimension (from the newest layout that has it), or undefined. */
  dimension(name: string): FieldSpec | undefined {
    return this.specs.get(name);
  }

  private get specs(): Map<string, FieldSpec> {
    if (!this.specCache) {
      this.specCache = new Map();
      for (const l of [...this.layouts.values()].sort((a, b) => a.version - b.version)) {
        for (const f of l.fields) if (f.kind !== 'timestamp') this.specCache.set(f.name, f);
      }
    }
    return this.specCache;
  }

  private specCache: Map<string, FieldSpec> | undefined;
}

/**
 * The action-event schema Paceline uses: v1; v2 adds the device and household ids; v3 the stream
 * session id. Every identity kind's field (shared/counting/identities.ts) is in the newest layout.
 */
export const EVENT_LAYOUTS: Readonly<Record<number, readonly FieldSpec[]>> = {
  1: v1Fields,
  2: v2Fields,
  3: v3Fields,
};
/** The schema built from {@link EVENT_LAYOUTS}. */
export const actionEventSchema = new EventSchema(EVENT_LAYOUTS);

/** Stable reason codes of {@link ActionEventError}. */
export type ActionEventReason =
  | 'counting.empty-record'
  | 'counting.unknown-version'
  | 'counting.wrong-length'
  | 'counting.invalid-field'
  | 'counting.timestamp-out-of-range'
  | 'counting.timestamp-in-future'
  | 'counting.timestamp-not-ms';

/**
 * Largest timestamp an event may carry: 2^48 − 1 ms (year 10889). The field is a u64 on the wire,
 * but every reader — decoder, counting scan, cap scan, the ingest script, other languages — reads
 * its low 48 bits, so validation rejects anything wider instead of letting a reader truncate it
 * into a plausible recent time. No real millisecond clock comes near it; microseconds (≥ 2^48
 * for any date after 1978) and nanoseconds always exceed it, which is how those unit mistakes are
 * caught.
 */
export const MAX_TIMESTAMP_MS = 2 ** 48 - 1;

/** Epoch ms of 2000-01-01 and 2200-01-01: the span a plausible event time falls in. */
const PLAUSIBLE_FROM = Date.UTC(2000, 0, 1);
const PLAUSIBLE_TO = Date.UTC(2200, 0, 1);

/**
 * When a timestamp that is not plausible epoch milliseconds would be plausible in another unit,
 * says so ("this looks like microseconds since the epoch (… = 2026-11-21T12:00:00.000Z)"); else
 * an empty string. For error messages: a producer that sends the wrong unit sees the fix.
 */
export function timestampUnitHint(value: bigint | number): string {
  const v = BigInt(value);
  const units: readonly [string, bigint][] = [
    ['seconds', -1000n],
    ['microseconds', 1000n],
    ['nanoseconds', 1_000_000n],
  ];
  for (const [unit, factor] of units) {
    const ms = factor < 0n ? v * -factor : v / factor;
    if (ms >= BigInt(PLAUSIBLE_FROM) && ms < BigInt(PLAUSIBLE_TO)) {
      return ` This looks like ${unit} since the epoch (${v} ${unit} = ${new Date(Number(ms)).toISOString()}): send epoch milliseconds.`;
    }
  }
  return '';
}

/** A record that is not a valid action event; quarantined by the ingest function. */
export class ActionEventError extends MalformedRecordError {
  override readonly name = 'ActionEventError';
  constructor(
    override readonly reasonCode: ActionEventReason,
    /** The offending field, when one is to blame. */
    readonly field: string | undefined,
    message: string,
  ) {
    super(reasonCode, message);
  }
}

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

function validateRecord(buf: Buffer, layout: Layout): ActionEventError | undefined {
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
