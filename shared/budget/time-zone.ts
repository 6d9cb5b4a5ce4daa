/**
 * Advertiser days: a budget day begins at local midnight in the advertiser's IANA time zone,
 * so a day is 23, 24 or 25 hours long around DST switches. Pure functions over `Intl` (no
 * dependency); results are cached per zone because `Intl.DateTimeFormat` is slow to build.
 */
import { errorKind, PacelineError } from '../errors.js';

/** Thrown for a time zone name `Intl` does not know. */
export class InvalidTimeZoneError extends PacelineError {
  override readonly name = 'InvalidTimeZoneError';
  override readonly code = 'budget.invalid-time-zone';
  constructor(
    readonly timeZone: string,
    options?: { cause?: unknown },
  ) {
    super(
      `Unknown time zone ${JSON.stringify(timeZone)}: use an IANA name such as "America/Los_Angeles" or "Pacific/Auckland".`,
      options,
    );
  }
}

/** One advertiser day: `[startMs, endMs)` in epoch ms, named by its local date. */
export interface DayWindow {
  /** Local calendar date, `YYYY-MM-DD`; part of Redis keys and ledger keys. */
  readonly day: string;
  /** First instant of the day (local midnight), epoch ms. */
  readonly startMs: number;
  /** First instant of the next day, epoch ms. */
  readonly endMs: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterOf(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    try {
      f = new Intl.DateTimeFormat('en-US', {
        timeZone,
        hourCycle: 'h23',
        year: 'numeric',
        month: '2-digit',
        day: '2-digit',
        hour: '2-digit',
        minute: '2-digit',
        second: '2-digit',
      });
    } catch (error) {
      throw new InvalidTimeZoneError(timeZone, { cause: error });
    }
    formatters.set(timeZone, f);
  }
  return f;
}

/** Throws {@link InvalidTimeZoneError} unless `timeZone` is a zone `Intl` knows. */
export function assertTimeZone(timeZone: string): void {
  formatterOf(timeZone);
}

/** True when `timeZone` is a zone `Intl` knows (a setting's check, where the caller names the setting). */
export function isTimeZone(timeZone: string): boolean {
  try {
    formatterOf(timeZone);
    return true;
  } catch (error) {
    if (error instanceof InvalidTimeZoneError) return false;
    throw error;
  }
}

/**
 * The one spelling of a zone that is stored: `america/los_angeles`, `US/Pacific` → the runtime's
 * canonical id (`America/Los_Angeles`), `GMT` / `Etc/UTC` → `UTC`. Links and their targets have the
 * same rules, so days are unchanged; what changes is that equal zones compare equal. Offsets such
 * as `+01:00` are not zones (no DST rules) and are refused.
 */
export function canonicalTimeZone(timeZone: string): string {
  return formatterOf(timeZone).resolvedOptions().timeZone;
}

/** Thrown for a day that is not a real calendar date `YYYY-MM-DD`. */
export class InvalidDayError extends errorKind('InvalidDayError', 'budget.invalid-day') {}

/** Parses `YYYY-MM-DD`, refusing dates that do not exist (2026-13-45, 2026-02-29). */
export function parseDay(day: string): { y: number; m: number; d: number } {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(day);
  if (!match) throw new InvalidDayError(`Day ${JSON.stringify(day)} is not YYYY-MM-DD.`);
  const [y, m, d] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const t = new Date(Date.UTC(y, m - 1, d));
  if (y < 1970 || t.getUTCFullYear() !== y || t.getUTCMonth() !== m - 1 || t.getUTCDate() !== d) {
    throw new InvalidDayError(`Day ${JSON.stringify(day)} is not a calendar date.`);
  }
  return { y, m, d };
}

interface LocalParts {
  y: number;
  m: number;
  d: number;
  h: number;
  mi: number;
  s: number;
}

function localParts(epochMs: number, timeZone: string): LocalParts {
  const out: LocalParts = { y: 0, m: 0, d: 0, h: 0, mi: 0, s: 0 };
  for (const p of formatterOf(timeZone).formatToParts(epochMs)) {
    if (p.type === 'year') out.y = Number(p.value);
    else if (p.type === 'month') out.m = Number(p.value);
    else if (p.type === 'day') out.d = Number(p.value);
    else if (p.type === 'hour') out.h = Number(p.value);
    else if (p.type === 'minute') out.mi = Number(p.value);
    else if (p.type === 'second') out.s = Number(p.value);
  }
  return out;
}

