/**
 * Decimal integers written straight into a byte buffer: the encodings the pacer produces by the
 * 100,000 per tick (controller states, E(t) curves) are read out of one buffer as one flat string,
 * instead of template strings whose ropes are flattened later by comparisons and joins (~3 µs per
 * state in a CPU profile of `npm run bench -- pacer`). The text is the one `${n}` gives.
 */

/**
 * Writes the byte `sep` and the decimal form of `n` (as `${n}` writes a safe integer, −0 as 0) at
 * `p`; the position after it, or −1 once `p` is −1 or `n` is not a safe integer. Digits come from int32
 * arithmetic (a double's `% 10` is several times slower): values of 10^8 and more are written as
 * two parts, the high one (< 10^8 for a safe integer) and eight padded low digits.
 */
export function writeField(b: Buffer, p: number, sep: number, n: number): number {
  if (p < 0 || !Number.isSafeInteger(n)) return -1;
  let at = p;
  b[at++] = sep;
  let v = n;
  if (v < 0) {
    b[at++] = 0x2d;
    v = -v;
  }
  if (v < 1e8) return writeDigits(b, at, v | 0);
  const high = Math.floor(v / 1e8);
  at = writeDigits(b, at, high | 0);
  let low = (v - high * 1e8) | 0;
  for (let i = at + 7; i >= at; i--) {
    const q = (low / 10) | 0;
    b[i] = 0x30 + low - q * 10;
    low = q;
  }
  return at + 8;
}

/** Writes the digits of `v` (0 ≤ v < 10^8) at `p`; the position after them. */
function writeDigits(b: Buffer, p: number, v: number): number {
  let digits = 1;
  for (let t = 10; t <= v; t *= 10) digits++;
  const end = p + digits;
  let rest = v;
  for (let i = end - 1; i >= p; i--) {
    const q = (rest / 10) | 0;
    b[i] = 0x30 + rest - q * 10;
    rest = q;
  }
  return end;
}
