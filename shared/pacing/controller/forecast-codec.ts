/**
 * The stored text form of a {@link TrafficForecast} (`f1|…`): levels as two base-64 characters
 * each, so encode/decode is exact and any leader rebuilds the identical curve from what another
 * stored.
 */
import { COVER_UNITS, EMPTY_FORECAST, OBS_SLOTS, type TrafficForecast } from './forecast.js';

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
/** Character code → its 6-bit value, −1 for a character outside {@link B64}. */
const B64_CODE = new Int8Array(128).fill(-1);
for (let i = 0; i < B64.length; i++) B64_CODE[B64.charCodeAt(i)] = i;
const B64_BYTES = Buffer.from(B64, 'latin1');

const BODY = 2 * (168 + 24 + OBS_SLOTS) + OBS_SLOTS;
/** `f1|` + a day + `|` + the body: the longest forecast text. */
const ENCODE_BUFFER = Buffer.alloc(3 + 10 + 1 + BODY);

/** Writes each level as 2 characters at `p`; returns the position after them. */
function put2(b: Buffer, p: number, levels: readonly number[]): number {
  for (let i = 0; i < levels.length; i++) {
    const q = levels[i] as number;
    b[p++] = B64_BYTES[(q >> 6) & 63] as number;
    b[p++] = B64_BYTES[q & 63] as number;
  }
  return p;
}

/**
 * Compact text form: `f1|<obsDay>|<2 chars × 168 week><× 24 day><× 25 obs><1 char × 25 cover>`.
 * Written into one buffer and read out as one flat string: a takeover's publish compares (and a
 * new plan-day's writes) 100,000-odd of them, and an array of 459 one-character strings joined
 * cost ~20 µs a forecast (a CPU profile of `npm run bench -- pacer`).
 */
export function encodeForecast(f: TrafficForecast): string {
  const b = f.obsDay.length <= 10 ? ENCODE_BUFFER : Buffer.alloc(4 + f.obsDay.length + BODY);
  b.write('f1|', 0, 'latin1');
  let p = 3 + b.write(f.obsDay, 3, 'latin1');
  b[p++] = 0x7c; // '|'
  p = put2(b, p, f.hourOfWeek);
  p = put2(b, p, f.hourOfDay);
  p = put2(b, p, f.obs);
  for (let i = 0; i < f.cover.length; i++) b[p++] = B64_BYTES[(f.cover[i] as number) & 63] as number;
  return b.toString('latin1', 0, p);
}

/**
 * `n` 2-character levels of `raw` from `at`; undefined at a character outside the alphabet. All
 * zero: the shared frozen zeros of {@link EMPTY_FORECAST} (a prior has no week levels and no
 * observations: a takeover decodes 100,000-odd of them, each otherwise 200 numbers).
 */
function read2(raw: string, at: number, n: number, empty: readonly number[]): readonly number[] | undefined {
  const out = new Array<number>(n);
  let any = 0;
  for (let i = 0; i < n; i++) {
    const hi = raw.charCodeAt(at + 2 * i);
    const lo = raw.charCodeAt(at + 2 * i + 1);
    const a = hi < 128 ? (B64_CODE[hi] as number) : -1;
    const z = lo < 128 ? (B64_CODE[lo] as number) : -1;
    if (a < 0 || z < 0) return undefined;
    out[i] = (a << 6) | z;
    any |= a | z;
  }
  return any === 0 ? empty : out;
}

/** The last `obsDay` decoded: one string per day for every forecast decoded (a takeover's 100,000). */
let lastObsDay = '';

/** Parses {@link encodeForecast}'s output; undefined when it is not a valid forecast. */
export function decodeForecast(raw: string): TrafficForecast | undefined {
  if (raw.charCodeAt(0) !== 0x66 || raw.charCodeAt(1) !== 0x31 || raw.charCodeAt(2) !== 0x7c)
    return undefined;
  const bar = raw.indexOf('|', 3);
  if (bar < 0 || raw.length - bar - 1 !== BODY) return undefined;
  let obsDay = '';
  if (bar > 3) {
    obsDay = raw.startsWith(lastObsDay, 3) && bar === 3 + lastObsDay.length ? lastObsDay : raw.slice(3, bar);
    if (!/^\d{4}-\d{2}-\d{2}$/.test(obsDay)) return undefined;
    lastObsDay = obsDay;
  }
  const from = bar + 1;
  const hourOfWeek = read2(raw, from, 168, EMPTY_FORECAST.hourOfWeek);
  const hourOfDay = read2(raw, from + 2 * 168, 24, EMPTY_FORECAST.hourOfDay);
  const obs = read2(raw, from + 2 * (168 + 24), OBS_SLOTS, EMPTY_FORECAST.obs);
  if (hourOfWeek === undefined || hourOfDay === undefined || obs === undefined) return undefined;
  const cover = new Array<number>(OBS_SLOTS);
  let any = 0;
  for (let i = 0, at = from + 2 * (168 + 24 + OBS_SLOTS); i < OBS_SLOTS; i++) {
    const code = raw.charCodeAt(at + i);
    const c = code < 128 ? (B64_CODE[code] as number) : -1;
    if (c < 0 || c > COVER_UNITS) return undefined;
    cover[i] = c;
    any |= c;
  }
  return { hourOfWeek, hourOfDay, obsDay, obs, cover: any === 0 ? EMPTY_FORECAST.cover : cover };
}
