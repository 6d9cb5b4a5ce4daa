/**
 * The frequency-cap edge table of docs/counting.md, as data: each row is a user's events (in
 * arrival order), one cap or block on the ad, and the verdict. The unit tier evaluates the rows
 * whose outcome does not depend on ingest dedup (test/unit/counting/cap-edges.test.ts, pure
 * evaluateCaps); the integration tier runs every row end to end through the real store and its
 * ingest script on redis-server (test/integration/counting/cap-edges.test.ts), because the dedup
 * rule lives in that script.
 */

import { type ActionEvent, encodeActionEvent } from '../../shared/counting/event-encode.js';
import type { CapCandidate, CapRule } from '../../shared/counting/query.js';
import { DAY_MS, HOUR_MS, MINUTE_MS } from '../../shared/time/clock.js';

/** The instant every row is evaluated at (a cap check's `now`). */
export const EDGE_NOW = Date.UTC(2026, 10, 21, 12);
/** The dedup window the store rows run with (the default). */
export const EDGE_DEDUP_WINDOW = DAY_MS;

const W = HOUR_MS;
const D = EDGE_DEDUP_WINDOW;
const hourCap: CapRule = { level: 'ad', windowMs: W, max: 1 };
const weekCap = (max: number): CapRule => ({ level: 'ad', windowMs: 7 * DAY_MS, max });
/** At most `max` impressions of the campaign over its flight. */
const lifetime = (max: number): CapRule => ({ level: 'campaign', lifetime: true, max });
/** Not again within 30 minutes of the user's last impression of the campaign. */
const recency30: CapRule = { level: 'campaign', recencyMs: 30 * MINUTE_MS };

/** One event of a row: its time relative to EDGE_NOW and which insertion it is. */
export interface EdgeEvent {
  readonly at: number;
  /** Same number = same insertion id = same event identity. @default 1 */
  readonly insertion?: number;
  /** @default 'impression' */
  readonly action?: 'impression' | 'click' | 'conversion';
}

/** One row of the table. */
export interface CapEdgeRow {
  readonly name: string;
  readonly events: readonly EdgeEvent[];
  readonly rule: CapRule;
  /** The candidate's flight start relative to EDGE_NOW (lifetime and conversion rows). */
  readonly flightStart?: number;
  /** The verdict and the rule's count, or the error a bad rule gets. */
  readonly expect: { readonly allowed: boolean; readonly count: number } | { readonly error: RegExp };
  /** The outcome depends on dedup at ingest: only meaningful through the store. */
  readonly dedup: boolean;
}

