/**
 * Cap checks over long windows through the day summary (docs/counting.md, "Long windows: the day
 * summary"). With a retention longer than the store's `rawDays`, maintenance keeps beside each
 * user's log a day table (which byte runs hold which UTC day) and per-day aggregates
 * (shared/redis/scripts/counting-days.lua). A check whose windows reach further back than
 * `rawDays` then reads, in one MULTI/EXEC snapshot, the recent days and the days holding a window
 * start event by event (exact at any millisecond) and every other old day as its aggregates: a
 * whole day inside or outside each window counts the same as its events would. A check whose
 * windows all fit in `rawDays` reads the log as before.
 */
import type { RedisClient } from '../redis/connect.js';
import { atomicViaClient, type RawValueReader, type ValueReader } from '../redis/resp/value-reader.js';
import { DAY_MS } from '../time/clock.js';
import { type CapCandidate, type CapRule, type CountingCap, capSince } from './cap-rules.js';
import type { CapSubset } from './cap-setup.js';

/** What a check over the day summary asks the read script for. */
export interface DaysRead {
  /** Days from this one on are read event by event (epoch ms / 86,400,000). */
  readonly rawFromDay: number;
  /** Days before this one count in no window. */
  readonly firstDay: number;
  /** The older days holding a window start (each once): read event by event. */
  readonly boundary: readonly number[];
}

/**
 * The read a check needs when a window of `candidates` starts before day `rawFromDay`
 * (undefined: the plain read covers every window). Window starts are clamped to `horizon`, the
 * retention's start; a cap the check will refuse (an invalid one) leaves the plain read, whose
 * evaluation names it. With `subset`, only its caps (one identity's) are read for.
 */
export function daysRead(
  candidates: readonly CapCandidate[],
  now: number,
  horizon: number,
  rawFromDay: number,
  subset?: CapSubset,
): DaysRead | undefined {
  const rawFrom = rawFromDay * DAY_MS;
  let firstDay = rawFromDay;
  const boundary: number[] = [];
  let i = 0;
  for (let ci = 0; ci < candidates.length; ci++) {
    const c = candidates[ci] as CapCandidate;
    for (let k = 0; k < c.caps.length; k++, i++) {
      if (subset !== undefined && subset.groupOf[i] !== subset.group) continue;
      const rule = c.caps[k] as CapRule;
      if (rule.block !== undefined) continue;
      let since: number;
      try {
        since = capSince(rule as CountingCap, c, ci, k, now, horizon);
      } catch {
        return undefined;
      }
      if (!Number.isSafeInteger(since)) return undefined;
      const start = Math.max(since, horizon);
      if (start >= rawFrom) continue;
      const day = Math.floor(start / DAY_MS);
      if (day < firstDay) firstDay = day;
      // Starts repeat from cap to cap; each day is named once (a few days at most).
      if (!boundary.includes(day)) boundary.push(day);
    }
  }
  return firstDay < rawFromDay ? { rawFromDay, firstDay, boundary } : undefined;
}

/** A day table (shared/redis/scripts/counting-days.lua): the log bytes it indexes, by day. */
export interface DayTable {
  /** Bytes of the log the table indexes; later bytes are the suffix, read whole. */
  readonly prefix: number;
  /** The aggregates key's length when the table was written. */
  readonly aggregatesLength: number;
  /** Runs of one day's members: day, start, end (0-based, exclusive), ascending by day then start. */
  readonly ranges: Uint32Array;
  /** Per aggregated day: its aggregates' start and end in the aggregates key. */
  readonly aggregates: Map<number, readonly [number, number]>;
}

/** Bytes of the day table's header and of each of its entries. */
const HEADER_BYTES = 17;
const ENTRY_BYTES = 12;

/** A plan that reads no day as its aggregates: the whole log is the cheaper read. */
export const NO_GAIN: unique symbol = Symbol('no day read as aggregates');

/** The day table, or undefined for one of another format or truncated. */
function parseTable(table: Buffer): DayTable | undefined {
  if (table.length < HEADER_BYTES || table[0] !== 3) return undefined;
  const ranges = table.readUInt16BE(13);
  const aggregated = table.readUInt16BE(15);
  if (table.length !== HEADER_BYTES + ENTRY_BYTES * (ranges + aggregated)) return undefined;
  const list = new Uint32Array(ranges * 3);
  let at = HEADER_BYTES;
  for (let i = 0; i < list.length; i++, at += 4) list[i] = table.readUInt32BE(at);
  const aggregates = new Map<number, readonly [number, number]>();
  for (let i = 0; i < aggregated; i++, at += ENTRY_BYTES) {
    aggregates.set(table.readUInt32BE(at), [table.readUInt32BE(at + 4), table.readUInt32BE(at + 8)]);
  }
  return { prefix: table.readUInt32BE(1), aggregatesLength: table.readUInt32BE(5), ranges: list, aggregates };
}

/** Most byte ranges one snapshot reads; a plan needing more reads the whole log. */
const MAX_SNAPSHOT_RANGES = 160;