/** Offset of local time from UTC at `epochMs`, in ms (local = utc + offset). */
function offsetAt(epochMs: number, timeZone: string): number {
  const p = localParts(epochMs, timeZone);
  const asUtc = Date.UTC(p.y, p.m - 1, p.d, p.h, p.mi, p.s);
  return asUtc - (epochMs - (((epochMs % 1000) + 1000) % 1000));
}

function dateKey(y: number, m: number, d: number): string {
  return `${String(y).padStart(4, '0')}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}`;
}

/** The local date (`YYYY-MM-DD`) of an instant. */
export function localDate(epochMs: number, timeZone: string): string {
  const p = localParts(epochMs, timeZone);
  return dateKey(p.y, p.m, p.d);
}

/**
 * First instant whose local date is `y-m-d`: local midnight, or — in the few zones that skip
 * midnight on a DST day — the first instant after the gap.
 */
function startOfLocalDate(y: number, m: number, d: number, timeZone: string): number {
  const wallMidnight = Date.UTC(y, m - 1, d);
  // Two fixed-point steps settle the offset on either side of a transition.
  let t = wallMidnight - offsetAt(wallMidnight, timeZone);
  t = wallMidnight - offsetAt(t, timeZone);
  const target = dateKey(y, m, d);
  const at = localDate(t, timeZone);
  if (at === target && localDate(t - 1, timeZone) !== target) return t;
  // Midnight does not exist (or is ambiguous): binary-search the date boundary within ±3 h.
  let lo = t - 3 * 3_600_000;
  let hi = t + 3 * 3_600_000;
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (localDate(mid, timeZone) < target) lo = mid;
    else hi = mid;
  }
  return hi;
}

/**
 * Last window computed per zone: callers ask for the same day over and over (every bid, notice and
 * pacer tick), and `Intl` costs tens of µs per window. A pure memo: a window is a function of
 * (zone, instant) and the hit test is exact.
 */
const lastWindow = new Map<string, DayWindow>();

/** The advertiser day containing `epochMs` in `timeZone`. */
export function dayWindow(epochMs: number, timeZone: string): DayWindow {
  const hit = lastWindow.get(timeZone);
  if (hit && epochMs >= hit.startMs && epochMs < hit.endMs) return hit;
  const w = computeDayWindow(epochMs, timeZone);
  lastWindow.set(timeZone, w);
  return w;
}

function computeDayWindow(epochMs: number, timeZone: string): DayWindow {
  const p = localParts(epochMs, timeZone);
  const startMs = startOfLocalDate(p.y, p.m, p.d, timeZone);
  const next = new Date(Date.UTC(p.y, p.m - 1, p.d + 1));
  const endMs = startOfLocalDate(next.getUTCFullYear(), next.getUTCMonth() + 1, next.getUTCDate(), timeZone);
  return { day: dateKey(p.y, p.m, p.d), startMs, endMs };
}

/** The window of a named local day (`YYYY-MM-DD`) in `timeZone`. */
export function dayWindowOf(day: string, timeZone: string): DayWindow {
  const { y, m, d } = parseDay(day);
  return dayWindow(startOfLocalDate(y, m, d, timeZone), timeZone);
}

/** The local date `n` calendar days after `day` (`YYYY-MM-DD`; `n` may be negative). */
export function addDays(day: string, n: number): string {
  const { y, m, d } = parseDay(day);
  return new Date(Date.UTC(y, m - 1, d + n)).toISOString().slice(0, 10);
}

/** Calendar days from `from` to `to` (`YYYY-MM-DD`): 0 for the same day, negative when `to` is earlier. */
export function daysBetween(from: string, to: string): number {
  const a = parseDay(from);
  const b = parseDay(to);
  return Math.round((Date.UTC(b.y, b.m - 1, b.d) - Date.UTC(a.y, a.m - 1, a.d)) / 86_400_000);
}
