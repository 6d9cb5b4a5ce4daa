/**
 * Dayparting: a plan spends only inside its windows — 15-minute-aligned spans of the local day,
 * per weekday, in an explicit time zone (docs/spend.md, "Dayparting"). Pure functions: the text
 * form the CLI takes, the validation, and a plan-day's windows as instants ({@link DayWindows}),
 * which the guard (no bid outside them), the controller (the curve rises only inside them) and
 * the simulator (spend outside them counted) read.
 *
 * A window covers every instant whose local wall time in the daypart's zone is inside it and
 * whose local weekday is one of its days: on a spring-forward day a window inside the skipped hour
 * is empty; on a fall-back day the repeated hour is in the window both times.
 */
import { errorKind } from '../errors.js';
import { type DayWindow, isTimeZone } from './time-zone.js';

/** One window: local weekdays (ISO: 1 = Monday … 7 = Sunday) and a span of the local day. */
export interface DaypartWindow {
  /** The weekdays it applies on, ISO numbers, ascending, no repeats. */
  readonly weekdays: readonly number[];
  /** Start, minutes after local midnight, a multiple of 15 in [0, 1425]. */
  readonly fromMinute: number;
  /** End (exclusive), minutes after local midnight, a multiple of 15 in [15, 1440], after the start. */
  readonly toMinute: number;
}

/** A plan's dayparting. */
export interface Daypart {
  /** IANA zone the windows are read in; absent: the account's zone. */
  readonly timeZone?: string;
  /** The windows; an instant inside any of them may spend. */
  readonly windows: readonly DaypartWindow[];
}

/** Most windows a plan may have (a window per weekday and quarter hour is never needed). */
export const MAX_DAYPART_WINDOWS = 64;

const QUARTER_MS = 15 * 60_000;
const NAMES = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;

/** Thrown for dayparting text or a stored daypart that is not valid; the message says what to do. */
export class DaypartError extends errorKind('DaypartError', 'budget.daypart') {}

/** Problems of a daypart (empty when valid): the field and what to do. */
export function daypartProblems(d: Daypart): { field: string; message: string }[] {
  const out: { field: string; message: string }[] = [];
  if (d.timeZone !== undefined && !isTimeZone(d.timeZone)) {
    out.push({
      field: 'daypart.timeZone',
      message: `${JSON.stringify(d.timeZone)} is not a time zone: give an IANA name such as America/Los_Angeles.`,
    });
  }
  if (!Array.isArray(d.windows) || d.windows.length === 0) {
    out.push({ field: 'daypart.windows', message: 'give at least one window, e.g. "mon-fri 08:00-20:00".' });
    return out;
  }
  if (d.windows.length > MAX_DAYPART_WINDOWS) {
    out.push({
      field: 'daypart.windows',
      message: `${d.windows.length} windows: at most ${MAX_DAYPART_WINDOWS}; merge adjacent ones.`,
    });
  }
  d.windows.forEach((w, i) => {
    const at = `daypart.windows[${i}]`;
    const days = w?.weekdays;
    if (
      !Array.isArray(days) ||
      days.length === 0 ||
      days.some((x, k) => !Number.isInteger(x) || x < 1 || x > 7 || (k > 0 && x <= (days[k - 1] as number)))
    ) {
      out.push({
        field: `${at}.weekdays`,
        message: 'give weekdays 1 (Monday) to 7 (Sunday), ascending, each once.',
      });
    }
    const { fromMinute: a, toMinute: b } = w ?? ({} as DaypartWindow);
    const minute = (x: unknown, max: number) =>
      Number.isInteger(x) && (x as number) >= 0 && (x as number) <= max && (x as number) % 15 === 0;
    if (!minute(a, 1425) || !minute(b, 1440)) {
      out.push({
        field: at,
        message: 'start and end must be on a quarter hour (hh:00, :15, :30, :45), 00:00–24:00.',
      });
    } else if (b <= a) {
      out.push({
        field: at,
        message: `${clock(a)}-${clock(b)} ends before it starts: split a window across midnight in two (mon 22:00-24:00, tue 00:00-02:00).`,
      });
    }
  });
  return out;
}