/** Byte ranges [start, end) of one key, merged where adjacent. */
function addRange(ranges: number[], start: number, end: number): void {
  if (ranges.length > 0 && ranges[ranges.length - 1] === start) ranges[ranges.length - 1] = end;
  else ranges.push(start, end);
}

/** The keys of a key group that a read through the summary touches. */
export interface SummaryKeys {
  readonly log: string;
  /** The summary: header and day table (small). */
  readonly days: string;
  /** The aggregates' blob. */
  readonly aggregates: string;
}

/**
 * The commands of the snapshot read for `read` over the summary `index` (parsed: `table`), with
 * each reply's expected length (−1: any); {@link NO_GAIN} when it would read no day as its
 * aggregates; undefined when the index is unusable.
 */
export function snapshotCommands(
  keys: SummaryKeys,
  index: Buffer,
  table: DayTable | undefined,
  read: DaysRead,
): SnapshotPlan | typeof NO_GAIN | undefined {
  if (table === undefined) return undefined;
  const boundary = read.boundary;
  const raw: number[] = [];
  const agg: number[] = [];
  const r = table.ranges;
  for (let i = 0; i < r.length; ) {
    // One day's runs: [i, j).
    const day = r[i] as number;
    let j = i;
    let rawBytes = 0;
    while (j < r.length && r[j] === day) {
      rawBytes += (r[j + 2] as number) - (r[j + 1] as number);
      j += 3;
    }
    if (day >= read.firstDay) {
      const counts = table.aggregates.get(day);
      // A day's aggregates are read only when they are fewer bytes (fewer entries to scan) than
      // its members: a user with few repeats a day reads members, as without a summary.
      const members =
        day >= read.rawFromDay ||
        boundary.includes(day) ||
        counts === undefined ||
        counts[1] - counts[0] >= rawBytes;
      if (members) for (let k = i; k < j; k += 3) addRange(raw, r[k + 1] as number, r[k + 2] as number);
      else addRange(agg, counts[0], counts[1]);
    }
    i = j;
  }
  // More ranges than a snapshot should carry (a log fragmented by a backfill, until maintenance
  // regroups it): the whole log is one GET.
  if (raw.length / 2 > MAX_SNAPSHOT_RANGES) return undefined;
  // No day is read as its aggregates (a user with few repeats a day): the snapshot would read the
  // same members as the whole log, in more commands. One GET of the log is the cheaper read.
  if (agg.length === 0) return NO_GAIN;
  // The summary read again inside the snapshot: equal bytes prove the ranges still hold.
  const commands: string[][] = [['GET', keys.days]];
  const lengths = [index.length];
  for (let i = 0; i < raw.length; i += 2) {
    commands.push(['GETRANGE', keys.log, String(raw[i]), String((raw[i + 1] as number) - 1)]);
    lengths.push((raw[i + 1] as number) - (raw[i] as number));
  }
  // The suffix: members appended since the summary.
  commands.push(['GETRANGE', keys.log, String(table.prefix), '-1']);
  lengths.push(-1);
  const rawParts = commands.length - 1;
  // The aggregates key whole, in one command (its days are laid out in the order maintenance
  // wrote them, not adjacent): at most about twice the bytes needed, garbage included.
  if (agg.length > 0) {
    commands.push(['GET', keys.aggregates]);
    lengths.push(table.aggregatesLength);
  }
  return { commands, lengths, rawParts, aggregateRanges: agg };
}

/** What a snapshot reads, and how to check and cut its reply. */
export interface SnapshotPlan {
  readonly commands: string[][];
  /** Per reply: its expected length (−1: any). */
  readonly lengths: number[];
  /** Replies 1 … rawParts are members; a last one, when there are aggregates, their key. */
  readonly rawParts: number;
  /** The aggregates to scan: [start, end) pairs in the aggregates key. */
  readonly aggregateRanges: readonly number[];
}

/**
 * The members and aggregates of a snapshot read, or undefined when the snapshot does not match
 * the index the ranges came from (maintenance rewrote the group in between, or a key was lost):
 * the caller then reads the whole log.
 */
export function snapshotParts(
  index: Buffer,
  plan: SnapshotPlan,
  parts: readonly (Buffer | null)[],
): { members: Buffer[]; aggregates: Buffer[] } | undefined {
  const again = parts[0];
  if (again === null || again === undefined || !again.equals(index)) return undefined;
  for (let i = 1; i < parts.length; i++) {
    const expected = plan.lengths[i] as number;
    if (expected >= 0 && (parts[i]?.length ?? 0) !== expected) return undefined;
  }
  // Views of the reply (valid while it is consumed), scanned part by part: no copy.
  const members: Buffer[] = [];
  for (let i = 1; i <= plan.rawParts; i++) {
    const part = parts[i];
    if (part) members.push(part);
  }
  const aggregates: Buffer[] = [];
  const blob = parts[plan.rawParts + 1];
  const ranges = plan.aggregateRanges;
  if (blob)
    for (let i = 0; i < ranges.length; i += 2) aggregates.push(blob.subarray(ranges[i], ranges[i + 1]));
  return { members, aggregates };
}

/** A snapshot that did not match the day table it was planned from. */
const STALE: unique symbol = Symbol('stale day table');

