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
 * Records are written by `event-encode.ts` (producers) and read and validated by
 * `event-decode.ts` (the ingest function), both from the layouts declared here.
 *
 * Extending: add a layout version whose field list is the previous one plus the new dimension(s)
 * (appended before the user id). Old records keep decoding; readers give a dimension an event's
 * version lacks its zero value.
 */
import { MalformedRecordError } from '../quarantine/quarantine.js';

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
