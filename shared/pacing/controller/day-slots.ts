/**
 * The hour slots of an advertiser day: knots every hour (UTC) from the day's first instant to its
 * last, each slot labelled with its local hour and weekday. A 23 h spring-forward day has 23 slots
 * (one local hour is skipped), a 25 h fall-back day 25 (one local hour appears twice), so the
 * target curve and the hour-of-week forecast follow the wall clock the advertiser's users live by.
 *
 * Labels come from `Intl` (slow, microseconds per call), so they are computed once per
 * (time zone, day) and shared by every plan of that zone: a pure memo, bounded in size.
 */
import { type DayWindow, dayWindowOf } from '../../budget/time-zone.js';

const HOUR_MS = 3_600_000;
const WEEKDAYS: Record<string, number> = { Mon: 0, Tue: 1, Wed: 2, Thu: 3, Fri: 4, Sat: 5, Sun: 6 };

/** Hour slots of one advertiser day. */
export interface DaySlots {
  readonly day: string;
  readonly startMs: number;
  readonly endMs: number;
  /** n + 1 instants: the day's start, every hour after it, and its end (the last slot may be shorter). */
  readonly knots: readonly number[];
  /** Local hour (0–23) at the start of each of the n slots. */
  readonly hours: readonly number[];
  /** Local weekday of each slot, 0 = Monday … 6 = Sunday. */
  readonly weekdays: readonly number[];
}

const formatters = new Map<string, Intl.DateTimeFormat>();
const cache = new Map<string, DaySlots>();
/** Enough for every zone of a few days; cleared wholesale beyond it (a memo, not a store). */
const CACHE_LIMIT = 4096;

function formatterOf(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', { timeZone, hourCycle: 'h23', weekday: 'short', hour: '2-digit' });
    formatters.set(timeZone, f);
  }
  return f;
}

function label(epochMs: number, timeZone: string): { hour: number; weekday: number } {
  let hour = 0;
  let weekday = 0;
  for (const p of formatterOf(timeZone).formatToParts(epochMs)) {
    if (p.type === 'hour') hour = Number(p.value) % 24;
    else if (p.type === 'weekday') weekday = WEEKDAYS[p.value] ?? 0;
  }
  return { hour, weekday };
}

/** The hour slots of `day` in `timeZone` (memoised per zone and day). */
export function daySlots(timeZone: string, day: DayWindow): DaySlots {
  const key = `${timeZone}|${day.day}`;
  const hit = cache.get(key);
  if (hit) return hit;
  const knots: number[] = [];
  const hours: number[] = [];
  const weekdays: number[] = [];
  for (let t = day.startMs; t < day.endMs; t += HOUR_MS) {
    knots.push(t);
    const l = label(t, timeZone);
    hours.push(l.hour);
    weekdays.push(l.weekday);
  }
  knots.push(day.endMs);
  const slots: DaySlots = { day: day.day, startMs: day.startMs, endMs: day.endMs, knots, hours, weekdays };
  if (cache.size >= CACHE_LIMIT) cache.clear();
  cache.set(key, slots);
  return slots;
}

/** The hour slots of a named local day (`YYYY-MM-DD`) in `timeZone` (memoised). */
export function slotsOfDay(timeZone: string, day: string): DaySlots {
  return cache.get(`${timeZone}|${day}`) ?? daySlots(timeZone, dayWindowOf(day, timeZone));
}

/** Index of the slot holding `t` (clamped to the day's slots). */
export function slotAt(slots: DaySlots, t: number): number {
  const i = Math.floor((t - slots.startMs) / HOUR_MS);
  const last = slots.hours.length - 1;
  return i < 0 ? 0 : i > last ? last : i;
}

let lastDay = '';
let lastPrevious = '';

/** The calendar day before `day` (`YYYY-MM-DD`), by date arithmetic only (memo of the last call). */
export function previousDay(day: string): string {
  if (day !== lastDay) {
    lastPrevious = new Date(Date.parse(`${day}T00:00:00Z`) - 86_400_000).toISOString().slice(0, 10);
    lastDay = day;
  }
  return lastPrevious;
}
