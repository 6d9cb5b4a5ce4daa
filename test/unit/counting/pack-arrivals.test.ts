/**
 * The ingest script's packed data argument (shared/counting/store.ts `packArrivals`): per user
 * `[flags u8][id length u8][id][count u32 BE][members]`. Length prefixes, not separators: ids and
 * members may hold any byte; what cannot be framed is refused with an error naming it.
 */
import { describe, expect, it } from 'vitest';
import { decodeRecord } from '../../../shared/counting/event-decode.js';
import { encodeActionEvent } from '../../../shared/counting/event-encode.js';
import { actionEventSchema, type Layout } from '../../../shared/counting/schema.js';
import { MAX_USER_ID_BYTES, packArrivals, type UserArrivals } from '../../../shared/counting/store.js';

const member = (insertion: number, timestamp = Date.UTC(2026, 10, 21)) =>
  decodeRecord(
    encodeActionEvent({
      userId: 42,
      timestamp,
      insertionId: Buffer.alloc(16, insertion),
      action: 'impression',
      ad: 11,
      adGroup: 7,
      campaign: 3,
      advertiser: 1,
    }),
  ).member;

/** Reads the packed argument back the way the Lua script walks it. */
function unpack(packed: Buffer) {
  const users: { maintain: boolean; userId: string; members: Buffer[] }[] = [];
  let pos = 0;
  while (pos < packed.length) {
    const flags = packed[pos] as number;
    const idLength = packed[pos + 1] as number;
    const userId = packed.toString('utf8', pos + 2, pos + 2 + idLength);
    const count = packed.readUInt32BE(pos + 2 + idLength);
    pos += 6 + idLength;
    const members: Buffer[] = [];
    for (let i = 0; i < count; i++) {
      const length = actionEventSchema.layouts.get(packed[pos] as number)?.memberLength as number;
      members.push(packed.subarray(pos, pos + length));
      pos += length;
    }
    users.push({ maintain: flags === 1, userId, members });
  }
  expect(pos).toBe(packed.length);
  return users;
}

describe('packArrivals', () => {
  it('frames each user (flags, id, count) and its members back to back, in order', () => {
    const users: UserArrivals[] = [
      { userId: '42', maintain: true, members: [member(1), member(2)] },
      { userId: '7', maintain: false, members: [member(3)] },
    ];
    const packed = packArrivals(users);
    const length = (actionEventSchema.layouts.get(1) as Layout).memberLength;
    expect(packed.length).toBe(6 + 2 + 2 * length + 6 + 1 + length);
    expect([...packed.subarray(0, 8)]).toEqual([1, 2, 0x34, 0x32, 0, 0, 0, 2]);
    expect(unpack(packed)).toEqual(users.map((u) => ({ ...u, members: [...u.members] })));
  });

  it('carries ids with separator, brace and multi-byte characters verbatim (length-prefixed)', () => {
    const ids = ['a b', 'x}y', '{z', 'u:1,2', 'line\nbreak', 'é', '\u0000', 'x'.repeat(MAX_USER_ID_BYTES)];
    const users = ids.map((userId, i) => ({ userId, maintain: i % 2 === 0, members: [member(i + 1)] }));
    expect(unpack(packArrivals(users)).map((u) => u.userId)).toEqual(ids);
  });

  it('an empty request packs to nothing; a user without arrivals is just its header', () => {
    expect(packArrivals([]).length).toBe(0);
    expect([...packArrivals([{ userId: '9', maintain: false, members: [] }])]).toEqual([
      0, 1, 0x39, 0, 0, 0, 0,
    ]);
  });

  it('refuses an empty user id and one longer than 255 UTF-8 bytes, naming the limit', () => {
    expect(() => packArrivals([{ userId: '', maintain: false, members: [member(1)] }])).toThrow(
      /User id "" is 0 bytes: give 1 to 255 bytes/,
    );
    const long = 'x'.repeat(MAX_USER_ID_BYTES + 1);
    expect(() => packArrivals([{ userId: long, maintain: false, members: [] }])).toThrow(/is 256 bytes/);
    // 128 two-byte characters: 128 characters but 256 bytes.
    expect(() => packArrivals([{ userId: 'é'.repeat(128), maintain: false, members: [] }])).toThrow(
      /is 256 bytes: give 1 to 255/,
    );
  });

  it('refuses a member of an unknown layout version or of the wrong length (it would misframe the rest)', () => {
    const good = member(1);
    const unknown = Buffer.from(good);
    unknown[0] = 9;
    expect(() => packArrivals([{ userId: '1', maintain: false, members: [unknown] }])).toThrow(
      /layout version 9 and 59 bytes: this store knows versions 1/,
    );
    expect(() => packArrivals([{ userId: '1', maintain: false, members: [good.subarray(0, 58)] }])).toThrow(
      /layout version 1 and 58 bytes: that version's members are 59 bytes/,
    );
    expect(() =>
      packArrivals([{ userId: '1', maintain: false, members: [Buffer.concat([good, Buffer.alloc(1)])] }]),
    ).toThrow(/60 bytes/);
    expect(() => packArrivals([{ userId: '1', maintain: false, members: [Buffer.alloc(0)] }])).toThrow(
      /layout version undefined and 0 bytes/,
    );
  });

  it("uses the store schema's lengths: a newer layout version packs with its own length", () => {
    const extended = actionEventSchema.extend(4, [
      { name: 'placement', kind: 'id', width: 8, required: false },
    ]);
    // v4 = v3 (device, household, session) + placement: 59 + 24 + 8 bytes.
    const v4 = Buffer.concat([member(1), Buffer.alloc(32, 5)]);
    v4[0] = 4;
    expect(packArrivals([{ userId: '1', maintain: false, members: [member(2), v4] }], extended).length).toBe(
      6 + 1 + 59 + 91,
    );
    expect(() => packArrivals([{ userId: '1', maintain: false, members: [v4] }])).toThrow(/layout version 4/);
  });
});