export const CAP_EDGE_ROWS: readonly CapEdgeRow[] = [
  {
    name: '`max: 0` is refused with an error naming the cap',
    events: [],
    rule: { level: 'ad', windowMs: W, max: 0 },
    expect: {
      error:
        /candidate edge cap 0 \{"level":"ad","windowMs":3600000,"max":0\}: max 0 is ambiguous .* use \{ level: 'ad', block: true \} to never serve/,
    },
    dedup: false,
  },
  {
    name: '`{ level, block: true }` never serves the entity (no events needed)',
    events: [],
    rule: { level: 'ad', block: true },
    expect: { allowed: false, count: 0 },
    dedup: false,
  },
  {
    name: 'recency 30 min: the last impression exactly 30 min ago allows a serve',
    events: [{ at: -30 * MINUTE_MS }],
    rule: recency30,
    expect: { allowed: true, count: 0 },
    dedup: false,
  },
  {
    name: 'recency 30 min: the last impression 30 min − 1 ms ago refuses it',
    events: [{ at: -30 * MINUTE_MS + 1 }],
    rule: recency30,
    expect: { allowed: false, count: 1 },
    dedup: false,
  },
  {
    name: 'recency 0 is refused with an error naming the cap',
    events: [],
    rule: { level: 'campaign', recencyMs: 0 },
    expect: {
      error:
        /candidate edge cap 0 \{"level":"campaign","recencyMs":0\}: recencyMs must be a positive integer/,
    },
    dedup: false,
  },
  {
    name: 'a negative recency is refused with an error naming the cap',
    events: [],
    rule: { level: 'campaign', recencyMs: -60_000 },
    expect: { error: /recencyMs must be a positive integer \(ms\); 0 or less would never refuse/ },
    dedup: false,
  },
  {
    name: 'a block with a recency is refused (a block has no window, max or recency)',
    events: [],
    rule: { level: 'campaign', block: true, recencyMs: HOUR_MS } as unknown as CapRule,
    expect: {
      error:
        /a block is exactly \{ level, block: true \}; "recencyMs" does not belong in it \(a block has no window, max or recency\)/,
    },
    dedup: false,
  },
  {
    name: 'a recency cap with a window or max is refused (it is max 1 over recencyMs)',
    events: [],
    rule: { level: 'campaign', recencyMs: HOUR_MS, max: 2 } as unknown as CapRule,
    expect: {
      error:
        /a recency cap is exactly \{ level, recencyMs, action\?, viewType\?, key\? \}; "max" does not belong in it/,
    },
    dedup: false,
  },
  {
    name: "lifetime: an impression at the flight's first instant counts",
    events: [{ at: -10 * DAY_MS }],
    rule: lifetime(1),
    flightStart: -10 * DAY_MS,
    expect: { allowed: false, count: 1 },
    dedup: false,
  },
  {
    name: 'lifetime: an impression 1 ms before the flight started does not count',
    events: [{ at: -10 * DAY_MS - 1 }],
    rule: lifetime(1),
    flightStart: -10 * DAY_MS,
    expect: { allowed: true, count: 0 },
    dedup: false,
  },
  {
    name: "lifetime: the flight's first day and its last millisecond both count",
    events: [
      { at: -20 * DAY_MS + HOUR_MS, insertion: 1 },
      { at: 0, insertion: 2 },
    ],
    rule: lifetime(3),
    flightStart: -20 * DAY_MS,
    expect: { allowed: true, count: 2 },
    dedup: false,
  },
  {
    name: 'lifetime: max reached over the flight refuses',
    events: [
      { at: -20 * DAY_MS + HOUR_MS, insertion: 1 },
      { at: -HOUR_MS, insertion: 2 },
    ],
    rule: lifetime(2),
    flightStart: -20 * DAY_MS,
    expect: { allowed: false, count: 2 },
    dedup: false,
  },
  {
    name: 'a lifetime cap without a flight is refused with an error naming the cap',
    events: [],
    rule: lifetime(1),
    expect: { error: /a lifetime cap counts since the flight started — give the candidate flightStartMs/ },
    dedup: false,
  },
  {
    name: 'a lifetime cap whose flight started before the retention is refused (never under-counted)',
    events: [],
    rule: lifetime(1),
    flightStart: -31 * DAY_MS,
    expect: { error: /before the store's retention horizon .*retentionDays of at least the flight length/ },
    dedup: false,
  },
  {
    name: 'conversion: a click 20 days ago stops serving (no withinMs: the flight)',
    events: [{ at: -20 * DAY_MS, action: 'click' }],
    rule: { level: 'campaign', stopAfter: 'click' },
    flightStart: -25 * DAY_MS,
    expect: { allowed: false, count: 1 },
    dedup: false,
  },
  {
    name: 'conversion: impressions do not stop it',
    events: [
      { at: -HOUR_MS, insertion: 1 },
      { at: -2 * HOUR_MS, insertion: 2 },
    ],
    rule: { level: 'campaign', stopAfter: 'conversion' },
    expect: { allowed: true, count: 0 },
    dedup: false,
  },
  {
    name: 'conversion withinMs 7 d: a conversion exactly 7 d ago serves again',
    events: [{ at: -7 * DAY_MS, action: 'conversion' }],
    rule: { level: 'campaign', stopAfter: 'conversion', withinMs: 7 * DAY_MS },
    expect: { allowed: true, count: 0 },
    dedup: false,
  },
  {
    name: 'conversion withinMs 7 d: a conversion 7 d − 1 ms ago still stops it',
    events: [{ at: -7 * DAY_MS + 1, action: 'conversion' }],
    rule: { level: 'campaign', stopAfter: 'conversion', withinMs: 7 * DAY_MS },
    expect: { allowed: false, count: 1 },
    dedup: false,
  },
  {
    name: 'a cap mixing kinds (a frequency cap with lifetime) is refused, not half-read',
    events: [],
    rule: { level: 'ad', windowMs: HOUR_MS, max: 1, lifetime: true } as unknown as CapRule,
    expect: {
      error:
        /a lifetime cap is exactly \{ level, lifetime: true, max, action\?, viewType\?, key\? \}; "windowMs" does not belong in it/,
    },
    dedup: false,
  },
  {
    name: 'event w − 1 ms old counts',
    events: [{ at: -W + 1 }],
    rule: hourCap,
    expect: { allowed: false, count: 1 },
    dedup: false,
  },
  {
    name: 'event exactly w old does not count',
    events: [{ at: -W }],
    rule: hourCap,
    expect: { allowed: true, count: 0 },
    dedup: false,
  },
  {
    name: 'event w + 1 ms old does not count',
    events: [{ at: -W - 1 }],
    rule: hourCap,
    expect: { allowed: true, count: 0 },
    dedup: false,
  },
  {
    name: 'event at now counts',
    events: [{ at: 0 }],
    rule: hourCap,
    expect: { allowed: false, count: 1 },
    dedup: false,
  },
  {
    name: 'event stamped 1 min ahead (accepted producer skew) counts as now',
    events: [{ at: MINUTE_MS }],
    rule: hourCap,
    expect: { allowed: false, count: 1 },
    dedup: false,
  },
  {
    name: 'two distinct impressions in the same millisecond count twice',
    events: [
      { at: -1000, insertion: 1 },
      { at: -1000, insertion: 2 },
    ],
    rule: { level: 'ad', windowMs: W, max: 2 },
    expect: { allowed: false, count: 2 },
    dedup: false,
  },
  {
    name: 'the same event delivered twice (identical bytes) counts once',
    events: [{ at: -1000 }, { at: -1000 }],
    rule: { level: 'ad', windowMs: W, max: 2 },
    expect: { allowed: true, count: 1 },
    dedup: true,
  },
  {
    name: 'the same insertion rendered twice, 5 min apart (re-stamped), counts once',
    events: [{ at: -10 * MINUTE_MS }, { at: -5 * MINUTE_MS }],
    rule: { level: 'ad', windowMs: W, max: 2 },
    expect: { allowed: true, count: 1 },
    dedup: true,
  },
  {
    name: "the first occurrence's timestamp is the one counted (first outside the cap window, copy inside)",
    events: [{ at: -W - 1 }, { at: -5 * MINUTE_MS }],
    rule: hourCap,
    expect: { allowed: true, count: 0 },
    dedup: true,
  },
  {
    name: 're-stamped D − 1 ms later: duplicate (inside the dedup window)',
    events: [{ at: -2 * D }, { at: -D - 1 }],
    rule: weekCap(2),
    expect: { allowed: true, count: 1 },
    dedup: true,
  },
  {
    name: 're-stamped exactly D later: counts again (outside the dedup window)',
    events: [{ at: -2 * D }, { at: -D }],
    rule: weekCap(2),
    expect: { allowed: false, count: 2 },
    dedup: true,
  },
  {
    name: 're-stamped D + 1 ms later: counts again',
    events: [{ at: -2 * D - 1 }, { at: -D }],
    rule: weekCap(2),
    expect: { allowed: false, count: 2 },
    dedup: true,
  },
  {
    name: 'copy stamped D − 1 ms earlier, arriving later: duplicate',
    events: [{ at: -D }, { at: -2 * D + 1 }],
    rule: weekCap(2),
    expect: { allowed: true, count: 1 },
    dedup: true,
  },
  {
    name: 'copy stamped exactly D earlier, arriving later: counts',
    events: [{ at: -D }, { at: -2 * D }],
    rule: weekCap(2),
    expect: { allowed: false, count: 2 },
    dedup: true,
  },
  {
    name: 'redelivery of the earlier of two counted occurrences: duplicate',
    events: [{ at: -3 * D }, { at: -D }, { at: -3 * D }],
    rule: weekCap(3),
    expect: { allowed: true, count: 2 },
    dedup: true,
  },
  {
    name: 'copy within D of the earlier of two counted occurrences, arriving last: duplicate',
    events: [{ at: -3 * D }, { at: -D }, { at: -3 * D + HOUR_MS }],
    rule: weekCap(3),
    expect: { allowed: true, count: 2 },
    dedup: true,
  },
];

/** The entities of the row's ad (every event of every row is on it). */
export const EDGE_ENTITIES = { ad: 11, adGroup: 7, campaign: 3, advertiser: 1 } as const;

/** The wire record of a row's event for `userId`. */
export function edgeRecord(userId: string, event: EdgeEvent): Buffer {
  const insertionId = Buffer.alloc(16);
  insertionId.writeUInt32BE(event.insertion ?? 1, 12);
  const e: ActionEvent = {
    userId,
    timestamp: EDGE_NOW + event.at,
    insertionId,
    action: event.action ?? 'impression',
    viewType: 'home',
    ...EDGE_ENTITIES,
  };
  return encodeActionEvent(e);
}

/** The row's one candidate. */
export function edgeCandidate(row: CapEdgeRow): CapCandidate {
  const flight = row.flightStart === undefined ? {} : { flightStartMs: EDGE_NOW + row.flightStart };
  return { id: 'edge', entities: EDGE_ENTITIES, caps: [row.rule], ...flight };
}