/** `hh:mm` of minutes after midnight. */
function clock(minutes: number): string {
  return `${String(Math.floor(minutes / 60)).padStart(2, '0')}:${String(minutes % 60).padStart(2, '0')}`;
}

/**
 * Parses the CLI's text form: windows separated by `;`, each `DAYS HH:MM-HH:MM`, DAYS a comma list
 * of weekdays (`mon`…`sun`) and ranges (`mon-fri`, `fri-mon` wraps), or `daily`. Throws
 * {@link DaypartError} naming the window and what to write instead.
 */
export function parseDaypartText(text: string, timeZone?: string): Daypart {
  const parts = text
    .split(';')
    .map((x) => x.trim())
    .filter((x) => x.length > 0);
  if (parts.length === 0) throw new DaypartError('no window: give windows such as "mon-fri 08:00-20:00".');
  const windows = parts.map((part) => {
    const m = /^(\S+)(?:\s+(\S+))?$/.exec(part);
    if (!m?.[2]) {
      throw new DaypartError(
        `window "${part}" has no time: write it as "${m?.[1] ?? 'mon-fri'} 08:00-20:00" (days, then start-end).`,
      );
    }
    const span = /^(\d{1,2}):(\d{2})-(\d{1,2}):(\d{2})$/.exec(m[2]);
    if (!span) throw new DaypartError(`window "${part}": the time must be HH:MM-HH:MM, e.g. 08:00-20:00.`);
    const [h0, m0, h1, m1] = span.slice(1).map(Number) as [number, number, number, number];
    if (h0 > 24 || h1 > 24 || m0 > 59 || m1 > 59)
      throw new DaypartError(`window "${part}": ${m[2]} is not a time of day.`);
    return { weekdays: parseDays(m[1] as string, part), fromMinute: h0 * 60 + m0, toMinute: h1 * 60 + m1 };
  });
  const daypart: Daypart = timeZone === undefined ? { windows } : { timeZone, windows };
  const problem = daypartProblems(daypart)[0];
  if (problem) {
    const i = /windows\[(\d+)\]/.exec(problem.field)?.[1];
    throw new DaypartError(
      i === undefined ? problem.message : `window "${parts[Number(i)]}": ${problem.message}`,
    );
  }
  return daypart;
}

function parseDays(text: string, part: string): number[] {
  if (text.toLowerCase() === 'daily') return [1, 2, 3, 4, 5, 6, 7];
  const days = new Set<number>();
  const day = (name: string) => {
    const i = NAMES.indexOf(name.toLowerCase().slice(0, 3) as (typeof NAMES)[number]);
    if (i < 0 || name.length < 3) {
      throw new DaypartError(
        `window "${part}": "${name}" is not a weekday: use mon, tue, wed, thu, fri, sat, sun or daily.`,
      );
    }
    return i + 1;
  };
  for (const item of text.split(',')) {
    const [a, b, extra] = item.split('-');
    if (extra !== undefined || !a)
      throw new DaypartError(`window "${part}": "${item}" is not a weekday or a range such as mon-fri.`);
    const from = day(a);
    const to = b === undefined ? from : day(b);
    for (let d = from; ; d = (d % 7) + 1) {
      days.add(d);
      if (d === to) break;
    }
  }
  return [...days].sort((x, y) => x - y);
}

/** The CLI text of a daypart (`mon,tue 08:00-20:00; …`), for listings. */
export function daypartText(d: Daypart): string {
  return d.windows
    .map(
      (w) => `${w.weekdays.map((x) => NAMES[x - 1]).join(',')} ${clock(w.fromMinute)}-${clock(w.toMinute)}`,
    )
    .join('; ');
}

/**
 * A plan-day's windows as instants: sorted, disjoint [start, end) pairs inside the day, and a
 * fingerprint of them (a window change gives another one; the controller re-plans on it).
 */
export interface DayWindows {
  /** [start0, end0, start1, end1, …], epoch ms. */
  readonly spans: readonly number[];
  /** Total time inside the windows, ms. */
  readonly openMs: number;
  readonly hash: number;
}

const labelCache = new Map<string, Int16Array>();
const formatters = new Map<string, Intl.DateTimeFormat>();

