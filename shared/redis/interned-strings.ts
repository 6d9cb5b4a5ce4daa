/**
 * Strings decoded from reply bytes, interned by those bytes: the same bytes give back the same
 * string object. For readers that decode the same hashes over and over (the ad servers'
 * refresh-ahead re-reads every cached campaign hash each tick, and most of its bytes — field names,
 * curves — are unchanged): no copy of an unchanged text is allocated, and a cache keyed by the
 * string finds it by identity, without hashing it again.
 *
 * Two generations, rotated by the caller (once per read round): a string not seen during a whole
 * generation is dropped at the next rotation, so the table holds what is live, about twice over.
 */
export class InternedStrings {
  private strings = new Map<number, Interned>();
  private lastStrings = new Map<number, Interned>();

  /** Starts a new generation. */
  rotate(): void {
    this.lastStrings = this.strings;
    this.strings = new Map();
  }

  /** Interned strings held (both generations; tests, metrics). */
  get size(): number {
    return this.strings.size + this.lastStrings.size;
  }

  /** The UTF-8 string of `buf[start, end)`: the same object as last time for the same bytes. */
  get(buf: Buffer, start: number, end: number): string {
    // FNV-1a over the length and a sample of the bytes (every 8th, and the last 8): the bytes
    // themselves are compared on a hit, so the sample only decides how often two texts collide
    // (a collision costs a decode and replaces the entry, never a wrong string).
    const len = end - start;
    let h = Math.imul(0x811c9dc5 ^ len, 0x01000193);
    for (let i = start; i < end; i += 8) h = Math.imul(h ^ (buf[i] as number), 0x01000193);
    for (let i = Math.max(start, end - 8); i < end; i++) h = Math.imul(h ^ (buf[i] as number), 0x01000193);
    let hit = this.strings.get(h);
    if (hit === undefined) {
      hit = this.lastStrings.get(h);
      if (hit !== undefined) this.strings.set(h, hit);
    }
    if (hit !== undefined && hit.bytes.length === len && sameBytes(hit.bytes, buf, start, len))
      return hit.text;
    // A copy: `buf` is usually a connection's reused read buffer.
    const bytes = Buffer.from(buf.subarray(start, end));
    const text = bytes.toString('utf8');
    this.strings.set(h, { bytes, text });
    return text;
  }
}

/** An interned string and its bytes. */
interface Interned {
  readonly bytes: Buffer;
  readonly text: string;
}

/** `a` equals `buf[start, start + len)` (a loop for short texts: the native compare costs more). */
function sameBytes(a: Buffer, buf: Buffer, start: number, len: number): boolean {
  if (len > 32) return buf.compare(a, 0, len, start, start + len) === 0;
  for (let i = 0; i < len; i++) if (a[i] !== buf[start + i]) return false;
  return true;
}
