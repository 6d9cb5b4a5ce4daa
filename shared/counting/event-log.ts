/**
 * Reading a user's packed event log: the errors, value keys and layout lookup that count queries
 * (query.ts) and cap checks (caps.ts) share.
 */
import { errorKind } from '../errors.js';
import { rawValue } from './event-encode.js';
import type { EventSchema, FieldSpec, Layout } from './schema.js';

/** A half-open time range [from, to), epoch ms. */
export interface TimeRange {
  readonly from: number;
  readonly to: number;
}

/** Thrown for a query that cannot be answered as asked; the message says what to change. */
export class InvalidCountQueryError extends errorKind('InvalidCountQueryError', 'counting.invalid-query') {}

export function specOf(schema: EventSchema, name: string, where: string): FieldSpec {
  const spec = schema.dimension(name);
  if (!spec) {
    throw new InvalidCountQueryError(
      `${where}: unknown dimension "${name}". Dimensions are: ${schema.dimensions.join(', ')}.`,
    );
  }
  return spec;
}

/** Validates a time range; ranges must be integer ms with from < to. */
export function checkRange(range: TimeRange, where: string): void {
  if (!Number.isSafeInteger(range.from) || !Number.isSafeInteger(range.to) || range.from >= range.to) {
    throw new InvalidCountQueryError(
      `${where}: range [${range.from}, ${range.to}) is invalid: give integer epoch ms with from < to.`,
    );
  }
}

/**
 * A dimension value as a Map/Set key: codes as their number, u64 ids as an exact number when
 * below 2^53 (every real id) else a latin1 string, other widths as latin1 strings. Numbers make
 * the per-event lookups allocation-free, which is most of a cap check's CPU.
 */
export type ValueKey = number | string;

/** The key of the value of `width` bytes at `offset`. */
export function keyAt(buf: Buffer, offset: number, width: number): ValueKey {
  if (width === 1) return buf[offset] as number;
  if (width === 8) {
    const hi = buf.readUInt32BE(offset);
    if (hi < 0x200000) return hi * 4294967296 + buf.readUInt32BE(offset + 4);
  }
  // The 's' prefix keeps string keys distinct from numeric ones inside joined group keys.
  return `s${buf.toString('latin1', offset, offset + width)}`;
}

/** The key of a caller-given value of a dimension (throws InvalidActionFieldError naming the field). */
export function valueKey(spec: FieldSpec, value: unknown): ValueKey {
  // Fast paths (a cap check keys hundreds of caps): equal to what keyAt gives for the bytes.
  if (spec.kind === 'id') {
    if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return value;
    if (typeof value === 'string' && value.length <= 15 && /^\d+$/.test(value)) return Number(value);
  } else if (spec.kind === 'code') {
    if (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= 255) return value;
    const named = typeof value === 'string' ? spec.names?.[value] : undefined;
    if (named !== undefined) return named;
  }
  return keyAt(Buffer.from(rawValue(spec, value), 'latin1'), 0, spec.width);
}

/** Thrown when a user's event log holds a layout version this reader does not know. */
export class UnreadableEventLogError extends errorKind(
  'UnreadableEventLogError',
  'counting.unreadable-event-log',
) {}

/** The accessors of the layout version at `pos`, built on first sight (unknown version → throws). */
export function layoutAt<T extends { readonly length: number }>(
  cache: (T | undefined)[],
  log: Buffer,
  pos: number,
  schema: EventSchema,
  build: (layout: Layout) => T,
): T {
  const version = log[pos] as number;
  let acc = cache[version];
  if (acc === undefined) {
    const layout = schema.layouts.get(version);
    if (!layout) {
      // Members are self-delimiting only through their version's length: an unknown version
      // makes the rest of the log unreadable. Deploy readers before writers of a new version.
      throw new UnreadableEventLogError(
        `Event log holds layout v${version} at byte ${pos}; this reader knows v${[...schema.layouts.keys()].join(', v')}. ` +
          'Upgrade this reader (readers must be deployed before producers write a new layout).',
      );
    }
    acc = build(layout);
    cache[version] = acc;
  }
  return acc;
}

/** Concatenates members into a packed log (members are self-delimiting by their version). */
export function packLog(members: Buffer | readonly Buffer[]): Buffer {
  return Buffer.isBuffer(members) ? members : Buffer.concat(members as readonly Uint8Array[]);
}
