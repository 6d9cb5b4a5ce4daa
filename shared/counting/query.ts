/**
 * Counting over one user's raw events (pure: packed event log in, counts out). The Redis adapter
 * fetches the user's log with one GET; everything here runs in the ad server's process, so the
 * counting CPU scales with the ad servers, not with Redis.
 *
 * Semantics (docs/counting.md): an event counts in range [from, to) when from ≤ timestamp < to
 * and timestamp ≥ now − retention (events past retention never count, whether or not Redis has
 * trimmed them yet). Duplicates do not exist at this point: the store's log holds each counted
 * occurrence once (an event identity once per dedup window).
 */
import { PacelineError } from '../errors.js';
import {
  ACTIONS,
  actionEventSchema,
  type EventSchema,
  type FieldSpec,
  formatValue,
  type Layout,
  rawValue,
} from './schema.js';

/** A half-open time range [from, to), epoch ms. */
export interface TimeRange {
  readonly from: number;
  readonly to: number;
}

/** Dimension name → accepted values (any one matches). Values as for encoding (ids, code names…). */
export type DimensionFilter = Readonly<Record<string, readonly unknown[]>>;

/** One count query: several ranges, one filter, optional group-by. */
export interface CountQuery {
  readonly ranges: readonly TimeRange[];
  readonly filter?: DimensionFilter;
  readonly groupBy?: readonly string[];
}

/** A group's count (group-by queries). */
export interface GroupCount {
  /** Dimension name → rendered value (ids decimal, codes by name, bytes hex). */
  readonly key: Readonly<Record<string, string>>;
  readonly count: number;
}

/** Counts of one range of a query. */
export interface RangeCount extends TimeRange {
  readonly total: number;
  /** Present when the query groups; sorted by count descending, then key. */
  readonly groups?: readonly GroupCount[];
}

/** Thrown for a query that cannot be answered as asked; the message says what to change. */
export class InvalidCountQueryError extends PacelineError {
  override readonly name = 'InvalidCountQueryError';
  override readonly code = 'counting.invalid-query';
}

function specOf(schema: EventSchema, name: string, where: string): FieldSpec {
  const spec = schema.dimension(name);
  if (!spec) {
    throw new InvalidCountQueryError(
      `${where}: unknown dimension "${name}". Dimensions are: ${schema.dimensions.join(', ')}.`,
    );
  }
  return spec;
}

/** Validates a time range; ranges must be integer ms with from < to. */
export function checkRange(range: TimeRange, where: string): void {
  if (!Number.isSafeInteger(range.from) || !Number.isSafeInteger(range.to) || range.from >= range.to) {
    throw new InvalidCountQueryError(
      `${where}: range [${range.from}, ${range.to}) is invalid: give integer epoch ms with from < to.`,
    );
  }
}

/** Where a dimension's bytes sit in a member of one layout version (absent → zero value). */
interface Accessor {
  readonly offset: number;
  readonly width: number;
  readonly spec: FieldSpec;
  /** Key of the zero value, for layouts lacking the dimension. */
  readonly absent: ValueKey | undefined;
}

/**
 * A dimension value as a Map/Set key: codes as their number, u64 ids as an exact number when
 * below 2^53 (every real id) else a latin1 string, other widths as latin1 strings. Numbers make
 * the per-event lookups allocation-free, which is most of a cap check's CPU.
 */
export type ValueKey = number | string;

function keyAt(buf: Buffer, offset: number, width: number): ValueKey {
  if (width === 1) return buf[offset] as number;
  if (width === 8) {
    const hi = buf.readUInt32BE(offset);
    if (hi < 0x200000) return hi * 4294967296 + buf.readUInt32BE(offset + 4);
  }
  // The 's' prefix keeps string keys distinct from numeric ones inside joined group keys.
  return `s${buf.toString('latin1', offset, offset + width)}`;
}

/** The key of a caller-given value of a dimension (throws InvalidActionFieldError naming the field). */
function valueKey(spec: FieldSpec, value: unknown): ValueKey {
  // Fast paths (a cap check keys hundreds of caps): equal to what keyAt gives for the bytes.
  if (spec.kind === 'id') {
    if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return value;
    if (typeof value === 'string' && value.length <= 15 && /^\d+$/.test(value)) return Number(value);
  } else if (spec.kind === 'code') {
    if (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= 255) return value;
    const named = typeof value === 'string' ? spec.names?.[value] : undefined;
    if (named !== undefined) return named;
  }
  return keyAt(Buffer.from(rawValue(spec, value), 'latin1'), 0, spec.width);
}

function accessor(layout: Layout, spec: FieldSpec): Accessor {
  const f = layout.byName.get(spec.name);
  return f
    ? { offset: f.offset, width: f.width, spec, absent: undefined }
    : { offset: 0, width: spec.width, spec, absent: keyAt(Buffer.alloc(spec.width), 0, spec.width) };
}

function keyOf(log: Buffer, at: number, a: Accessor): ValueKey {
  if (a.absent !== undefined) return a.absent;
  return keyAt(log, at + a.offset, a.width);
}

interface CompiledQuery {
  readonly ranges: readonly TimeRange[];
  readonly filters: readonly { readonly spec: FieldSpec; readonly values: ReadonlySet<ValueKey> }[];
  readonly groupBy: readonly FieldSpec[];
}