/**
 * The local label of every quarter hour of [startMs, endMs) in `zone`: ISO weekday × 96 + the
 * quarter of the local day (0–95). Memoised per zone and span.
 */
export function quarterLabels(zone: string, startMs: number, endMs: number): Int16Array {
  const key = `${zone}|${startMs}|${endMs}`;
  const hit = labelCache.get(key);
  if (hit) return hit;
  let fmt = formatters.get(zone);
  if (!fmt) {
    fmt = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      weekday: 'short',
      hour: '2-digit',
      minute: '2-digit',
      hourCycle: 'h23',
    });
    formatters.set(zone, fmt);
  }
  const n = Math.ceil((endMs - startMs) / QUARTER_MS);
  const out = new Int16Array(n);
  for (let q = 0; q < n; q++) {
    let wd = 0;
    let h = 0;
    let m = 0;
    for (const p of fmt.formatToParts(startMs + q * QUARTER_MS)) {
      if (p.type === 'weekday') wd = NAMES.indexOf(p.value.toLowerCase() as (typeof NAMES)[number]) + 1;
      else if (p.type === 'hour') h = Number(p.value);
      else if (p.type === 'minute') m = Number(p.value);
    }
    // A quarter that starts off the zone's quarter grid (an offset not a multiple of 15 minutes)
    // is labelled by the quarter it starts in.
    out[q] = wd * 96 + h * 4 + Math.floor(m / 15);
  }
  if (labelCache.size >= 4096) labelCache.delete(labelCache.keys().next().value as string);
  labelCache.set(key, out);
  return out;
}

/** The windows of `daypart` on the plan-day `day` (its zone: the daypart's, else `accountZone`). */
export function dayWindowsOf(daypart: Daypart, accountZone: string, day: DayWindow): DayWindows {
  const labels = quarterLabels(daypart.timeZone ?? accountZone, day.startMs, day.endMs);
  const open = new Uint8Array(8 * 96);
  for (const w of daypart.windows) {
    for (const wd of w.weekdays) {
      for (let q = w.fromMinute / 15; q < w.toMinute / 15; q++) open[wd * 96 + q] = 1;
    }
  }
  const spans: number[] = [];
  let hash = 0x811c9dc5;
  let openMs = 0;
  for (let q = 0; q < labels.length; q++) {
    if (!open[labels[q] as number]) continue;
    const s = day.startMs + q * QUARTER_MS;
    const e = Math.min(day.endMs, s + QUARTER_MS);
    openMs += e - s;
    hash = Math.imul(hash ^ q, 0x01000193);
    if (spans.length > 0 && spans[spans.length - 1] === s) spans[spans.length - 1] = e;
    else spans.push(s, e);
  }
  return { spans, openMs, hash: (hash ^ labels.length) >>> 0 };
}

/** True when `nowMs` is inside one of the windows. */
export function isOpenAt(w: DayWindows, nowMs: number): boolean {
  const s = w.spans;
  for (let i = 0; i < s.length; i += 2) {
    if (nowMs < (s[i] as number)) return false;
    if (nowMs < (s[i + 1] as number)) return true;
  }
  return false;
}

/** Time inside the windows within [fromMs, toMs), ms. */
export function openTimeBetween(w: DayWindows, fromMs: number, toMs: number): number {
  const s = w.spans;
  let total = 0;
  for (let i = 0; i < s.length; i += 2) {
    const a = Math.max(fromMs, s[i] as number);
    const b = Math.min(toMs, s[i + 1] as number);
    if (b > a) total += b - a;
  }
  return total;
}

const byPlanDay = new WeakMap<object, { startMs: number; windows: DayWindows }>();

/**
 * The windows of a plan on `day`, memoised per plan object and day (every bid of a dayparted plan
 * asks); undefined for a plan without dayparting.
 */
export function planDayWindows(
  plan: { readonly daypart?: Daypart; readonly timeZone: string },
  day: DayWindow,
): DayWindows | undefined {
  const d = plan.daypart;
  if (!d) return undefined;
  const hit = byPlanDay.get(plan);
  if (hit && hit.startMs === day.startMs) return hit.windows;
  const windows = dayWindowsOf(d, plan.timeZone, day);
  byPlanDay.set(plan, { startMs: day.startMs, windows });
  return windows;
}
