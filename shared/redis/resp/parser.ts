/**
 * The one RESP (v2) reply parser of the raw layer: incremental (bytes arrive in chunks split
 * anywhere) and allocation-free on the hot path. It frames each complete reply as a flat list of
 * tokens over the bytes — one per value, arrays followed by their elements — and hands that view
 * to a handler, which folds it with a visitor (shared/redis/resp/folds.ts: a bulk string, a hash,
 * any value). Nothing is decoded the fold does not ask for: the pacer folds ~5 M hash fields per
 * tick straight from byte ranges.
 *
 * - A reply whole in the chunk is handed over as a view of the chunk (no copy). One split across
 *   chunks is gathered in a carry buffer reused from reply to reply (one larger than
 *   `maxReusedBytes` gets its own, dropped after it), rescanned only once the bytes it is known to
 *   need are in and at least doubling between scans (a large reply costs linear time).
 * - Bytes that are not RESP stop the parser: the connection is dropped ({@link RespParser.feed}).
 */

/** Token kinds: the RESP type bytes. */
export const SIMPLE = 0x2b; // +
export const ERROR = 0x2d; // -
export const INTEGER = 0x3a; // :
export const BULK = 0x24; // $
export const ARRAY = 0x2a; // *
/** An array whose elements are all bulk strings or nils (a hash's reply): told apart while scanning. */
export const BULK_ARRAY = 0x12a;

/**
 * A parsed reply: token `i` is `kind = t[3i]`, `a = t[3i + 1]`, `b = t[3i + 2]`:
 * SIMPLE / ERROR / INTEGER: the line's bytes `[a, b)`; BULK: the value's bytes `[a, b)`, `a` −1 for
 * a nil; ARRAY (or BULK_ARRAY, when every element is a BULK): `a` elements (−1 for a nil array),
 * `b` the index of the token after its last element (to skip it). Valid only during the handler's call (both buffer and tokens are reused).
 */
export type ReplyHandler = (buf: Buffer, tokens: Int32Array, count: number) => void;

/** Parses a decimal integer (optionally negative) from `buf[start, end)`; NaN when not one. */
export function parseIntBytes(buf: Buffer, start: number, end: number): number {
  let i = start;
  let negative = false;
  if (buf[i] === 0x2d) {
    negative = true;
    i++;
  }
  if (i >= end) return Number.NaN;
  let n = 0;
  for (; i < end; i++) {
    const d = (buf[i] as number) - 0x30;
    if (d < 0 || d > 9) return Number.NaN;
    n = n * 10 + d;
  }
  return negative ? -n : n;
}

const CR = 0x0d;
const INCOMPLETE = -1;
const INVALID = -2;

/**
 * Scan state, module-wide rather than per parser: one reply is scanned at a time (synchronously),
 * and a returned tuple per value was most of the garbage of a pacer's read.
 */
let tokens = new Int32Array(3 * 1024);
let tokenCount = 0;
/** After an INCOMPLETE scan: the buffer length the reply needs at least. */
let needed = 0;
/** After an INVALID scan: what was wrong. */
let invalid = '';

/** Makes room for `count` tokens. */
function grow(count: number): void {
  const grown = new Int32Array(Math.max(3 * count, tokens.length * 2));
  grown.set(tokens);
  tokens = grown;
}

function token(kind: number, a: number, b: number): number {
  const i = tokenCount++;
  if (3 * tokenCount > tokens.length) grow(tokenCount);
  tokens[3 * i] = kind;
  tokens[3 * i + 1] = a;
  tokens[3 * i + 2] = b;
  return i;
}