function compileQuery(schema: EventSchema, q: CountQuery, index: number): CompiledQuery {
  const where = `count query ${index}`;
  if (q.ranges.length === 0) throw new InvalidCountQueryError(`${where}: give at least one range.`);
  q.ranges.forEach((r, i) => {
    checkRange(r, `${where} range ${i}`);
  });
  const filters = Object.entries(q.filter ?? {}).map(([name, values]) => {
    const spec = specOf(schema, name, `${where} filter`);
    const raw = new Set<ValueKey>();
    for (const v of values) {
      try {
        raw.add(valueKey(spec, v));
      } catch (error) {
        throw new InvalidCountQueryError(`${where} filter: ${(error as Error).message}`, { cause: error });
      }
    }
    return { spec, values: raw };
  });
  const groupBy = (q.groupBy ?? []).map((name) => specOf(schema, name, `${where} group-by`));
  return { ranges: q.ranges, filters, groupBy };
}

/** The widest span a set of queries touches, [from, to). */
export function spanOf(queries: readonly CountQuery[]): TimeRange {
  let from = Number.POSITIVE_INFINITY;
  let to = Number.NEGATIVE_INFINITY;
  for (const q of queries) {
    for (const r of q.ranges) {
      from = Math.min(from, r.from);
      to = Math.max(to, r.to);
    }
  }
  return { from, to };
}

/** Thrown when a user's event log holds a layout version this reader does not know. */
export class UnreadableEventLogError extends PacelineError {
  override readonly name = 'UnreadableEventLogError';
  override readonly code = 'counting.unreadable-event-log';
}

/** The accessors of the layout version at `pos`, built on first sight (unknown version → throws). */
function layoutAt<T extends { readonly length: number }>(
  cache: (T | undefined)[],
  log: Buffer,
  pos: number,
  schema: EventSchema,
  build: (layout: Layout) => T,
): T {
  const version = log[pos] as number;
  let acc = cache[version];
  if (acc === undefined) {
    const layout = schema.layouts.get(version);
    if (!layout) {
      // Members are self-delimiting only through their version's length: an unknown version
      // makes the rest of the log unreadable. Deploy readers before writers of a new version.
      throw new UnreadableEventLogError(
        `Event log holds layout v${version} at byte ${pos}; this reader knows v${[...schema.layouts.keys()].join(', v')}. ` +
          'Upgrade this reader (readers must be deployed before producers write a new layout).',
      );
    }
    acc = build(layout);
    cache[version] = acc;
  }
  return acc;
}

/** Concatenates members into a packed log (members are self-delimiting by their version). */
export function packLog(members: Buffer | readonly Buffer[]): Buffer {
  return Buffer.isBuffer(members) ? members : Buffer.concat(members as readonly Uint8Array[]);
}

/**
 * Counts one user's events for each query.
 *
 * @param log       the user's packed event log (stored members back to back), or the members
 * @param notBefore retention horizon (now − retention): older events never count
 * @returns per query, per range, the total and (when grouping) the groups
 */
export function countMembers(
  log: Buffer | readonly Buffer[],
  queries: readonly CountQuery[],
  notBefore: number,
  schema: EventSchema = actionEventSchema,
): RangeCount[][] {
  const buf = packLog(log);
  const compiled = queries.map((q, i) => compileQuery(schema, q, i));
  const totals = compiled.map((q) => q.ranges.map(() => 0));
  type Group = { at: number; count: number };
  const groups = compiled.map((q) => q.ranges.map(() => new Map<string, Group>()));
  const cache: ({ length: number; filters: Accessor[][]; groupBy: Accessor[][] } | undefined)[] = [];
  const build = (layout: Layout) => ({
    length: layout.memberLength,
    filters: compiled.map((q) => q.filters.map((f) => accessor(layout, f.spec))),
    groupBy: compiled.map((q) => q.groupBy.map((g) => accessor(layout, g))),
  });
  for (let pos = 0; pos < buf.length; ) {
    const acc = cache[buf[pos] as number] ?? layoutAt(cache, buf, pos, schema, build);
    const at = pos;
    pos += acc.length;
    const ts = buf.readUIntBE(at + 3, 6);
    if (ts < notBefore) continue;
    for (let qi = 0; qi < compiled.length; qi++) {
      const q = compiled[qi] as CompiledQuery;
      const fa = acc.filters[qi] as Accessor[];
      let match = true;
      for (let fi = 0; fi < fa.length; fi++) {
        const filter = q.filters[fi] as CompiledQuery['filters'][number];
        if (!filter.values.has(keyOf(buf, at, fa[fi] as Accessor))) {
          match = false;
          break;
        }
      }
      if (!match) continue;
      const ga = acc.groupBy[qi] as Accessor[];
      const qTotals = totals[qi] as number[];
      let groupKey: string | undefined;
      for (let ri = 0; ri < q.ranges.length; ri++) {
        const r = q.ranges[ri] as TimeRange;
        if (ts < r.from || ts >= r.to) continue;
        qTotals[ri] = (qTotals[ri] as number) + 1;
        if (ga.length > 0) {
          groupKey ??= ga.map((a) => keyOf(buf, at, a)).join('\u0001');
          const map = (groups[qi] as Map<string, Group>[])[ri] as Map<string, Group>;
          const g = map.get(groupKey);
          if (g) g.count++;
          else map.set(groupKey, { at, count: 1 });
        }
      }
    }
  }
  return compiled.map((q, qi) =>
    q.ranges.map((r, ri) => {
      const total = (totals[qi] as number[])[ri] as number;
      if (q.groupBy.length === 0) return { from: r.from, to: r.to, total };
      const map = (groups[qi] as Map<string, Group>[])[ri] as Map<string, Group>;
      const out: GroupCount[] = [...map.values()].map(({ at, count }) => {
        const layout = schema.layouts.get(buf[at] as number) as Layout;
        const key: Record<string, string> = {};
        for (const spec of q.groupBy) {
          const f = layout.byName.get(spec.name);
          key[spec.name] = f
            ? formatValue(spec, buf, at + f.offset)
            : formatValue(spec, Buffer.alloc(spec.width), 0);
        }
        return { key, count };
      });
      out.sort((a, b) => b.count - a.count || JSON.stringify(a.key).localeCompare(JSON.stringify(b.key)));
      return { from: r.from, to: r.to, total, groups: out };
    }),
  );
}

