import { describe, expect, it } from 'vitest';
import { decodeRecord } from '../../../shared/counting/event-decode.js';
import { type ActionEvent, encodeActionEvent } from '../../../shared/counting/event-encode.js';
import {
  type CapCandidate,
  type CapStatus,
  countMembers,
  evaluateCaps,
  InvalidCountQueryError,
  type RangeCount,
  UnreadableEventLogError,
} from '../../../shared/counting/query.js';
import { actionEventSchema, EventSchema, type Layout } from '../../../shared/counting/schema.js';
import { DAY_MS, HOUR_MS, MINUTE_MS } from '../../../shared/time/clock.js';

const now = Date.UTC(2026, 10, 21);
const first = (result: RangeCount[][]) => result[0]?.[0];
let n = 0;
function member(overrides: Partial<ActionEvent> = {}, schema = actionEventSchema): Buffer {
  n++;
  const event = {
    userId: 1,
    timestamp: now - MINUTE_MS,
    insertionId: Buffer.alloc(16, n % 255 || 1).fill(n >> 8, 0, 1),
    action: 'impression',
    viewType: 'home',
    ad: 11,
    adGroup: 7,
    campaign: 3,
    advertiser: 1,
    ...overrides,
  } as ActionEvent;
  return decodeRecord(encodeActionEvent(event, schema), schema).member;
}

describe('countMembers', () => {
  it('counts [from, to) exactly at the boundaries, several ranges and queries in one pass', () => {
    const log = [
      member({ timestamp: now - HOUR_MS - 1 }),
      member({ timestamp: now - HOUR_MS }),
      member({ timestamp: now - 1 }),
      member({ timestamp: now }),
    ];
    const [q1, q2] = countMembers(
      log,
      [
        {
          ranges: [
            { from: now - HOUR_MS, to: now },
            { from: now - DAY_MS, to: now + 1 },
          ],
        },
        { ranges: [{ from: now, to: now + MINUTE_MS }] },
      ],
      now - 30 * DAY_MS,
    );
    expect(q1?.map((r) => r.total)).toEqual([2, 4]);
    expect(q2?.map((r) => r.total)).toEqual([1]);
  });

  it('ignores events past the retention horizon even when present', () => {
    const log = [member({ timestamp: now - 31 * DAY_MS }), member({ timestamp: now - 29 * DAY_MS })];
    const r = first(countMembers(log, [{ ranges: [{ from: 0, to: now }] }], now - 30 * DAY_MS));
    expect(r?.total).toBe(1);
  });

  it('filters on any dimension values and groups by any dimensions', () => {
    const log = [
      member({ action: 'click', campaign: 3 }),
      member({ action: 'click', campaign: 4 }),
      member({ action: 'impression', campaign: 4 }),
      member({ action: 'impression', campaign: 4, viewType: 'search' }),
    ];
    const r = first(
      countMembers(
        log,
        [{ ranges: [{ from: 0, to: now }], filter: { viewType: ['home'] }, groupBy: ['campaign', 'action'] }],
        0,
      ),
    );
    expect(r?.total).toBe(3);
    expect(r?.groups).toEqual([
      { key: { campaign: '3', action: 'click' }, count: 1 },
      { key: { campaign: '4', action: 'click' }, count: 1 },
      { key: { campaign: '4', action: 'impression' }, count: 1 },
    ]);
  });

  it('reads mixed layout versions; a dimension an old event lacks has the zero value', () => {
    const v2 = actionEventSchema.extend(4, [{ name: 'placement', kind: 'id', width: 8, required: false }]);
    const log = Buffer.concat([
      member({}, v2),
      member({ placement: 5 } as Partial<ActionEvent>, v2),
      member(),
    ]);
    const r = first(countMembers(log, [{ ranges: [{ from: 0, to: now }], groupBy: ['placement'] }], 0, v2));
    expect(r?.groups).toEqual([
      { key: { placement: '0' }, count: 2 },
      { key: { placement: '5' }, count: 1 },
    ]);
    // A reader without the placement layout (v4) cannot walk past a v4 member.
    expect(() => countMembers(log, [{ ranges: [{ from: 0, to: now }] }], 0)).toThrow(UnreadableEventLogError);
  });

  it('rejects bad queries with a message saying what to change', () => {
    expect(() => countMembers([], [{ ranges: [{ from: 5, to: 5 }] }], 0)).toThrow(
      /range \[5, 5\) is invalid/,
    );
    expect(() => countMembers([], [{ ranges: [{ from: 0, to: 1 }], filter: { color: ['red'] } }], 0)).toThrow(
      InvalidCountQueryError,
    );
    expect(() => countMembers([], [{ ranges: [{ from: 0, to: 1 }], groupBy: ['color'] }], 0)).toThrow(
      /unknown dimension "color". Dimensions are: insertionId, action, viewType, ad, adGroup, campaign, advertiser/,
    );
  });
});

