import { describe, expect, it } from 'vitest';
import { checkEventTime, decodeMember, decodeRecord } from '../../../shared/counting/event-decode.js';
import { encodeActionEvent } from '../../../shared/counting/event-encode.js';
import { IDENTITY_KINDS } from '../../../shared/counting/identities.js';
import { countMembers, evaluateCaps } from '../../../shared/counting/query.js';
import {
  type ActionEventError,
  actionEventSchema,
  type Layout,
  MAX_TIMESTAMP_MS,
  timestampUnitHint,
} from '../../../shared/counting/schema.js';
import { MalformedRecordError } from '../../../shared/quarantine/quarantine.js';

const base = {
  userId: '18446744073709551615',
  timestamp: Date.UTC(2026, 10, 21, 12, 0),
  insertionId: '0123456789abcdef0123456789abcdef',
  action: 'click',
  viewType: 'search',
  ad: 11,
  adGroup: 7n,
  campaign: '3',
  advertiser: 1,
} as const;

function decodeError(data: Buffer): ActionEventError {
  try {
    decodeRecord(data);
  } catch (error) {
    return error as ActionEventError;
  }
  throw new Error('expected a decode error');
}

describe('action event schema', () => {
  it('lays v1 out as documented: 67-byte record, 59-byte member, user id last', () => {
    const layout = actionEventSchema.layouts.get(1) as Layout;
    expect(layout.version).toBe(1);
    expect(layout.fields.map((f) => [f.name, f.offset, f.width])).toEqual([
      ['timestamp', 1, 8],
      ['insertionId', 9, 16],
      ['action', 25, 1],
      ['viewType', 26, 1],
      ['ad', 27, 8],
      ['adGroup', 35, 8],
      ['campaign', 43, 8],
      ['advertiser', 51, 8],
    ]);
    expect(layout.memberLength).toBe(59);
    expect(layout.recordLength).toBe(67);
  });

  it('lays v2 and v3 out as documented: the identities after the v1 fields, the user id last', () => {
    const at = (v: number) =>
      (actionEventSchema.layouts.get(v) as Layout).fields.slice(8).map((f) => [f.name, f.offset, f.width]);
    expect(at(2)).toEqual([
      ['deviceId', 59, 8],
      ['householdId', 67, 8],
    ]);
    expect(at(3)).toEqual([
      ['deviceId', 59, 8],
      ['householdId', 67, 8],
      ['sessionId', 75, 8],
    ]);
    expect((actionEventSchema.layouts.get(3) as Layout).recordLength).toBe(91);
    // Every identity kind's field is in the newest layout (a kind without one could never count).
    for (const kind of IDENTITY_KINDS) {
      if (kind.field !== 'userId')
        expect(actionEventSchema.current.byName.has(kind.field), kind.name).toBe(true);
    }
    // The oldest layout that holds the event's fields is the one written.
    expect(encodeActionEvent({ ...base, householdId: 5 })[0]).toBe(2);
    expect(encodeActionEvent({ ...base, sessionId: 5 })[0]).toBe(3);
    expect(decodeRecord(encodeActionEvent({ ...base, userId: 0, deviceId: 4, sessionId: 5 })).keys).toEqual([
      'd4',
      's5',
    ]);
  });

  it('round-trips an event; the member is the record minus the trailing user id', () => {
    const data = encodeActionEvent(base);
    const decoded = decodeRecord(data);
    expect(decoded.userId).toBe('18446744073709551615');
    expect(decoded.timestamp).toBe(base.timestamp);
    expect(decoded.member.equals(data.subarray(0, 59))).toBe(true);
    expect(decodeMember(decoded.member)).toEqual({
      version: '1',
      timestamp: String(base.timestamp),
      insertionId: base.insertionId,
      action: 'click',
      viewType: 'search',
      ad: '11',
      adGroup: '7',
      campaign: '3',
      advertiser: '1',
    });
  });

  it('encoder errors name the field and the problem', () => {
    expect(() => encodeActionEvent({ ...base, action: 'tap' as never })).toThrow(
      /field "action" is "tap": expected a code 0..255 or one of impression, click/,
    );
    expect(() => encodeActionEvent({ ...base, ad: -1 })).toThrow(/field "ad"/);
    expect(() => encodeActionEvent({ ...base, insertionId: 'abcd' })).toThrow(
      /field "insertionId" has 2 bytes: expected exactly 16/,
    );
    expect(() => encodeActionEvent({ ...base, campaign: 0 })).toThrow(
      /field "campaign".*is zero: it is required/,
    );
    expect(() => encodeActionEvent({ ...base, timestamp: 1.5 })).toThrow(/field "timestamp"/);
  });

  it('decode failures are MalformedRecordErrors with a stable reason code and the field in the message', () => {
    const data = encodeActionEvent(base);
    const empty = decodeError(Buffer.alloc(0));
    expect(empty).toBeInstanceOf(MalformedRecordError);
    expect(empty.reasonCode).toBe('counting.empty-record');

    const version = Buffer.from(data);
    version[0] = 9;
    const v = decodeError(version);
    expect(v.reasonCode).toBe('counting.unknown-version');
    expect(v.message).toMatch(/field "version" \(byte 0\) is 9: this consumer knows layout versions 1/);

    const short = decodeError(data.subarray(0, 66));
    expect(short.reasonCode).toBe('counting.wrong-length');
    expect(short.message).toMatch(/66 bytes: layout v1 is exactly 67 bytes/);

    for (const field of ['insertionId', 'action', 'ad', 'adGroup', 'campaign', 'advertiser'] as const) {
      const f = actionEventSchema.current.byName.get(field);
      const bad = Buffer.from(data);
      bad.fill(0, f?.offset, (f?.offset ?? 0) + (f?.width ?? 0));
      const e = decodeError(bad);
      expect(e.reasonCode).toBe('counting.invalid-field');
      expect(e.field).toBe(field);
      expect(e.message).toContain(`field "${field}"`);
    }
    const noUser = Buffer.from(data);
    noUser.fill(0, 59);
    expect(decodeError(noUser).field).toBe('userId');

    const farTs = Buffer.from(data);
    farTs[1] = 0xff;
    const far = decodeError(farTs);
    expect(far.reasonCode).toBe('counting.timestamp-out-of-range');
    expect(far.field).toBe('timestamp');
  });

  it('a view type is optional (0 = unknown)', () => {
    const { viewType: _v, ...rest } = base;
    expect(decodeMember(decodeRecord(encodeActionEvent(rest)).member).viewType).toBe('unknown');
  });

  it('extends by adding a dimension in a new version; old records still decode', () => {
    const v3 = actionEventSchema.extend(4, [{ name: 'placement', kind: 'id', width: 8, required: false }]);
    expect(v3.current.version).toBe(4);
    expect(v3.current.byName.get('placement')?.offset).toBe(83);
    expect(v3.current.recordLength).toBe(99);
    const newer = encodeActionEvent({ ...base, placement: 42 }, v3);
    expect(newer[0]).toBe(4);
    expect(decodeMember(decodeRecord(newer, v3).member, v3).placement).toBe('42');
    // An event without the newer fields is written in the oldest layout that holds it.
    const older = encodeActionEvent(base, v3);
    expect(older.equals(encodeActionEvent(base))).toBe(true);
    expect(decodeRecord(older, v3).member.length).toBe(59);
    expect(v3.dimensions).toContain('placement');
    // A reader without v4 rejects v4 records with a clear reason (deploy readers first).
    expect(decodeError(newer).reasonCode).toBe('counting.unknown-version');
  });

  describe('timestamp width: validation, decoding and counting agree on 48 bits', () => {
    /** A valid record whose 8 timestamp bytes are set raw (bypassing the encoder's checks). */
    const stamped = (value: bigint): Buffer => {
      const data = encodeActionEvent(base);
      data.writeBigUInt64BE(value, 1);
      return data;
    };
    const LIMIT = BigInt(MAX_TIMESTAMP_MS);
    const microseconds = BigInt(base.timestamp) * 1000n;

    it('the largest accepted timestamp is 2^48 - 1 ms, and every reader reads it whole', () => {
      expect(MAX_TIMESTAMP_MS).toBe(281_474_976_710_655);
      const decoded = decodeRecord(stamped(LIMIT));
      expect(decoded.timestamp).toBe(MAX_TIMESTAMP_MS);
      expect(decodeMember(decoded.member).timestamp).toBe(String(MAX_TIMESTAMP_MS));
      expect(encodeActionEvent({ ...base, timestamp: MAX_TIMESTAMP_MS }).equals(stamped(LIMIT))).toBe(true);
      // Counting and cap scans see the same instant (no truncation): in range at the limit, not before.
      const at = (from: number, to: number) =>
        countMembers([decoded.member], [{ ranges: [{ from, to }] }], 0)[0]?.[0]?.total;
      expect(at(MAX_TIMESTAMP_MS, MAX_TIMESTAMP_MS + 1)).toBe(1);
      expect(at(MAX_TIMESTAMP_MS - 1, MAX_TIMESTAMP_MS)).toBe(0);
      const caps = (now: number) =>
        evaluateCaps(
          [decoded.member],
          [{ id: 'x', entities: { ad: 11 }, caps: [{ level: 'ad', windowMs: 1, max: 1, action: 'click' }] }],
          now,
          0,
        ).rejected.length;
      expect(caps(MAX_TIMESTAMP_MS)).toBe(1);
      expect(caps(MAX_TIMESTAMP_MS + 1)).toBe(0);
    });

    it.each([
      ['2^48', LIMIT + 1n],
      ['2^48 + 5 (read as 5 ms by a 48-bit reader before)', LIMIT + 6n],
      ['2^53 - 1 (accepted before)', 2n ** 53n - 1n],
      ['2^64 - 1', 2n ** 64n - 1n],
    ])('%s is out of range, quarantined with the value and the limit', (_label, value) => {
      const error = decodeError(stamped(value));
      expect(error.reasonCode).toBe('counting.timestamp-out-of-range');
      expect(error.field).toBe('timestamp');
      expect(error.message).toContain(`is ${value}, above ${MAX_TIMESTAMP_MS} (2^48-1 ms, year 10889)`);
      expect(() => encodeActionEvent({ ...base, timestamp: Number(value) })).toThrow(/"timestamp"/);
    });

    it('microseconds instead of milliseconds: quarantined with the right date and the fix', () => {
      const error = decodeError(stamped(microseconds));
      expect(error.reasonCode).toBe('counting.timestamp-out-of-range');
      expect(error.message).toContain(
        `is ${microseconds}, above ${MAX_TIMESTAMP_MS} (2^48-1 ms, year 10889): expected epoch milliseconds.`,
      );
      expect(error.message).toContain(
        `This looks like microseconds since the epoch (${microseconds} microseconds = 2026-11-21T12:00:00.000Z): send epoch milliseconds.`,
      );
      // The producer-side encoder says the same before anything is sent.
      expect(() => encodeActionEvent({ ...base, timestamp: Number(microseconds) })).toThrow(
        /looks like microseconds since the epoch .* = 2026-11-21T12:00:00.000Z/,
      );
      // Nanoseconds too.
      expect(decodeError(stamped(microseconds * 1000n)).message).toContain(
        'looks like nanoseconds since the epoch',
      );
    });

    it('a timestamp ahead of the clock is named with its number and date (no hint for real ms)', () => {
      const now = base.timestamp;
      expect(() => checkEventTime(now + 15 * 60_000, now, 15 * 60_000)).not.toThrow();
      let error: ActionEventError | undefined;
      try {
        checkEventTime(MAX_TIMESTAMP_MS, now, 15 * 60_000);
      } catch (e) {
        error = e as ActionEventError;
      }
      expect(error?.reasonCode).toBe('counting.timestamp-in-future');
      expect(error?.message).toContain(
        `is ${MAX_TIMESTAMP_MS} (+010889-08-02T05:31:50.655Z), more than 900000 ms`,
      );
      expect(error?.message).not.toContain('looks like');
      expect(timestampUnitHint(base.timestamp)).toBe('');
      expect(timestampUnitHint(Math.floor(base.timestamp / 1000))).toContain('looks like seconds');
    });

    it('the smallest timestamp is 1 ms (0 means the producer forgot it)', () => {
      expect(decodeRecord(stamped(1n)).timestamp).toBe(1);
      expect(decodeError(stamped(0n)).reasonCode).toBe('counting.invalid-field');
    });
  });
});