// ---------------------------------------------------------------------------------------------
// Frequency caps

/**
 * One cap: fewer than `max` events of `action` on the candidate's `level` entity in the window
 * (now − windowMs, now] allow one more serve. An event exactly `windowMs` old no longer counts;
 * events stamped ahead of the clock (accepted producer skew) count as now.
 */
export interface FrequencyCap {
  /** Entity dimension the cap applies to: 'ad' | 'adGroup' | 'campaign' | 'advertiser' (any id dimension). */
  readonly level: string;
  /** Window length, ms: a positive integer. */
  readonly windowMs: number;
  /**
   * Serves allowed per window, an integer ≥ 1: count ≥ max rejects. 0 is refused (ad servers
   * disagree on whether it means "unlimited" or "never"): leave the cap out for no limit, use an
   * {@link EntityBlock} to never serve.
   */
  readonly max: number;
  /** @default 'impression' */
  readonly action?: string | number;
  /** Restrict to one view type. @default any view type */
  readonly viewType?: string | number;
  readonly block?: undefined;
}

/**
 * Never serve the candidate's `level` entity to this user (e.g. the user hid the advertiser):
 * the explicit form of what a `max: 0` cap would ambiguously mean. Always a hit, and the
 * strictest one; its status has count 0 and remaining 0.
 */
export interface EntityBlock {
  /** Entity dimension blocked: 'ad' | 'adGroup' | 'campaign' | 'advertiser' (any id dimension). */
  readonly level: string;
  readonly block: true;
}

/** What a candidate can carry: frequency caps and blocks. */
export type CapRule = FrequencyCap | EntityBlock;

/** An ad candidate of a request. */
export interface CapCandidate {
  /** Caller's identifier, echoed back. @default the ad id */
  readonly id?: string;
  /** Entity ids by level, e.g. `{ ad: '11', adGroup: '7', campaign: '3', advertiser: '1' }`. */
  readonly entities: Readonly<Record<string, unknown>>;
  readonly caps: readonly CapRule[];
}

/** A cap's (or block's) evaluation. */
export interface CapStatus {
  readonly cap: CapRule;
  /** The entity id the cap counted. */
  readonly entity: string;
  readonly count: number;
  /** `max − count`; ≤ 0 means the cap is hit. */
  readonly remaining: number;
}

/** Verdict on one candidate. */
export interface CandidateVerdict {
  readonly id: string;
  readonly allowed: boolean;
  /**
   * The strictest cap: a block if any, else the least remaining (ties → longest window);
   * undefined without caps.
   */
  readonly strictest?: CapStatus;
  /** Every cap that is hit (rejected candidates only). */
  readonly hits: readonly CapStatus[];
}

/** Result of a cap check. */
export interface CapCheckResult {
  readonly allowed: readonly CandidateVerdict[];
  readonly rejected: readonly CandidateVerdict[];
}

const TWO_32 = 4294967296;

/**
 * The signed 32-bit halves of an 8-byte id key: what `DataView.getInt32` reads from the id's
 * bytes, so the scan compares int32s with int32s.
 */
function idHalves(key: ValueKey, spec: FieldSpec): [number, number] {
  if (spec.width !== 8) throw new RangeError(`level ${spec.name} is not 8 bytes wide`);
  if (typeof key === 'number') return [Math.floor(key / TWO_32) | 0, key | 0];
  const b = Buffer.from(key.slice(1), 'latin1');
  return [b.readInt32BE(0), b.readInt32BE(4)];
}

/** Fibonacci hashing of an id's halves: the top `32 − shift` bits of the product pick the slot. */
function slotOf(hi: number, lo: number, shift: number): number {
  return Math.imul(lo ^ Math.imul(hi, 0x85ebca6b), 0x9e3779b1) >>> shift;
}

/**
 * Int32s per slot of the id tables: id hi, id lo, then (setup) entity index + 1 and 0, or
 * (scan) the entity's counter range [first, end). end = 0 marks an empty slot.
 */
const SLOT = 4;

/** Most action and view-type values a scratch remembers the codes of (requests use a handful). */
const MAX_REMEMBERED_CODES = 64;

/** Most distinct window starts of a request the bucketed scan handles; more take the general scan. */
const MAX_FAST_WINDOWS = 8;

/**
 * Working memory of a cap check, reused from call to call: allocating its dozen typed arrays
 * anew cost more than resolving all the caps of a request. It carries nothing over: a call
 * clears or overwrites every part it reads (counts, tables, watched actions). Calls are
 * synchronous; a nested one (say, from a getter on a candidate) gets a fresh instance.
 */
