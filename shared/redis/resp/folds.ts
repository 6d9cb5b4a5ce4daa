/**
 * Visitors over a reply the parser framed (shared/redis/resp/parser.ts): each turns the tokens of
 * one reply into what its caller wants, decoding nothing else.
 *
 * - {@link bulkOf}: a bulk string as a view of the bytes (the cap check folds a user's log from it).
 * - {@link foldHash}: a hash (HGETALL's field/value pairs, or HMGET's values) into a
 *   {@link HashVisitor}'s result (the pacer folds live spend into a few numbers).
 * - {@link replyValue}: any reply as a JavaScript value (script replies).
 */
import { ARRAY, BULK, BULK_ARRAY, ERROR, INTEGER, parseIntBytes } from './parser.js';

/** A reply as a script returns it: integer, bulk string, nil, array. */
export type RespValue = number | string | null | RespValue[];

/** The bulk string reply of token 0 as a view of `buf` (`null`: a nil), `undefined` when not one. */
export function bulkOf(buf: Buffer, t: Int32Array): Buffer | null | undefined {
  if (t[0] !== BULK) return undefined;
  const start = t[1] as number;
  return start < 0 ? null : buf.subarray(start, t[2] as number);
}

/** Receives one hash's fields as byte ranges of `buf` (valid only during the call). */
export interface HashVisitor<T> {
  /**
   * A new hash begins (`exists` false for a missing key: HGETALL's empty reply); `index` is the
   * key's position in the read (a visitor whose commands differ per key knows which reply this is).
   */
  begin(exists: boolean, index: number): void;
  field(buf: Buffer, fieldStart: number, fieldEnd: number, valueStart: number, valueEnd: number): void;
  /**
   * With a command other than HGETALL (an HMGET of fixed fields): each element of the reply in
   * order instead of field/value pairs, `start` −1 for a nil. When present, `field` is not called.
   */
  item?(index: number, buf: Buffer, start: number, end: number): void;
  /** The hash is complete: the folded result. */
  end(): T;
  /** A hash read through ioredis instead (fallback after an error reply: its whole HGETALL). */
  fromObject(hash: Readonly<Record<string, string>>, index: number): T;
}

/** {@link foldHash}'s answer for a reply that is not an array of bulk strings. */
export const NOT_A_HASH: unique symbol = Symbol('not a hash');

/**
 * Folds a reply (an array of bulk strings; a nil array reads as an empty hash, as HGETALL's
 * `*0`) with `visitor`; {@link NOT_A_HASH} for any other reply, which the caller re-reads.
 */
export function foldHash<T>(
  buf: Buffer,
  t: Int32Array,
  count: number,
  visitor: HashVisitor<T>,
  index: number,
): T | typeof NOT_A_HASH {
  // The parser marked the arrays of bulk strings: no second look at the elements.
  if (t[0] !== BULK_ARRAY) return t[0] === ARRAY && t[1] === -1 ? emptyHash(visitor, index) : NOT_A_HASH;
  const n = count - 1;
  visitor.begin(n > 0, index);
  if (visitor.item) {
    for (let i = 0; i < n; i++) visitor.item(i, buf, t[3 * i + 4] as number, t[3 * i + 5] as number);
  } else {
    for (let i = 4; i + 5 <= 3 * count; i += 6) {
      visitor.field(buf, t[i] as number, t[i + 1] as number, t[i + 3] as number, t[i + 4] as number);
    }
  }
  return visitor.end();
}

/** A nil array: an empty hash, as HGETALL's `*0`. */
function emptyHash<T>(visitor: HashVisitor<T>, index: number): T {
  visitor.begin(false, index);
  return visitor.end();
}

/**
 * Token `i` as a value (integers as numbers, bulk and simple strings decoded as UTF-8, nils as
 * `null`, an error inside an array as its line); sets {@link next} to the token after it.
 */
function valueAt(buf: Buffer, t: Int32Array, i: number): RespValue {
  const kind = t[3 * i];
  const a = t[3 * i + 1] as number;
  const b = t[3 * i + 2] as number;
  if (kind === ARRAY || kind === BULK_ARRAY) {
    if (a < 0) {
      next = i + 1;
      return null;
    }
    const items: RespValue[] = new Array(a);
    let j = i + 1;
    for (let k = 0; k < a; k++) {
      items[k] = valueAt(buf, t, j);
      j = next;
    }
    next = j;
    return items;
  }
  next = i + 1;
  if (kind === INTEGER) return parseIntBytes(buf, a, b);
  if (kind === BULK && a < 0) return null;
  return buf.toString('utf8', a, b);
}

/** The token after the value {@link valueAt} read last. */
let next = 0;

/** The whole reply as a value (a top-level error line comes back as its text: check first). */
export function replyValue(buf: Buffer, t: Int32Array): RespValue {
  return valueAt(buf, t, 0);
}

/** Token 0's error line, or `null` when the reply is not an error. */
export function errorLineOf(buf: Buffer, t: Int32Array): string | null {
  return t[0] === ERROR ? buf.toString('utf8', t[1] as number, t[2] as number) : null;
}