/** Scans one value at `pos` of `buf[0, len)`: the position after it, INCOMPLETE or INVALID. */
function scanValue(buf: Buffer, pos: number, len: number): number {
  // The lines are a few bytes: a JavaScript scan beats the native indexOf call.
  let cr = pos + 1;
  while (cr < len && buf[cr] !== CR) cr++;
  if (cr + 1 >= len) {
    needed = len + 1;
    return INCOMPLETE;
  }
  const after = cr + 2;
  const type = buf[pos];
  if (type === BULK) {
    const n = parseIntBytes(buf, pos + 1, cr);
    if (n === -1) {
      token(BULK, -1, -1);
      return after;
    }
    if (!(n >= 0 && n < 0x7fffffff)) {
      invalid = `a bulk length of ${buf.toString('latin1', pos + 1, cr)}`;
      return INVALID;
    }
    const end = after + n + 2;
    if (end > len) {
      needed = end;
      return INCOMPLETE;
    }
    token(BULK, after, after + n);
    return end;
  }
  if (type === ARRAY) {
    const n = parseIntBytes(buf, pos + 1, cr);
    if (n === -1) {
      token(ARRAY, -1, tokenCount + 1);
      return after;
    }
    if (!(n >= 0 && n < 0x7fffffff)) {
      invalid = `an array length of ${buf.toString('latin1', pos + 1, cr)}`;
      return INVALID;
    }
    const t = token(ARRAY, n, 0);
    // Room for every element at once (more for nested ones is made as they come).
    if (3 * (tokenCount + n) > tokens.length) grow(tokenCount + n);
    // Locals in the loop: module variables are context loads and stores on every access.
    const tk = tokens;
    let flat = true;
    let p = after;
    for (let i = 0; i < n; i++) {
      if (p >= len) {
        needed = len + 1;
        return INCOMPLETE;
      }
      if (buf[p] === BULK && buf[p + 1] !== 0x2d) {
        // The common element (a hash's field or value): its length parsed in the same pass that
        // finds the line's end, its token written in place.
        let q = p + 1;
        let length = 0;
        let c = buf[q] as number;
        while (c >= 0x30 && c <= 0x39) {
          length = length * 10 + c - 0x30;
          c = buf[++q] as number;
        }
        if (q + 1 >= len) {
          needed = len + 1;
          return INCOMPLETE;
        }
        if (c !== CR || q === p + 1 || length >= 0x7fffffff) {
          invalid = `a bulk length of ${buf.toString('latin1', p + 1, Math.min(q + 1, len))}`;
          return INVALID;
        }
        const start = q + 2;
        const end = start + length + 2;
        if (end > len) {
          needed = end;
          return INCOMPLETE;
        }
        const k = 3 * tokenCount++;
        tk[k] = BULK;
        tk[k + 1] = start;
        tk[k + 2] = start + length;
        p = end;
        continue;
      }
      const element = tokenCount;
      p = scanValue(buf, p, len);
      if (p < 0) return p;
      if (tokens[3 * element] !== BULK) flat = false;
      // A nested value may have grown the tokens: later elements go to the new array.
      if (tokens !== tk) return scanRest(buf, p, len, t, n - i - 1);
    }
    if (flat) tk[3 * t] = BULK_ARRAY;
    tokens[3 * t + 2] = tokenCount;
    return p;
  }
  if (type === INTEGER || type === SIMPLE || type === ERROR) {
    token(type, pos + 1, cr);
    return after;
  }
  invalid = `an unexpected reply type '${String.fromCharCode(type as number)}' (byte ${type})`;
  return INVALID;
}

/** The rest of array token `t` (`left` elements from `pos`), element by element. */
function scanRest(buf: Buffer, pos: number, len: number, t: number, left: number): number {
  let p = pos;
  for (let i = 0; i < left; i++) {
    if (p >= len) {
      needed = len + 1;
      return INCOMPLETE;
    }
    p = scanValue(buf, p, len);
    if (p < 0) return p;
  }
  tokens[3 * t + 2] = tokenCount;
  return p;
}

/** Options of {@link RespParser}. */
export interface RespParserOptions {
  /** Each complete reply, in order. */
  readonly reply: ReplyHandler;
  /** The bytes are not RESP (`what` says how); the parser stops. */
  readonly invalid: (what: string) => void;
  /** Largest split reply gathered in the reused carry buffer. @default 4 MiB */
  readonly maxReusedBytes?: number;
}

/** Room kept past a split reply's known length for bytes read with its end (a socket read). */
const READ_SLACK = 256 * 1024;