class CapScratch {
  /** Caps (hence counters and entities) the arrays hold. */
  capacity = 0;
  /** Per cap (in request order): its counter, by setup-order id. */
  capCounter = new Int32Array(0);
  // Per counter, in setup order: what it counts, and the next counter of its entity (−1: last).
  setupAction = new Int32Array(0);
  setupView = new Int32Array(0);
  setupSince = new Float64Array(0);
  counterNext = new Int32Array(0);
  /** Setup-order id → index in the scan order, where each entity's counters are contiguous. */
  finalIndex = new Int32Array(0);
  /** Scan-order index → setup-order id. */
  origin = new Int32Array(0);
  // Per counter, in scan order; view −1 = any view type.
  action = new Int32Array(0);
  view = new Int32Array(0);
  since = new Float64Array(0);
  counts = new Int32Array(0);
  // Per entity: its slot in `table`, its first and last counter (setup-order ids).
  entitySlot = new Int32Array(0);
  entityHead = new Int32Array(0);
  entityTail = new Int32Array(0);
  /** Per entity: its first counter in scan order. */
  entityFirst = new Int32Array(0);
  // Per candidate, for building the verdicts: the strictest cap (−1: none), the first block
  // (−1: none), and how many rules hit.
  candidateBest = new Int32Array(0);
  candidateBlock = new Int32Array(0);
  candidateHits = new Int32Array(0);
  /** Fast path: the distinct window starts, ascending, and per entity a count per window class. */
  readonly starts = new Float64Array(MAX_FAST_WINDOWS);
  buckets = new Int32Array(0);
  /** One open-addressing region of `SLOT` int32s × slots per level. */
  table = new Int32Array(0);
  /** Actions some counter watches: other events are skipped before any id lookup. */
  readonly watchedActions = new Uint8Array(256);
  /**
   * Scan accessors by layout version, kept from check to check while the schema and the levels
   * (in order) stay the same — the usual request — instead of rebuilt per check (a typed array
   * and a few objects each: garbage, and garbage sets how often the young generation is collected).
   */
  layouts: (CapLayout | undefined)[] = [];
  layoutSchema: EventSchema | undefined;
  layoutLevels: FieldSpec[] = [];
  /**
   * Per-check tables of the setup (see evaluateCapsWith), overwritten by index from the start —
   * not emptied with `length = 0`, which frees an array's backing store: every check allocated
   * them again (with the two code maps, ≈ 1.2 KB of the check's garbage, promoted because this
   * long-lived scratch held them across scavenges).
   */
  readonly levels: FieldSpec[] = [];
  readonly levelNames: string[] = [];
  readonly valueKeys: (Map<unknown, ValueKey> | undefined)[] = [];
  readonly candidateEntity: number[] = [];
  readonly candidateStamp: number[] = [];
  /**
   * Codes of the action and view-type values requests name, kept from check to check while the
   * schema stays the same (a cleared Map allocates a new table). Bounded: past
   * {@link MAX_REMEMBERED_CODES} values they start over.
   */
  readonly actionCodes = new Map<unknown, number>();
  readonly viewCodes = new Map<unknown, number>();
  codesSchema: EventSchema | undefined;

  /** Empties the code caches unless they hold `schema`'s codes and have room. */
  codesFor(schema: EventSchema): void {
    if (this.codesSchema === schema && this.actionCodes.size + this.viewCodes.size < MAX_REMEMBERED_CODES) {
      return;
    }
    this.actionCodes.clear();
    this.viewCodes.clear();
    this.codesSchema = schema;
  }

  /** The accessor cache for `levels` of `schema` (emptied when either changed). */
  layoutCache(schema: EventSchema, levels: readonly FieldSpec[]): (CapLayout | undefined)[] {
    const known = this.layoutLevels;
    let same = this.layoutSchema === schema && known.length === levels.length;
    for (let i = 0; same && i < levels.length; i++) same = known[i] === levels[i];
    if (!same) {
      this.layouts = [];
      this.layoutSchema = schema;
      this.layoutLevels = levels.slice();
    }
    return this.layouts;
  }

  /** Makes room for `caps` caps (counters and entities are at most as many). */
  ensure(caps: number): void {
    if (caps <= this.capacity) return;
    const n = Math.max(caps, this.capacity * 2, 64);
    this.capacity = n;
    this.capCounter = new Int32Array(n);
    this.setupAction = new Int32Array(n);
    this.setupView = new Int32Array(n);
    this.setupSince = new Float64Array(n);
    this.counterNext = new Int32Array(n);
    this.finalIndex = new Int32Array(n);
    this.origin = new Int32Array(n);
    this.action = new Int32Array(n);
    this.view = new Int32Array(n);
    this.since = new Float64Array(n);
    this.counts = new Int32Array(n);
    this.entitySlot = new Int32Array(n);
    this.entityHead = new Int32Array(n);
    this.entityTail = new Int32Array(n);
    this.entityFirst = new Int32Array(n);
  }

  /** Makes room for `n` candidates' verdict inputs. */
  ensureCandidates(n: number): void {
    if (n <= this.candidateBest.length) return;
    const size = Math.max(n, this.candidateBest.length * 2, 16);
    this.candidateBest = new Int32Array(size);
    this.candidateBlock = new Int32Array(size);
    this.candidateHits = new Int32Array(size);
  }

  /** The buckets, zeroed, for `n` of them (entities × window classes ≤ caps × {@link MAX_FAST_WINDOWS}). */
  bucketsFor(n: number): Int32Array {
    if (n > this.buckets.length) this.buckets = new Int32Array(Math.max(n, this.buckets.length * 2));
    else this.buckets.fill(0, 0, n);
    return this.buckets;
  }

  /** Makes room for `ints` table entries, keeping the regions of the levels seen so far. */
  ensureTable(ints: number): void {
    if (ints <= this.table.length) return;
    const table = new Int32Array(Math.max(ints, this.table.length * 2));
    table.set(this.table);
    this.table = table;
  }
}

