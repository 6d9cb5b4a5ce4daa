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

import { formatValue } from './event-decode.js';
import {
  checkRange,
  InvalidCountQueryError,
  keyAt,
  layoutAt,
  packLog,
  specOf,
  type TimeRange,
  type ValueKey,
  valueKey,
} from './event-log.js';
import { actionEventSchema, type EventSchema, type FieldSpec, type Layout } from './schema.js';

// Frequency caps (caps.ts) and the event-log primitives are part of this module's surface: one
// import for everything that counts.
export type {
  CandidateVerdict,
  CapCandidate,
  CapCheckResult,
  CapRule,
  CapStatus,
  ConversionCap,
  CountingCap,
  EntityBlock,
  FrequencyCap,
  LifetimeCap,
  RecencyCap,
} from './cap-rules.js';
export { evaluateCaps } from './caps.js';
export {
  checkRange,
  InvalidCountQueryError,
  packLog,
  type TimeRange,
  UnreadableEventLogError,
  type ValueKey,
} from './event-log.js';

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

/** Where a dimension's bytes sit in a member of one layout version (absent → zero value). */
interface Accessor {
  readonly offset: number;
  readonly width: number;
  readonly spec: FieldSpec;
  /** Key of the zero value, for layouts lacking the dimension. */
  readonly absent: ValueKey | undefined;
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
