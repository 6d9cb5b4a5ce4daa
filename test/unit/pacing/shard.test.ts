import { describe, expect, it } from 'vitest';
import {
  accountShardKey,
  fnv1a32,
  InvalidShardCountError,
  pacerShardKey,
  shardOfAccount,
} from '../../../shared/pacing/shard.js';

const utf8 = (s: string) => new TextEncoder().encode(s);

/** FNV-1a with exact BigInt arithmetic: the reference the fast version must match. */
function reference(bytes: Uint8Array): number {
  let h = 0x811c9dc5n;
  for (const b of bytes) h = ((h ^ BigInt(b)) * 16777619n) % 4294967296n;
  return Number(h);
}

describe('fnv1a32', () => {
  it('matches the published test vectors', () => {
    expect(fnv1a32(utf8(''))).toBe(0x811c9dc5);
    expect(fnv1a32(utf8('a'))).toBe(0xe40c292c);
    expect(fnv1a32(utf8('foobar'))).toBe(0xbf9cf968);
  });

  it('matches exact arithmetic on 20,000 ids, non-ASCII included', () => {
    for (let i = 0; i < 20_000; i++) {
      const id = `acct-${i}-${'é'.repeat(i % 5)}${'z'.repeat(i % 13)}`;
      expect(fnv1a32(utf8(id))).toBe(reference(utf8(id)));
    }
  });
});

describe('shards', () => {
  it('spreads accounts evenly over 24 shards', () => {
    const counts = new Array(24).fill(0) as number[];
    for (let i = 0; i < 24_000; i++) {
      const s = shardOfAccount(`account-${i}`, 24);
      counts[s] = (counts[s] ?? 0) + 1;
    }
    for (const c of counts) expect(Math.abs(c - 1000)).toBeLessThan(150);
  });

  it('names the index partition with N so another layout cannot be mistaken for this one', () => {
    expect(pacerShardKey(3, 24)).toBe('24:3');
    expect(accountShardKey('acme', 24)).toBe(`24:${shardOfAccount('acme', 24)}`);
    expect(() => pacerShardKey(24, 24)).toThrow(RangeError);
  });

  it('refuses a shard count that is not a whole number ≥ 1', () => {
    for (const bad of [0, -1, 2.5, Number.NaN]) {
      expect(() => shardOfAccount('a', bad)).toThrow(InvalidShardCountError);
    }
  });
});