/**
 * Where the scan finds what it reads in one layout version's members. A class with an Int32Array,
 * not an object literal with an array: a literal's map is shared with every other literal of the
 * same property sequence, and a change to one of those (a field's representation) deoptimises the
 * scan in the middle of a run (`node --trace-deopt` on `npm run bench -- counting`: the check then
 * runs unoptimised, ≈ 2 ms, until TurboFan compiles it again).
 */
class CapLayout {
  readonly length: number;
  /** Per level; −1: the version lacks the level (its value is zero). */
  readonly offsets: Int32Array;
  readonly action: number;
  readonly viewType: number;

  constructor(layout: Layout, levels: readonly FieldSpec[]) {
    this.length = layout.memberLength;
    this.offsets = Int32Array.from(levels, (l) => layout.byName.get(l.name)?.offset ?? -1);
    this.action = layout.byName.get('action')?.offset ?? 0;
    this.viewType = layout.byName.get('viewType')?.offset ?? 0;
  }
}

/**
 * Requests up to this many caps (and a quarter as many candidates) use the shared working memory
 * (≈ 70 bytes per cap, 64 bytes per candidate and level); a larger one gets its own, so one
 * outsized request does not pin its memory for good.
 */
const SHARED_SCRATCH_CAPS = 16_384;
const sharedScratch = new CapScratch();
let sharedScratchBusy = false;

function codeOf(schema: EventSchema, dim: string, value: string | number, where: string): number {
  const spec = specOf(schema, dim, where);
  try {
    return valueKey(spec, value) as number;
  } catch (error) {
    throw new InvalidCountQueryError(`${where}: ${(error as Error).message}`, { cause: error });
  }
}

/** Names a cap in error messages (a top-level function: no closure per candidate on the hot path). */
function whereCap(c: CapCandidate, ci: number, k: number): string {
  return `candidate ${c.id ?? ci} cap ${k}`;
}

/** The `hits` of every candidate that hits no cap (frozen: verdicts are read-only). */
const NO_HITS: readonly CapStatus[] = Object.freeze([]);

function capStatus(c: CapCandidate, k: number, count: number): CapStatus {
  const cap = c.caps[k] as CapRule;
  const remaining = cap.block === true ? 0 : cap.max - count;
  return { cap, entity: String(c.entities[cap.level]), count, remaining };
}

/** A cap as the caller wrote it, for error messages. */
function describeCap(cap: unknown): string {
  try {
    return JSON.stringify(cap, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v));
  } catch {
    return String(cap);
  }
}

/** Throws {@link InvalidCountQueryError} naming the cap unless it is a usable cap or block. */
function checkRule(schema: EventSchema, c: CapCandidate, ci: number, k: number, cap: CapRule): void {
  const where = () => `${whereCap(c, ci, k)} ${describeCap(cap)}`;
  if (cap.block !== undefined) {
    const extra = cap as { readonly windowMs?: unknown; readonly max?: unknown };
    if (cap.block !== true || extra.windowMs !== undefined || extra.max !== undefined) {
      throw new InvalidCountQueryError(
        `${where()}: a block is exactly { level, block: true } (it has no window or max); ` +
          'for a frequency cap give windowMs and max instead.',
      );
    }
    const spec = specOf(schema, cap.level, whereCap(c, ci, k));
    if (spec.kind !== 'id') {
      throw new InvalidCountQueryError(`${where()}: level "${cap.level}" is not an entity id dimension.`);
    }
    const value = c.entities[cap.level];
    if (value === undefined) {
      throw new InvalidCountQueryError(`${where()}: the candidate has no "${cap.level}" id in entities.`);
    }
    try {
      valueKey(spec, value);
    } catch (error) {
      throw new InvalidCountQueryError(`${where()}: ${(error as Error).message}`, { cause: error });
    }
    return;
  }
  if (!Number.isSafeInteger(cap.windowMs) || cap.windowMs <= 0) {
    throw new InvalidCountQueryError(`${where()}: windowMs must be a positive integer (ms).`);
  }
  if (cap.max === 0) {
    throw new InvalidCountQueryError(
      `${where()}: max 0 is ambiguous (some ad servers read it as "unlimited", others as "never"). ` +
        `Leave the cap out for no limit, or use { level: '${cap.level}', block: true } to never serve.`,
    );
  }
  if (!Number.isSafeInteger(cap.max) || cap.max < 1) {
    throw new InvalidCountQueryError(`${where()}: max must be an integer ≥ 1 (serves allowed per window).`);
  }
}

/**
 * Evaluates frequency caps for all candidates of one request over one scan of the user's events.
 * A cap counts events with now − windowMs < timestamp (and within retention; stamps ahead of
 * `now` count as now); a candidate is allowed when it has no block and every cap has count < max.
 */
export function evaluateCaps(
  log: Buffer | readonly Buffer[],
  candidates: readonly CapCandidate[],
  now: number,
  notBefore: number,
  schema: EventSchema = actionEventSchema,
): CapCheckResult {
  let capTotal = 0;
  for (let ci = 0; ci < candidates.length; ci++) capTotal += (candidates[ci] as CapCandidate).caps.length;
  if (sharedScratchBusy || capTotal > SHARED_SCRATCH_CAPS || candidates.length > SHARED_SCRATCH_CAPS / 4) {
    return evaluateCapsWith(new CapScratch(), capTotal, log, candidates, now, notBefore, schema);
  }
  sharedScratchBusy = true;
  try {
    return evaluateCapsWith(sharedScratch, capTotal, log, candidates, now, notBefore, schema);
  } finally {
    sharedScratchBusy = false;
  }
}

