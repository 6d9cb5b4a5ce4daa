/**
 * The ingest script's one data argument: users' arrivals packed with length prefixes
 * (docs/counting.md, "Writes"). The script walks it the way {@link packArrivals} writes it.
 */
import type { Result } from 'ioredis';
import { actionEventSchema, type EventSchema } from './schema.js';

/** Arguments of the ingest script: the first user's keys (routing), then the call's data. */
type CountingIngestArgs = [
  setKey: string,
  logKey: string,
  trimBeforeMs: string,
  settings: string,
  keyPrefix: string,
  arrivals: Buffer,
];

/** The script's totals over the call's users: counted, re-stamped, repaired, migrated from v1. */
export type IngestReply = [added: number, restamped: number, repaired: number, migrated: number];

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /**
     * Adds the arrivals of one or more users (dedup by identity within the window), repairs a
     * partially lost key group, and maintains (trim, compaction or day summary, TTL, v1 import) the users
     * flagged for it. KEYS: the first user's set and log (they route the call). ARGV:
     * trimBeforeMs, settings (`<ttlMs> <windowMs> <importV1 0|1> <daySummary 0|1> <version:memberLength,…>`), the
     * key prefix, and the packed arrivals ({@link packArrivals}). Every user's keys must live on
     * the node that receives the call: the script checks them all before writing anything.
     */
    countingIngest(...args: CountingIngestArgs): Result<IngestReply, Context>;
  }
}

/**
 * Most arrivals one ingest script call carries (a user with more goes alone): a script blocks
 * Redis while it runs, and cap checks wait behind it — 256 arrivals are ≈ 1 ms of Redis time on
 * a slow host, while the per-call cost is already amortised to a fraction of a µs per event.
 */
export const MAX_ARRIVALS_PER_CALL = 256;

/** Longest user id (UTF-8 bytes) the packed arrivals argument carries (ids are decimal u64s). */
export const MAX_USER_ID_BYTES = 255;

/** One user's arrivals in one ingest call, in arrival order. */
export interface UserArrivals {
  readonly userId: string;
  /** Maintain the user's key group in this call (trim, compaction or day summary, TTL, v1 import). */
  readonly maintain: boolean;
  /** Stored members (wire records without the user id). */
  readonly members: readonly Buffer[];
}

/**
 * Packs users' arrivals into the ingest script's one data argument: per user
 * `[flags u8: 1 = maintain][user id length u8][user id, UTF-8][arrival count u32 BE]` then the
 * members back to back (each delimited by its layout version's length, as in the log). Length
 * prefixes, not separators: any byte may appear in an id or a member. Throws RangeError for an
 * empty or too long user id, or a member whose length is not its layout version's.
 */
export function packArrivals(
  users: readonly UserArrivals[],
  schema: EventSchema = actionEventSchema,
): Buffer {
  const lengths: number[] = [];
  for (const layout of schema.layouts.values()) lengths[layout.version] = layout.memberLength;
  const idLengths: number[] = new Array(users.length);
  let size = 0;
  for (let i = 0; i < users.length; i++) {
    const u = users[i] as UserArrivals;
    const idLength = Buffer.byteLength(u.userId);
    if (idLength === 0 || idLength > MAX_USER_ID_BYTES) {
      throw new RangeError(
        `User id ${JSON.stringify(u.userId)} is ${idLength} bytes: give 1 to ${MAX_USER_ID_BYTES} bytes ` +
          '(decodeRecord gives the decimal u64).',
      );
    }
    idLengths[i] = idLength;
    size += 6 + idLength;
    for (const m of u.members) {
      const expected = lengths[m[0] as number];
      if (expected === undefined || m.length !== expected) {
        throw new RangeError(
          `Action event member of user ${u.userId} has layout version ${m[0]} and ${m.length} bytes: ` +
            (expected === undefined
              ? `this store knows versions ${[...schema.layouts.keys()].join(', ')}.`
              : `that version's members are ${expected} bytes.`) +
            ' Build records with decodeRecord.',
        );
      }
      size += expected;
    }
  }
  const out = Buffer.allocUnsafe(size);
  let pos = 0;
  for (let i = 0; i < users.length; i++) {
    const u = users[i] as UserArrivals;
    const idLength = idLengths[i] as number;
    out[pos] = u.maintain ? 1 : 0;
    out[pos + 1] = idLength;
    out.write(u.userId, pos + 2, idLength, 'utf8');
    pos = out.writeUInt32BE(u.members.length, pos + 2 + idLength);
    for (const m of u.members) pos += m.copy(out, pos);
  }
  return out;
}