/**
 * How many checks a cached table that reads no day as aggregates answers ("no gain": the whole
 * log is read) before it is read again: maintenance may since have aggregated days worth reading.
 */
const NO_GAIN_REUSES = 32;

/** A day table kept from check to check: its bytes (what a snapshot proves), parsed once. */
interface CachedTable {
  readonly bytes: Buffer;
  readonly table: DayTable | undefined;
  /** Checks left that this table may send to the whole log without being read again. */
  noGainLeft: number;
}

/** Options of {@link DaySummaryReader}. */
export interface DaySummaryReaderOptions {
  readonly redis: RedisClient;
  /** Reads the day tables (GET). */
  readonly reader: ValueReader;
  /** Runs the snapshots over raw connections; undefined: through ioredis. */
  readonly raw: RawValueReader | undefined;
  /** Day tables kept from check to check, by key group, least recently used first out. */
  readonly cachedTables: number;
}

/** What {@link DaySummaryReader} did with the checks that reached past `rawDays` (cumulative). */
export interface DaySummaryCounts {
  /** Read through the summary: one snapshot. */
  summarised: number;
  /** Fell back to the whole log: no summary, or one that changed or lost a key during the read. */
  whole: number;
  /** Read the whole log because the summary would save nothing: no day it needs is smaller aggregated. */
  noGain: number;
}

/**
 * Reads key groups through their day summary: the day table (from the cache, else one GET),
 * then one MULTI/EXEC snapshot of the ranges it names, which reads the table again so a table
 * rewritten by maintenance in between is noticed (and the read planned again from the table the
 * snapshot saw). A cached table is only a plan: the snapshot proves it before anything counts.
 */
export class DaySummaryReader {
  readonly counts: DaySummaryCounts = { summarised: 0, whole: 0, noGain: 0 };
  private readonly tables = new Map<string, CachedTable>();

  constructor(private readonly options: DaySummaryReaderOptions) {}

  /**
   * `evaluate(members, aggregates)` over `read` of the group `keys` (called synchronously with
   * views of the reply), or undefined when the caller must read the whole log (no summary, one
   * that changed or lost a key during the read, or one that would save nothing).
   */
  read<T>(
    keys: SummaryKeys,
    read: DaysRead,
    evaluate: (members: readonly Buffer[], aggregates: readonly Buffer[]) => T,
  ): Promise<T | undefined> {
    const cached = this.tables.get(keys.days);
    if (cached !== undefined) return this.snapshot(keys, cached, read, evaluate, true);
    return this.options.reader
      .get(keys.days, (table) => (table === null ? null : Buffer.from(table)))
      .then((table) =>
        table === null ? this.whole() : this.snapshot(keys, cachedTable(table), read, evaluate, false),
      );
  }

  private snapshot<T>(
    keys: SummaryKeys,
    entry: CachedTable,
    read: DaysRead,
    evaluate: (members: readonly Buffer[], aggregates: readonly Buffer[]) => T,
    fromCache: boolean,
  ): Promise<T | undefined> {
    const plan = snapshotCommands(keys, entry.bytes, entry.table, read);
    if (plan === undefined) {
      this.tables.delete(keys.days);
      return this.whole();
    }
    if (plan === NO_GAIN) {
      this.counts.noGain++;
      if (fromCache && --entry.noGainLeft <= 0) this.tables.delete(keys.days);
      else this.remember(keys.days, entry);
      return Promise.resolve(undefined);
    }
    const table = entry.bytes;
    let seen: Buffer | null = null;
    const consume = (parts: readonly (Buffer | null)[]): T | typeof STALE => {
      const got = snapshotParts(table, plan, parts);
      if (got !== undefined) return evaluate(got.members, got.aggregates);
      seen = parts[0] ? Buffer.from(parts[0]) : null;
      return STALE;
    };
    const { raw, redis } = this.options;
    const run = raw ? raw.atomic(plan.commands, consume) : atomicViaClient(redis, plan.commands, consume);
    return run.then((result) => {
      if (result !== STALE) {
        this.counts.summarised++;
        this.remember(keys.days, entry);
        return result;
      }
      this.tables.delete(keys.days);
      // A cached table maintenance has replaced since: planned again from the one Redis holds.
      const fresh = seen as Buffer | null;
      if (fromCache && fresh !== null && !fresh.equals(table))
        return this.snapshot(keys, cachedTable(fresh), read, evaluate, false);
      return this.whole();
    });
  }

  private whole(): Promise<undefined> {
    this.counts.whole++;
    return Promise.resolve(undefined);
  }

  private remember(key: string, entry: CachedTable): void {
    const tables = this.tables;
    // Most recently used last; the least recently used goes first.
    tables.delete(key);
    if (tables.size >= this.options.cachedTables) {
      const oldest = tables.keys().next();
      if (!oldest.done) tables.delete(oldest.value);
    }
    if (this.options.cachedTables > 0) tables.set(key, entry);
  }
}

/** A day table read from Redis, parsed once for the checks that reuse it. */
function cachedTable(bytes: Buffer): CachedTable {
  return { bytes, table: parseTable(bytes), noGainLeft: NO_GAIN_REUSES };
}
