/**
 * Dayparting (shared/budget/daypart.ts, shared/pacing/curve-windows.ts): the CLI's text form and
 * its errors, a plan-day's windows as instants across DST changes and in another zone than the
 * account's, and curves that rise only while a window is open.
 */
import { describe, expect, it } from 'vitest';
import {
  type Daypart,
  DaypartError,
  daypartProblems,
  daypartText,
  dayWindowsOf,
  isOpenAt,
  openTimeBetween,
  parseDaypartText,
} from '../../../shared/budget/daypart.js';
import { type BudgetPlan, resolvePlan, validatePlan } from '../../../shared/budget/model.js';
import { dayWindowOf } from '../../../shared/budget/time-zone.js';
import {
  planDefaultExpected,
  planFailSafeCurve,
  restrictCurve,
} from '../../../shared/pacing/curve-windows.js';
import { evaluateCurve } from '../../../shared/pacing/types.js';

const LA = 'America/Los_Angeles';
const H = 3_600_000;
const at = (iso: string) => Date.parse(iso);

describe('daypart text', () => {
  it('reads weekday lists, ranges, daily and several windows', () => {
    expect(parseDaypartText('mon-fri 08:00-20:00').windows).toEqual([
      { weekdays: [1, 2, 3, 4, 5], fromMinute: 480, toMinute: 1200 },
    ]);
    const d = parseDaypartText('sat,sun 10:00-14:30; fri-mon 22:00-24:00; daily 06:15-07:00', LA);
    expect(d.timeZone).toBe(LA);
    expect(d.windows.map((w) => w.weekdays)).toEqual([
      [6, 7],
      [1, 5, 6, 7],
      [1, 2, 3, 4, 5, 6, 7],
    ]);
    expect(daypartText(d)).toBe(
      'sat,sun 10:00-14:30; mon,fri,sat,sun 22:00-24:00; mon,tue,wed,thu,fri,sat,sun 06:15-07:00',
    );
  });

  it.each([
    ['mon-fri', /window "mon-fri" has no time: write it as "mon-fri 08:00-20:00"/],
    ['mon-fri 20:00-08:00', /ends before it starts: split a window across midnight in two/],
    ['mon-fri 08:10-20:00', /on a quarter hour/],
    ['mon-fri 8-20', /the time must be HH:MM-HH:MM/],
    ['mo-fri 08:00-20:00', /"mo" is not a weekday/],
    ['mon-fri 08:00-25:00', /not a time of day/],
    ['   ;  ', /no window/],
  ])('refuses %j with what to write', (text, message) => {
    expect(() => parseDaypartText(text)).toThrow(DaypartError);
    expect(() => parseDaypartText(text)).toThrow(message);
  });

  it('refuses a zone that does not exist and a stored daypart that is malformed', () => {
    expect(() => parseDaypartText('mon 08:00-09:00', 'Mars/Olympus')).toThrow(/not a time zone/);
    const bad = { windows: [{ weekdays: [3, 1], fromMinute: 0, toMinute: 60 }] } as Daypart;
    expect(daypartProblems(bad)[0]?.field).toBe('daypart.windows[0].weekdays');
    const plan: BudgetPlan = {
      level: 'campaign',
      accountId: 'a',
      campaignId: 'c',
      dailyBudgetMicros: 1,
      pacingMode: 'even',
      daypart: { windows: [] },
    };
    expect(() => validatePlan(plan)).toThrow(/daypart\.windows: give at least one window/);
  });
});

