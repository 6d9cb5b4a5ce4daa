/**
 * Counting over one user's raw events (pure: packed event log in, counts out). The Redis adapter
 * fetches the user's log with one GET; everything here runs in the ad server's process, so the
 * counting CPU scales with the ad servers, not with Redis.
 *
 * Semantics (docs/counting.md): an event counts in range [from, to) when from ≤ timestamp < to
 * and timestamp ≥ now − retention (events past retention never count, whether or not Redis has
 * trimmed them yet). Duplicates do not exist at this point: the store keeps each distinct event
 * byte string once.
 */
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
export class InvalidCountQueryError extends Error {
  override readonly name = 'InvalidCountQueryError';
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

/** The key of a caller-given value of a dimension (throws RangeError naming the field). */
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
export class UnreadableEventLogError extends Error {
  override readonly name = 'UnreadableEventLogError';
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

/** One cap: at most `max` events of `action` on the candidate's `level` entity in the last `windowMs`. */
export interface FrequencyCap {
  /** Entity dimension the cap applies to: 'ad' | 'adGroup' | 'campaign' | 'advertiser' (any id dimension). */
  readonly level: string;
  readonly windowMs: number;
  /** Largest count still allowed to be exceeded by one more serve is `max − 1`: count ≥ max rejects. */
  readonly max: number;
  /** @default 'impression' */
  readonly action?: string | number;
  /** Restrict to one view type. @default any view type */
  readonly viewType?: string | number;
}

/** An ad candidate of a request. */
export interface CapCandidate {
  /** Caller's identifier, echoed back. @default the ad id */
  readonly id?: string;
  /** Entity ids by level, e.g. `{ ad: '11', adGroup: '7', campaign: '3', advertiser: '1' }`. */
  readonly entities: Readonly<Record<string, unknown>>;
  readonly caps: readonly FrequencyCap[];
}

/** A cap's evaluation. */
export interface CapStatus {
  readonly cap: FrequencyCap;
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
  /** The strictest cap (least remaining; ties → longest window); undefined without caps. */
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

/** Slot stride of the id tables: hi, lo, first counter, end of counters (0 = empty slot). */
const SLOT = 4;

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

function capStatus(c: CapCandidate, k: number, count: number): CapStatus {
  const cap = c.caps[k] as FrequencyCap;
  return { cap, entity: String(c.entities[cap.level]), count, remaining: cap.max - count };
}

/**
 * Evaluates frequency caps for all candidates of one request over one scan of the user's events.
 * A cap counts events with timestamp ≥ now − windowMs (and within retention); a candidate is
 * allowed when every cap has count < max.
 *
 * The setup (hundreds of caps per request) works on flat arrays: a candidate's entity is resolved
 * once per level (the windows of a level share it), each watched entity gets an index, identical
 * caps share one counter (same entity, action, view type and window start), and each entity's
 * counters are contiguous so the scan finds them with one probe of an integer hash table per
 * event and level.
 */
export function evaluateCaps(
  log: Buffer | readonly Buffer[],
  candidates: readonly CapCandidate[],
  now: number,
  notBefore: number,
  schema: EventSchema = actionEventSchema,
): CapCheckResult {
  const levels: FieldSpec[] = [];
  const levelNames: string[] = [];
  // Per level: the caller's entity value → entity index (requests repeat the same campaign /
  // advertiser values), and the value's key → entity index (5 and '5' are one entity).
  const byValue: Map<unknown, number>[] = [];
  const byKey: Map<ValueKey, number>[] = [];
  // Per entity: level, key, the (setup-order) ids of the counters watching it.
  const entityLevel: number[] = [];
  const entityKey: ValueKey[] = [];
  const entityCounters: number[][] = [];
  // Per counter, in setup order.
  const setupAction: number[] = [];
  const setupView: number[] = [];
  const setupSince: number[] = [];
  // Actions some counter watches: events of other actions are skipped before any id lookup.
  const watchedActions = new Uint8Array(256);
  // Per candidate and level: the entity index, valid while the stamp is the candidate's index.
  const candidateEntity: number[] = [];
  const candidateStamp: number[] = [];
  let capTotal = 0;
  for (let ci = 0; ci < candidates.length; ci++) capTotal += (candidates[ci] as CapCandidate).caps.length;
  // Every cap's counter (a setup-order id, then its final index).
  const capCounter = new Int32Array(capTotal);
  let lastActionValue: unknown;
  let lastAction = 0;
  let lastViewValue: unknown;
  let lastView = 0;
  let actionCodes: Map<unknown, number> | undefined;
  let viewCodes: Map<unknown, number> | undefined;
  let minSince = Number.POSITIVE_INFINITY;
  let capIndex = 0;
  for (let ci = 0; ci < candidates.length; ci++) {
    const c = candidates[ci] as CapCandidate;
    const caps = c.caps;
    for (let k = 0; k < caps.length; k++) {
      const cap = caps[k] as FrequencyCap;
      if (
        !Number.isSafeInteger(cap.windowMs) ||
        cap.windowMs <= 0 ||
        !Number.isSafeInteger(cap.max) ||
        cap.max < 0
      ) {
        throw new InvalidCountQueryError(
          `${whereCap(c, ci, k)}: windowMs must be a positive integer and max a non-negative integer.`,
        );
      }
      // The level: a handful per request, found by identity (or content) comparison.
      const level = cap.level;
      let li = 0;
      while (li < levelNames.length && levelNames[li] !== level) li++;
      if (li === levelNames.length) {
        const spec = specOf(schema, level, whereCap(c, ci, k));
        if (spec.kind !== 'id')
          throw new InvalidCountQueryError(
            `${whereCap(c, ci, k)}: level "${level}" is not an entity id dimension.`,
          );
        levels.push(spec);
        levelNames.push(level);
        byValue.push(new Map());
        byKey.push(new Map());
        candidateEntity.push(0);
        candidateStamp.push(-1);
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
        const values = byValue[li] as Map<unknown, number>;
        let found = values.get(value);
        if (found === undefined) {
          let key: ValueKey;
          try {
            key = valueKey(levels[li] as FieldSpec, value);
          } catch (error) {
            throw new InvalidCountQueryError(`${whereCap(c, ci, k)}: ${(error as Error).message}`, {
              cause: error,
            });
          }
          const keys = byKey[li] as Map<ValueKey, number>;
          found = keys.get(key);
          if (found === undefined) {
            found = entityLevel.length;
            entityLevel.push(li);
            entityKey.push(key);
            entityCounters.push([]);
            keys.set(key, found);
          }
          values.set(value, found);
        }
        entity = found;
        candidateEntity[li] = entity;
        candidateStamp[li] = ci;
      }
      const actionValue = cap.action ?? ACTIONS.impression;
      let action: number;
      if (actionValue === lastActionValue) action = lastAction;
      else {
        actionCodes ??= new Map();
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
        viewCodes ??= new Map();
        const cached = viewCodes.get(viewValue);
        viewType = cached ?? codeOf(schema, 'viewType', viewValue, whereCap(c, ci, k));
        if (cached === undefined) viewCodes.set(viewValue, viewType);
        lastViewValue = viewValue;
        lastView = viewType;
      }
      const since = now - cap.windowMs;
      if (since < minSince) minSince = since;
      // Identical caps share a counter: an entity has a few (its levels' windows × actions).
      const own = entityCounters[entity] as number[];
      let counter = -1;
      for (let j = 0; j < own.length; j++) {
        const id = own[j] as number;
        if (setupSince[id] === since && setupAction[id] === action && setupView[id] === viewType) {
          counter = id;
          break;
        }
      }
      if (counter < 0) {
        counter = setupAction.length;
        setupAction.push(action);
        setupView.push(viewType);
        setupSince.push(since);
        own.push(counter);
        watchedActions[action] = 1;
      }
      capCounter[capIndex++] = counter;
    }
  }

  // Final counter order: each entity's counters contiguous. Per level, an open-addressing table
  // (load ≤ 1/4) of its entities' id halves → their counter range, all levels in one Int32Array.
  const counterCount = setupAction.length;
  const finalIndex = new Int32Array(counterCount);
  const cAction = new Int32Array(counterCount);
  const cView = new Int32Array(counterCount);
  const cSince = new Float64Array(counterCount);
  const counts = new Int32Array(counterCount);
  const levelCount = levels.length;
  const levelSize: number[] = new Array(levelCount).fill(0);
  for (let e = 0; e < entityLevel.length; e++) {
    const li = entityLevel[e] as number;
    levelSize[li] = (levelSize[li] as number) + 1;
  }
  const levelBase = new Int32Array(levelCount);
  const levelShift = new Int32Array(levelCount);
  let tableLength = 0;
  for (let li = 0; li < levelCount; li++) {
    let bits = 4;
    while (1 << bits < (levelSize[li] as number) * 4) bits++;
    levelBase[li] = tableLength;
    levelShift[li] = 32 - bits;
    tableLength += (1 << bits) * SLOT;
  }
  const table = new Int32Array(tableLength);
  let next = 0;
  for (let e = 0; e < entityLevel.length; e++) {
    const li = entityLevel[e] as number;
    const own = entityCounters[e] as number[];
    const first = next;
    for (let j = 0; j < own.length; j++) {
      const id = own[j] as number;
      finalIndex[id] = next;
      cAction[next] = setupAction[id] as number;
      cView[next] = setupView[id] as number;
      cSince[next] = setupSince[id] as number;
      next++;
    }
    const [hi, lo] = idHalves(entityKey[e] as ValueKey, levels[li] as FieldSpec);
    const shift = levelShift[li] as number;
    const mask = (1 << (32 - shift)) - 1;
    const base = levelBase[li] as number;
    let slot = slotOf(hi, lo, shift);
    while ((table[base + slot * SLOT + 3] as number) !== 0) slot = (slot + 1) & mask;
    const p = base + slot * SLOT;
    table[p] = hi;
    table[p + 1] = lo;
    table[p + 2] = first;
    table[p + 3] = next;
  }

  // The hot loop: per event and level two 32-bit reads and a probe or two; no allocation.
  const buf = packLog(log);
  const floor = Math.max(notBefore, minSince);
  const cache: ({ length: number; offsets: Int32Array; action: number; viewType: number } | undefined)[] = [];
  const build = (layout: Layout) => ({
    length: layout.memberLength,
    // −1: the version lacks the level; its value is zero.
    offsets: Int32Array.from(levels, (l) => layout.byName.get(l.name)?.offset ?? -1),
    action: layout.byName.get('action')?.offset ?? 0,
    viewType: layout.byName.get('viewType')?.offset ?? 0,
  });
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
    const offsets = acc.offsets;
    for (let li = 0; li < levelCount; li++) {
      const offset = offsets[li] as number;
      const hi = offset >= 0 ? view.getInt32(at + offset) : 0;
      const lo = offset >= 0 ? view.getInt32(at + offset + 4) : 0;
      const shift = levelShift[li] as number;
      const mask = (1 << (32 - shift)) - 1;
      const base = levelBase[li] as number;
      let slot = slotOf(hi, lo, shift);
      let p = base + slot * SLOT;
      let last = table[p + 3] as number;
      while (last !== 0 && (table[p + 1] !== lo || table[p] !== hi)) {
        slot = (slot + 1) & mask;
        p = base + slot * SLOT;
        last = table[p + 3] as number;
      }
      if (last === 0) continue;
      for (let k = table[p + 2] as number; k < last; k++) {
        if (cAction[k] === action && ts >= (cSince[k] as number)) {
          const v = cView[k] as number;
          if (v < 0 || v === viewType) counts[k] = (counts[k] as number) + 1;
        }
      }
    }
  }

  const allowed: CandidateVerdict[] = [];
  const rejected: CandidateVerdict[] = [];
  capIndex = 0;
  for (let ci = 0; ci < candidates.length; ci++) {
    const c = candidates[ci] as CapCandidate;
    const caps = c.caps;
    const base = capIndex;
    capIndex += caps.length;
    let best = -1;
    let bestRemaining = 0;
    let bestWindow = 0;
    let hitCount = 0;
    for (let k = 0; k < caps.length; k++) {
      const cap = caps[k] as FrequencyCap;
      const count = counts[finalIndex[capCounter[base + k] as number] as number] as number;
      const remaining = cap.max - count;
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
    const hits: CapStatus[] = [];
    if (hitCount > 0) {
      for (let k = 0; k < caps.length; k++) {
        const cap = caps[k] as FrequencyCap;
        const count = counts[finalIndex[capCounter[base + k] as number] as number] as number;
        if (cap.max - count <= 0) hits.push(capStatus(c, k, count));
      }
    }
    const id = c.id ?? String(c.entities.ad ?? ci);
    const isAllowed = hitCount === 0;
    const verdict: CandidateVerdict =
      best >= 0
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
    (isAllowed ? allowed : rejected).push(verdict);
  }
  return { allowed, rejected };
}