/**
 * The setup works on flat integer arrays: a candidate's entity is resolved once per level (the
 * windows of a level share it) and found in its level's id table (the same table the scan
 * probes), identical caps share one counter (same entity, action, view type and window start),
 * and each entity's counters end up contiguous, so the scan finds them with one probe per event
 * and level.
 */
function evaluateCapsWith(
  s: CapScratch,
  capTotal: number,
  log: Buffer | readonly Buffer[],
  candidates: readonly CapCandidate[],
  now: number,
  notBefore: number,
  schema: EventSchema,
): CapCheckResult {
  // A level holds at most one entity per candidate: ≥ 4 slots per candidate keeps the load ≤ 1/4.
  let bits = 4;
  while (1 << bits < candidates.length * 4) bits++;
  const shift = 32 - bits;
  const mask = (1 << bits) - 1;
  const levelInts = (1 << bits) * SLOT;
  s.ensure(capTotal);
  const {
    capCounter,
    setupAction,
    setupView,
    setupSince,
    counterNext,
    entitySlot,
    entityHead,
    entityTail,
    entityFirst,
  } = s;
  let table = s.table;
  const watchedActions = s.watchedActions;
  watchedActions.fill(0);

  // Small per-check tables live in the scratch too (overwritten by index, see CapScratch): per
  // check they were a dozen arrays and maps of garbage.
  const levels = s.levels;
  const levelNames = s.levelNames;
  let levelCount = 0;
  // Per level, for entity values that are not plain numbers: value → key (parsing once).
  const valueKeys = s.valueKeys;
  // Per level: the current candidate's entity, valid while the stamp is the candidate's index.
  const candidateEntity = s.candidateEntity;
  const candidateStamp = s.candidateStamp;
  let entityCount = 0;
  let counterCount = 0;
  let lastActionValue: unknown;
  let lastAction = 0;
  let lastViewValue: unknown;
  let lastView = 0;
  const actionCodes = s.actionCodes;
  const viewCodes = s.viewCodes;
  s.codesFor(schema);
  let minSince = Number.POSITIVE_INFINITY;
  let capIndex = 0;
  for (let ci = 0; ci < candidates.length; ci++) {
    const c = candidates[ci] as CapCandidate;
    const caps = c.caps;
    for (let k = 0; k < caps.length; k++) {
      const rule = caps[k] as CapRule;
      if (
        rule.block !== undefined ||
        !Number.isSafeInteger(rule.windowMs) ||
        rule.windowMs <= 0 ||
        !Number.isSafeInteger(rule.max) ||
        rule.max < 1
      ) {
        checkRule(schema, c, ci, k, rule);
        // A block: no counter (−1); the verdict rejects on it.
        capCounter[capIndex++] = -1;
        continue;
      }
      const cap = rule as FrequencyCap;
      // The level: a handful per request, found by comparison.
      const level = cap.level;
      let li = 0;
      while (li < levelCount && levelNames[li] !== level) li++;
      if (li === levelCount) {
        // The message is built only for the error (it was a string per level per check).
        const spec = schema.dimension(level) ?? specOf(schema, level, whereCap(c, ci, k));
        if (spec.kind !== 'id')
          throw new InvalidCountQueryError(
            `${whereCap(c, ci, k)}: level "${level}" is not an entity id dimension.`,
          );
        levels[li] = spec;
        levelNames[li] = level;
        valueKeys[li] = undefined;
        candidateEntity[li] = 0;
        candidateStamp[li] = -1;
        levelCount++;
        s.ensureTable((li + 1) * levelInts);
        table = s.table;
        table.fill(0, li * levelInts, (li + 1) * levelInts);
      }
      let entity: number;
      if (candidateStamp[li] === ci) entity = candidateEntity[li] as number;
      else {
        const value = c.entities[level];
        if (value === undefined) {
          throw new InvalidCountQueryError(
            `${whereCap(c, ci, k)}: the candidate has no "${level}" id in entities.`,
          );
        }
        let hi: number;
        let lo: number;
        if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) {
          // What valueKey gives a plain id, split without allocating.
          hi = value < TWO_32 ? 0 : Math.floor(value / TWO_32) | 0;
          lo = value | 0;
        } else {
          const spec = levels[li] as FieldSpec;
          let keys = valueKeys[li];
          if (keys === undefined) {
            keys = new Map();
            valueKeys[li] = keys;
          }
          let key = keys.get(value);
          if (key === undefined) {
            try {
              key = valueKey(spec, value);
            } catch (error) {
              throw new InvalidCountQueryError(`${whereCap(c, ci, k)}: ${(error as Error).message}`, {
                cause: error,
              });
            }
            keys.set(value, key);
          }
          [hi, lo] = idHalves(key, spec);
        }
        // Find or add the entity in its level's table (5 and '5' are one entity).
        const base = li * levelInts;
        let p = base + slotOf(hi, lo, shift) * SLOT;
        let mark = table[p + 2] as number;
        while (mark !== 0 && (table[p] !== hi || table[p + 1] !== lo)) {
          p = base + (((p - base) / SLOT + 1) & mask) * SLOT;
          mark = table[p + 2] as number;
        }
        if (mark === 0) {
          entity = entityCount++;
          table[p] = hi;
          table[p + 1] = lo;
          table[p + 2] = entity + 1;
          entitySlot[entity] = p;
          entityHead[entity] = -1;
        } else entity = mark - 1;
        candidateEntity[li] = entity;
        candidateStamp[li] = ci;
      }
      const actionValue = cap.action ?? ACTIONS.impression;
      let action: number;
      if (actionValue === lastActionValue) action = lastAction;
      else {
        const cached = actionCodes.get(actionValue);
        action = cached ?? codeOf(schema, 'action', actionValue, whereCap(c, ci, k));
        if (cached === undefined) actionCodes.set(actionValue, action);
        lastActionValue = actionValue;
        lastAction = action;
      }
      let viewType = -1;
      const viewValue = cap.viewType;
      if (viewValue === undefined) viewType = -1;
      else if (viewValue === lastViewValue) viewType = lastView;
      else {
        const cached = viewCodes.get(viewValue);
        viewType = cached ?? codeOf(schema, 'viewType', viewValue, whereCap(c, ci, k));
        if (cached === undefined) viewCodes.set(viewValue, viewType);
        lastViewValue = viewValue;
        lastView = viewType;
      }
      // (now − w, now]: the first millisecond that counts is one after now − w.
      const since = now - cap.windowMs + 1;
      if (since < minSince) minSince = since;
      // Identical caps share a counter: an entity has a few (its windows × actions).
      let counter = entityHead[entity] as number;
      while (
        counter >= 0 &&
        (setupSince[counter] !== since || setupAction[counter] !== action || setupView[counter] !== viewType)
      ) {
        counter = counterNext[counter] as number;
      }
      if (counter < 0) {
        counter = counterCount++;
        setupAction[counter] = action;
        setupView[counter] = viewType;
        setupSince[counter] = since;
        counterNext[counter] = -1;
        if ((entityHead[entity] as number) < 0) entityHead[entity] = counter;
        else counterNext[entityTail[entity] as number] = counter;
        entityTail[entity] = counter;
        watchedActions[action] = 1;
      }
      capCounter[capIndex++] = counter;
    }
  }

  // Scan order: each entity's counters contiguous, longest window first (the scan stops at the
  // first window an event is older than); its table slot gets their range.
  const { finalIndex, origin, action: cAction, view: cView, since: cSince, counts } = s;
  counts.fill(0, 0, counterCount);
  let next = 0;
  for (let e = 0; e < entityCount; e++) {
    const first = next;
    for (let id = entityHead[e] as number; id >= 0; id = counterNext[id] as number) {
      // Insertion sort by window start (an entity has a few counters).
      const since = setupSince[id] as number;
      let k = next++;
      while (k > first && (cSince[k - 1] as number) > since) {
        cAction[k] = cAction[k - 1] as number;
        cView[k] = cView[k - 1] as number;
        cSince[k] = cSince[k - 1] as number;
        origin[k] = origin[k - 1] as number;
        k--;
      }
      cAction[k] = setupAction[id] as number;
      cView[k] = setupView[id] as number;
      cSince[k] = since;
      origin[k] = id;
    }
    for (let k = first; k < next; k++) finalIndex[origin[k] as number] = k;
    const p = entitySlot[e] as number;
    table[p + 2] = first;
    table[p + 3] = next;
    entityFirst[e] = first;
  }

  // Fast path, the usual request: every cap counts one action in any view type, over a few
  // distinct windows. An event's window class (the last window start it is at or after) is found
  // once per event, and each level adds one to its entity's bucket of that class; a counter's
  // count is then the sum of its entity's buckets from its window's class up. The hot loop then
  // has no loop over an entity's counters, whose window comparisons the CPU mispredicts.
  const starts = s.starts;
  let startCount = 0;
  const fastAction = counterCount > 0 ? (cAction[0] as number) : -1;
  let fast = counterCount > 0;
  for (let k = 0; k < counterCount; k++) {
    if ((cView[k] as number) >= 0 || cAction[k] !== fastAction) {
      fast = false;
      break;
    }
    const since = cSince[k] as number;
    let j = 0;
    while (j < startCount && (starts[j] as number) < since) j++;
    if (j < startCount && starts[j] === since) continue;
    if (startCount === MAX_FAST_WINDOWS) {
      fast = false;
      break;
    }
    for (let m = startCount; m > j; m--) starts[m] = starts[m - 1] as number;
    starts[j] = since;
    startCount++;
  }
  if (!fast) startCount = 0;
  const buckets = fast ? s.bucketsFor(entityCount * startCount) : s.buckets;
  if (fast) {
    // The table slot of an entity now holds its first bucket (the end mark stays non-zero).
    for (let e = 0; e < entityCount; e++) table[(entitySlot[e] as number) + 2] = e * startCount;
  }

  // The hot loop: per event and level two 32-bit reads and a probe or two; no allocation.
  const buf = packLog(log);
  const floor = Math.max(notBefore, minSince);
  // The previous check may have had more levels: drop them (a shape change, so rare).
  if (levels.length > levelCount) {
    levels.length = levelCount;
    levelNames.length = levelCount;
    valueKeys.length = levelCount;
    candidateEntity.length = levelCount;
    candidateStamp.length = levelCount;
  }
  const cache = s.layoutCache(schema, levels);
  const build = (layout: Layout) => new CapLayout(layout, levels);
  // DataView getters are inlined by the optimizing compiler; Buffer's readers are slower here.
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  for (let pos = 0; pos < buf.length; ) {
    // A version seen before is an array read.
    const acc = cache[buf[pos] as number] ?? layoutAt(cache, buf, pos, schema, build);
    const at = pos;
    pos += acc.length;
    const action = buf[at + acc.action] as number;
    if (watchedActions[action] === 0) continue;
    const ts = view.getUint16(at + 3) * TWO_32 + view.getUint32(at + 5);
    if (ts < floor) continue;
    const viewType = buf[at + acc.viewType] as number;
    // Window class (fast path): ts ≥ floor ≥ the first window start.
    let cls = 0;
    while (cls + 1 < startCount && ts >= (starts[cls + 1] as number)) cls++;
    const offsets = acc.offsets;
    for (let li = 0; li < levelCount; li++) {
      const offset = offsets[li] as number;
      const hi = offset >= 0 ? view.getInt32(at + offset) : 0;
      const lo = offset >= 0 ? view.getInt32(at + offset + 4) : 0;
      const base = li * levelInts;
      let slot = slotOf(hi, lo, shift);
      let p = base + slot * SLOT;
      let end = table[p + 3] as number;
      while (end !== 0 && (table[p + 1] !== lo || table[p] !== hi)) {
        slot = (slot + 1) & mask;
        p = base + slot * SLOT;
        end = table[p + 3] as number;
      }
      if (end === 0) continue;
      if (fast) {
        const b = (table[p + 2] as number) + cls;
        buckets[b] = (buckets[b] as number) + 1;
        continue;
      }
      for (let k = table[p + 2] as number; k < end && ts >= (cSince[k] as number); k++) {
        if (cAction[k] === action) {
          const v = cView[k] as number;
          if (v < 0 || v === viewType) counts[k] = (counts[k] as number) + 1;
        }
      }
    }
  }
  if (fast) {
    // Buckets → counts: per entity, suffix sums over the classes; a counter takes its class's.
    for (let e = 0; e < entityCount; e++) {
      const base = e * startCount;
      for (let c = startCount - 2; c >= 0; c--) {
        buckets[base + c] = (buckets[base + c] as number) + (buckets[base + c + 1] as number);
      }
      const p = entitySlot[e] as number;
      for (let k = entityFirst[e] as number; k < (table[p + 3] as number); k++) {
        let c = 0;
        while (starts[c] !== cSince[k]) c++;
        counts[k] = buckets[base + c] as number;
      }
    }
  }

  // Verdicts in two passes: first each candidate's outcome into the scratch, then the result
  // lists at their exact length (grown by push they were a third again of their size in garbage).
  s.ensureCandidates(candidates.length);
  const { candidateBest, candidateBlock, candidateHits } = s;
  let allowedCount = 0;
  capIndex = 0;
  for (let ci = 0; ci < candidates.length; ci++) {
    const caps = (candidates[ci] as CapCandidate).caps;
    const base = capIndex;
    capIndex += caps.length;
    let best = -1;
    let bestRemaining = 0;
    let bestWindow = 0;
    let block = -1;
    let hitCount = 0;
    for (let k = 0; k < caps.length; k++) {
      const counter = capCounter[base + k] as number;
      if (counter < 0) {
        // A block: always a hit, and the strictest (the first one if several).
        hitCount++;
        if (block < 0) block = k;
        continue;
      }
      const cap = caps[k] as FrequencyCap;
      const remaining = cap.max - (counts[finalIndex[counter] as number] as number);
      if (remaining <= 0) hitCount++;
      if (
        best < 0 ||
        remaining < bestRemaining ||
        (remaining === bestRemaining && cap.windowMs > bestWindow)
      ) {
        best = k;
        bestRemaining = remaining;
        bestWindow = cap.windowMs;
      }
    }
    candidateBest[ci] = best;
    candidateBlock[ci] = block;
    candidateHits[ci] = hitCount;
    if (hitCount === 0) allowedCount++;
  }
  const allowed = new Array<CandidateVerdict>(allowedCount);
  const rejected = new Array<CandidateVerdict>(candidates.length - allowedCount);
  let allowedAt = 0;
  let rejectedAt = 0;
  capIndex = 0;
  for (let ci = 0; ci < candidates.length; ci++) {
    const c = candidates[ci] as CapCandidate;
    const caps = c.caps;
    const base = capIndex;
    capIndex += caps.length;
    const best = candidateBest[ci] as number;
    const block = candidateBlock[ci] as number;
    const isAllowed = candidateHits[ci] === 0;
    // Most candidates hit nothing: they share one frozen empty list (an array per candidate was
    // a third of the check's garbage, and garbage is what sets the scavenges under load).
    let hits: readonly CapStatus[] = NO_HITS;
    if (!isAllowed) {
      const list: CapStatus[] = [];
      hits = list;
      for (let k = 0; k < caps.length; k++) {
        const counter = capCounter[base + k] as number;
        if (counter < 0) list.push(capStatus(c, k, 0));
        else {
          const count = counts[finalIndex[counter] as number] as number;
          if ((caps[k] as FrequencyCap).max - count <= 0) list.push(capStatus(c, k, count));
        }
      }
    }
    const id = c.id ?? String(c.entities.ad ?? ci);
    const verdict: CandidateVerdict =
      block >= 0
        ? { id, allowed: false, strictest: capStatus(c, block, 0), hits }
        : best >= 0
          ? {
              id,
              allowed: isAllowed,
              strictest: capStatus(
                c,
                best,
                counts[finalIndex[capCounter[base + best] as number] as number] as number,
              ),
              hits,
            }
          : { id, allowed: isAllowed, hits };
    if (isAllowed) allowed[allowedAt++] = verdict;
    else rejected[rejectedAt++] = verdict;
  }
  return { allowed, rejected };
}
