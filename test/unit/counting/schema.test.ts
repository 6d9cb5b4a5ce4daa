import { describe, expect, it } from 'vitest';
import {
  type ActionEventError,
  actionEventSchema,
  decodeMember,
  decodeRecord,
  encodeActionEvent,
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
    const layout = actionEventSchema.current;
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
    expect(decodeError(farTs).message).toMatch(/"timestamp" exceeds 2\^53-1 ms/);
  });

  it('a view type is optional (0 = unknown)', () => {
    const { viewType: _v, ...rest } = base;
    expect(decodeMember(decodeRecord(encodeActionEvent(rest)).member).viewType).toBe('unknown');
  });

  it('extends by adding a dimension in a new version; old records still decode', () => {
    const v2 = actionEventSchema.extend(2, [{ name: 'placement', kind: 'id', width: 8, required: false }]);
    expect(v2.current.version).toBe(2);
    expect(v2.current.byName.get('placement')?.offset).toBe(59);
    expect(v2.current.recordLength).toBe(75);
    const newer = encodeActionEvent({ ...base, placement: 42 }, v2);
    expect(decodeMember(decodeRecord(newer, v2).member, v2).placement).toBe('42');
    const older = encodeActionEvent(base);
    expect(decodeRecord(older, v2).member.length).toBe(59);
    expect(v2.dimensions).toContain('placement');
    // A v1-only reader rejects v2 records with a clear reason (deploy readers first).
    expect(decodeError(newer).reasonCode).toBe('counting.unknown-version');
  });
});
