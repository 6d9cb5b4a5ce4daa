/**
 * InternedStrings: the same bytes give back the same string object (wherever they sit in the
 * buffer, across generations), different bytes a different, correct string — also when they differ
 * only where the hash does not sample — and a string unused for a whole generation is dropped.
 */
import { describe, expect, it } from 'vitest';
import { InternedStrings } from '../../../shared/redis/interned-strings.js';

function at(text: string, offset: number): [Buffer, number, number] {
  const bytes = Buffer.from(text);
  const buf = Buffer.alloc(offset + bytes.length + 5, 0x2a);
  bytes.copy(buf, offset);
  return [buf, offset, offset + bytes.length];
}

describe('InternedStrings', () => {
  it('returns the same object for the same bytes, wherever they are', () => {
    const strings = new InternedStrings();
    const curve = '1772600400000,0;3600000,41666;3600000,41667;3600000,41667;3600000,41666';
    const a = strings.get(...at(curve, 0));
    const b = strings.get(...at(curve, 17));
    expect(a).toBe(curve);
    expect(b).toBe(a);
    expect(strings.get(...at('é:ü', 3))).toBe('é:ü');
    expect(strings.get(...at('', 2))).toBe('');
  });

  it('gives different bytes their own string, also where the hash does not sample', () => {
    const strings = new InternedStrings();
    // 40 bytes: the hash samples offsets 0, 8, 16, 24, 32 and the last 8; offset 3 is not sampled.
    const base = 'abcdefghijklmnopqrstuvwxyz0123456789ABCD';
    const other = `${base.slice(0, 3)}X${base.slice(4)}`;
    const short = 'p:campaign';
    const shortOther = 'p:cAmpaign';
    expect(strings.get(...at(base, 0))).toBe(base);
    expect(strings.get(...at(other, 0))).toBe(other);
    expect(strings.get(...at(base, 0))).toBe(base);
    expect(strings.get(...at(short, 1))).toBe(short);
    expect(strings.get(...at(shortOther, 1))).toBe(shortOther);
  });

  it('keeps a string used in the last generation and drops one unused for a whole generation', () => {
    const strings = new InternedStrings();
    const kept = 'e:campaign';
    const dropped = 'e:arm:A';
    const first = strings.get(...at(kept, 0));
    strings.get(...at(dropped, 0));
    strings.rotate();
    expect(strings.get(...at(kept, 4))).toBe(first);
    strings.rotate();
    expect(strings.size).toBe(1);
    expect(strings.get(...at(kept, 0))).toBe(first);
  });
});