/** Smallest step by which a split reply's carry grows before it is scanned again. */
const MIN_TAKE = 4096;

/** An incremental RESP parser for one connection (see the module comment). */
export class RespParser {
  /** The start of a split reply (a copy: the chunks may be a reused read buffer). */
  private carry: Buffer = Buffer.alloc(0);
  private carryLength = 0;
  /** The carry's length at which it is worth scanning again. */
  private carryNeeded = 0;
  private stopped = false;
  private readonly maxReusedBytes: number;

  constructor(private readonly options: RespParserOptions) {
    this.maxReusedBytes = options.maxReusedBytes ?? 4 * 1024 * 1024;
  }

  /** Stops parsing (the connection is dropped): the rest of this chunk and later ones are ignored. */
  stop(): void {
    this.stopped = true;
  }

  /** Parses `chunk` (valid only during the call), handing each complete reply to the handler. */
  feed(chunk: Buffer): void {
    let pos = 0;
    if (this.carryLength > 0) {
      pos = this.feedCarry(chunk);
      if (pos < 0) return;
    }
    const len = chunk.length;
    while (pos < len && !this.stopped) {
      tokenCount = 0;
      const end = scanValue(chunk, pos, len);
      if (end === INCOMPLETE) {
        this.keep(chunk, pos, len, needed - pos);
        return;
      }
      if (end === INVALID) {
        this.fail();
        return;
      }
      this.options.reply(chunk, tokens, tokenCount);
      pos = end;
    }
  }

  /**
   * Appends to the split reply until it is complete and hands it over: the position in `chunk`
   * where the next reply starts, or −1 when the chunk is used up (or the parser stopped).
   */
  private feedCarry(chunk: Buffer): number {
    let pos = 0;
    const len = chunk.length;
    while (pos < len) {
      // At least double between scans: a reply of many small values split over many reads is
      // scanned O(log n) times, not once per read.
      const want = Math.max(this.carryNeeded - this.carryLength, this.carryLength, MIN_TAKE);
      const take = Math.min(len - pos, want);
      this.append(chunk, pos, pos + take);
      pos += take;
      if (this.carryLength < this.carryNeeded) continue;
      tokenCount = 0;
      const end = scanValue(this.carry, 0, this.carryLength);
      if (end === INCOMPLETE) {
        this.carryNeeded = needed;
        continue;
      }
      if (end === INVALID) {
        this.fail();
        return -1;
      }
      // Bytes taken past the reply's end are still in `chunk`: parse them from there.
      const overshoot = this.carryLength - end;
      const carry = this.carry;
      this.carryLength = 0;
      if (carry.length > this.maxReusedBytes) this.carry = Buffer.alloc(0);
      this.options.reply(carry, tokens, tokenCount);
      return this.stopped ? -1 : pos - overshoot;
    }
    return -1;
  }

  /** Starts a carry with `chunk[from, to)`, room for `expected` bytes. */
  private keep(chunk: Buffer, from: number, to: number, expected: number): void {
    this.carryLength = 0;
    // Room for the reply and the next replies' bytes read with its end (a read is at most
    // READ_SLACK bytes), so a reply of known length is gathered without growing the buffer.
    this.reserve(Math.max(expected + READ_SLACK, to - from));
    this.append(chunk, from, to);
    this.carryNeeded = Math.max(expected, to - from + 1);
  }

  private reserve(bytes: number): void {
    if (this.carry.length >= bytes) return;
    const grown = Buffer.allocUnsafe(Math.max(bytes, 2 * this.carry.length, MIN_TAKE));
    this.carry.copy(grown, 0, 0, this.carryLength);
    this.carry = grown;
  }

  private append(chunk: Buffer, from: number, to: number): void {
    this.reserve(this.carryLength + to - from);
    chunk.copy(this.carry, this.carryLength, from, to);
    this.carryLength += to - from;
  }

  private fail(): void {
    this.stopped = true;
    this.carryLength = 0;
    this.options.invalid(invalid);
  }
}