describe('a plan-day’s windows', () => {
  const weekdays = parseDaypartText('mon-fri 08:00-20:00');

  it('are 12 local hours on a weekday, on both sides of the spring DST change', () => {
    const fri = dayWindowsOf(weekdays, LA, dayWindowOf('2026-03-06', LA));
    expect(fri.spans).toEqual([at('2026-03-06T08:00:00-08:00'), at('2026-03-06T20:00:00-08:00')]);
    const mon = dayWindowsOf(weekdays, LA, dayWindowOf('2026-03-09', LA));
    expect(mon.spans).toEqual([at('2026-03-09T08:00:00-07:00'), at('2026-03-09T20:00:00-07:00')]);
    expect(mon.openMs).toBe(12 * H);
    // No window on the weekend: the whole 23-hour Sunday is closed.
    expect(dayWindowsOf(weekdays, LA, dayWindowOf('2026-03-08', LA)).spans).toEqual([]);
    expect(isOpenAt(fri, at('2026-03-06T07:59:59.999-08:00'))).toBe(false);
    expect(isOpenAt(fri, at('2026-03-06T08:00:00-08:00'))).toBe(true);
    expect(isOpenAt(fri, at('2026-03-06T20:00:00-08:00'))).toBe(false);
  });

  it('skip a window inside the missing hour and cover the repeated hour twice', () => {
    const night = parseDaypartText('daily 02:00-03:00; daily 01:00-01:30');
    const spring = dayWindowsOf(night, LA, dayWindowOf('2026-03-08', LA));
    expect(spring.spans).toEqual([at('2026-03-08T01:00:00-08:00'), at('2026-03-08T01:30:00-08:00')]);
    const fall = dayWindowsOf(night, LA, dayWindowOf('2026-11-01', LA));
    // 01:00-01:30 PDT and again PST; 02:00-03:00 PST once.
    expect(fall.spans).toEqual([
      at('2026-11-01T01:00:00-07:00'),
      at('2026-11-01T01:30:00-07:00'),
      at('2026-11-01T01:00:00-08:00'),
      at('2026-11-01T01:30:00-08:00'),
      at('2026-11-01T02:00:00-08:00'),
      at('2026-11-01T03:00:00-08:00'),
    ]);
  });

  it('are read in the daypart’s zone, clipped to the account’s day', () => {
    const east = { ...parseDaypartText('mon-fri 09:00-17:00'), timeZone: 'America/New_York' };
    const w = dayWindowsOf(east, LA, dayWindowOf('2026-03-06', LA));
    expect(w.spans).toEqual([at('2026-03-06T06:00:00-08:00'), at('2026-03-06T14:00:00-08:00')]);
    // A window change gives another fingerprint.
    expect(dayWindowsOf(weekdays, LA, dayWindowOf('2026-03-06', LA)).hash).not.toBe(w.hash);
  });
});

describe('curves of a dayparted plan', () => {
  const day = dayWindowOf('2026-03-06', LA);
  const plan = resolvePlan(
    {
      level: 'campaign',
      accountId: 'a',
      campaignId: 'c',
      dailyBudgetMicros: 12_000_000,
      pacingMode: 'even',
      daypart: parseDaypartText('fri 06:00-10:00; fri 17:00-21:00'),
    },
    LA,
  );
  const w = dayWindowsOf(plan.daypart as Daypart, LA, day);

  it('fail-safe: linear over the open time, flat while closed, the budget at the last close', () => {
    const c = planFailSafeCurve(plan, day, plan.dailyBudgetMicros);
    const e = (iso: string) => evaluateCurve(c, at(iso));
    expect(e('2026-03-06T05:59:00-08:00')).toBe(0);
    expect(e('2026-03-06T08:00:00-08:00')).toBe(3_000_000);
    expect(e('2026-03-06T10:00:00-08:00')).toBe(6_000_000);
    expect(e('2026-03-06T16:00:00-08:00')).toBe(6_000_000);
    expect(e('2026-03-06T21:00:00-08:00')).toBe(12_000_000);
    expect(planDefaultExpected(plan, day, at('2026-03-06T19:00:00-08:00'))).toBe(9_000_000);
    expect(openTimeBetween(w, day.startMs, day.endMs)).toBe(8 * H);
  });

  it('moves a rise of closed time to the next open time, and drops one with none after it', () => {
    // Rises at 12:00-13:00 (closed), 13:00-18:00 (open from 17:00) and 21:00-23:00 (after the last window).
    const curve = {
      atMs: [
        at('2026-03-06T12:00:00-08:00'),
        at('2026-03-06T13:00:00-08:00'),
        at('2026-03-06T18:00:00-08:00'),
        at('2026-03-06T21:00:00-08:00'),
        at('2026-03-06T23:00:00-08:00'),
      ],
      micros: [0, 100, 200, 200, 300],
    };
    const r = restrictCurve(curve, w);
    expect(evaluateCurve(r, at('2026-03-06T16:59:00-08:00'))).toBe(0);
    expect(evaluateCurve(r, at('2026-03-06T18:00:00-08:00'))).toBe(200);
    expect(evaluateCurve(r, at('2026-03-06T23:30:00-08:00'))).toBe(200);
    for (let i = 1; i < r.atMs.length; i++) {
      expect(r.atMs[i] as number).toBeGreaterThan(r.atMs[i - 1] as number);
      expect(r.micros[i] as number).toBeGreaterThanOrEqual(r.micros[i - 1] as number);
    }
  });
});