describe('evaluateCaps', () => {
  const entities = { ad: 11, adGroup: 7, campaign: 3, advertiser: 1 };
  const log = [
    ...Array.from({ length: 3 }, () => member({ timestamp: now - 10 * MINUTE_MS })),
    ...Array.from({ length: 5 }, () => member({ timestamp: now - 3 * DAY_MS })),
    ...Array.from({ length: 4 }, () => member({ timestamp: now - 3 * DAY_MS, ad: 12 })),
    member({ timestamp: now - MINUTE_MS, action: 'click' }),
    member({ timestamp: now - MINUTE_MS, advertiser: 2, campaign: 9, adGroup: 8, ad: 13 }),
  ];

  it('allows a candidate under all caps and rejects one over any, naming the strictest cap', () => {
    const candidates: CapCandidate[] = [
      {
        id: 'ok',
        entities,
        caps: [
          { level: 'ad', windowMs: HOUR_MS, max: 4 },
          { level: 'ad', windowMs: 7 * DAY_MS, max: 10 },
        ],
      },
      {
        id: 'capped',
        entities,
        caps: [
          { level: 'ad', windowMs: HOUR_MS, max: 3 }, // 3 in the last hour: hit
          { level: 'campaign', windowMs: 7 * DAY_MS, max: 10 }, // 12: hit harder
          { level: 'advertiser', windowMs: 7 * DAY_MS, max: 100 },
        ],
      },
    ];
    const result = evaluateCaps(log, candidates, now, now - 30 * DAY_MS);
    expect(result.allowed.map((v) => v.id)).toEqual(['ok']);
    expect(result.allowed[0]?.strictest?.remaining).toBe(1);
    const [capped] = result.rejected;
    expect(capped?.id).toBe('capped');
    expect(capped?.hits.map((h) => [h.cap.level, h.count])).toEqual([
      ['ad', 3],
      ['campaign', 12],
    ]);
    expect(capped?.strictest).toMatchObject({ entity: '3', count: 12, remaining: -2 });
  });

  it("one result's verdicts cannot be changed through another's (the shared empty hits list is frozen)", () => {
    const candidates: CapCandidate[] = [
      { id: 'ok', entities, caps: [{ level: 'ad', windowMs: HOUR_MS, max: 4 }] },
      { id: 'capped', entities, caps: [{ level: 'ad', windowMs: HOUR_MS, max: 3 }] },
    ];
    const first = evaluateCaps(log, candidates, now, 0);
    const second = evaluateCaps(log, candidates, now, 0);
    const ok = first.allowed[0]?.hits as CapStatus[];
    expect(ok).toEqual([]);
    expect(() =>
      ok.push({ cap: { level: 'ad', block: true }, entity: '11', count: 0, remaining: 0 }),
    ).toThrow(TypeError);
    expect(second.allowed[0]?.hits).toEqual([]);
    // A rejected candidate's hits are its own list.
    (first.rejected[0]?.hits as CapStatus[]).length = 0;
    expect(second.rejected[0]?.hits.map((h) => h.count)).toEqual([3]);
  });

  it('checks one after another with other levels (or the same in another order) count right (scan accessors are reused only for the same levels)', () => {
    const counts = (levels: readonly ('ad' | 'adGroup' | 'campaign' | 'advertiser')[]) =>
      evaluateCaps(
        log,
        [{ id: 'x', entities, caps: levels.map((level) => ({ level, windowMs: 7 * DAY_MS, max: 1000 })) }],
        now,
        0,
      ).allowed[0]?.strictest?.count;
    // ad 11: 3 + 5 + 1 click (not counted) = 8; campaign 3: 8 + 4 (ad 12) = 12; advertiser 1: 12.
    expect(counts(['ad'])).toBe(8);
    expect(counts(['campaign', 'ad'])).toBe(12);
    expect(counts(['ad', 'campaign'])).toBe(12);
    expect(counts(['ad'])).toBe(8);
    expect(counts(['advertiser'])).toBe(12);
    expect(counts(['ad'])).toBe(8);
  });

  it('action codes remembered from check to check follow the schema, and stay right past the cache bound', () => {
    // The same layout with impression and click swapped: the stored code 1 is a click here.
    const swapped = new EventSchema({
      1: (actionEventSchema.layouts.get(1) as Layout).fields.map(({ offset: _o, ...f }) =>
        f.name === 'action' ? { ...f, names: { impression: 2, click: 1 } } : f,
      ),
    });
    const clicks = (schema: EventSchema, action: string | number = 'click') =>
      evaluateCaps(
        log,
        [{ id: 'x', entities, caps: [{ level: 'ad', windowMs: 7 * DAY_MS, max: 1000, action }] }],
        now,
        0,
        schema,
      ).allowed[0]?.strictest?.count;
    // ad 11 in 7 days: 8 events stored with code 1 (impression), 1 with code 2 (click).
    expect(clicks(actionEventSchema)).toBe(1);
    expect(clicks(swapped)).toBe(8);
    expect(clicks(actionEventSchema)).toBe(1);
    // More distinct action values than the scratch remembers: each still maps to its own code.
    for (let code = 0; code < 200; code++) {
      expect(clicks(actionEventSchema, code)).toBe(code === 1 ? 8 : code === 2 ? 1 : 0);
    }
    expect(clicks(actionEventSchema)).toBe(1);
  });

  it('counts only the cap action and view type; identical caps share a counter', () => {
    const result = evaluateCaps(
      log,
      [
        { id: 'a', entities, caps: [{ level: 'ad', windowMs: HOUR_MS, max: 1, action: 'click' }] },
        { id: 'b', entities, caps: [{ level: 'ad', windowMs: HOUR_MS, max: 1, action: 'click' }] },
        { id: 'c', entities, caps: [{ level: 'ad', windowMs: HOUR_MS, max: 4, viewType: 'search' }] },
      ],
      now,
      0,
    );
    expect(result.rejected.map((v) => [v.id, v.hits[0]?.count])).toEqual([
      ['a', 1],
      ['b', 1],
    ]);
    expect(result.allowed[0]?.strictest?.count).toBe(0);
  });

  it('a window ends at the retention horizon', () => {
    const result = evaluateCaps(
      [member({ timestamp: now - 20 * DAY_MS })],
      [{ id: 'x', entities, caps: [{ level: 'ad', windowMs: 90 * DAY_MS, max: 1 }] }],
      now,
      now - 10 * DAY_MS,
    );
    expect(result.allowed).toHaveLength(1);
  });

  it('rejects caps it cannot evaluate with a message naming the candidate and cap', () => {
    expect(() =>
      evaluateCaps(
        [],
        [{ id: 'x', entities: { ad: 1 }, caps: [{ level: 'campaign', windowMs: 1, max: 1 }] }],
        now,
        0,
      ),
    ).toThrow(/candidate x cap 0: the candidate has no "campaign" id/);
    expect(() =>
      evaluateCaps([], [{ id: 'x', entities, caps: [{ level: 'action', windowMs: 1, max: 1 }] }], now, 0),
    ).toThrow(/level "action" is not an entity id dimension/);
    expect(() =>
      evaluateCaps([], [{ id: 'x', entities, caps: [{ level: 'ad', windowMs: 0, max: 1 }] }], now, 0),
    ).toThrow(/windowMs must be a positive integer/);
  });

  it('handles ids above 2^53 exactly', () => {
    const big = '18446744073709551557';
    const result = evaluateCaps(
      [member({ ad: big }), member({ ad: '18446744073709551556' })],
      [{ id: 'big', entities: { ...entities, ad: big }, caps: [{ level: 'ad', windowMs: DAY_MS, max: 2 }] }],
      now,
      0,
    );
    expect(result.allowed[0]?.strictest?.count).toBe(1);
  });
});
