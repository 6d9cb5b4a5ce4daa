/**
 * The cap check's scan over a user's cap log (shared/redis/scripts/counting-caplog.lua): the
 * compact copy of its events, each a 10-byte record naming one of the user's entity tuples. A
 * tuple's entities are looked up in the request's id tables once: where it is defined on the
 * general path; on the bucketed path after the scan, and only when one of its events counted. An
 * event then costs a timestamp read and, on the bucketed path, one increment of its tuple's tally
 * for its window class (the tallies go to the entities' buckets at the end). Same counts as
 * {@link scanLog} over the log (test/unit/counting/caps-reference.test.ts).
 */
import { CAP_LOG_ENTITY_OFFSET, CAP_LOG_EVENT_BYTES, CAP_LOG_TUPLE } from './cap-log.js';
import { type CapLayout, type CapScratch, SLOT, slotOf, TWO_32 } from './cap-scratch.js';
import { layoutAt, UnreadableEventLogError } from './event-log.js';
import type { EventSchema } from './schema.js';

/** A field at member offset `o` is at tuple offset `o − SHIFT`. */
const SHIFT = CAP_LOG_ENTITY_OFFSET - 1;

function corrupt(at: number, what: string): never {
  throw new UnreadableEventLogError(
    `Cap log is corrupt at byte ${at}: ${what}. Delete the user's ':cap' and ':tix' keys; the next write rebuilds them from the log.`,
  );
}

/**
 * Counts the cap log's events into the scratch's counters (`counts`) or, on the bucketed path
 * (`startCount` > 0 window classes), into the entities' buckets — what {@link scanLog} does
 * over the log. `capLog` starts with `CAP_LOG_KEPT` (cap-log.ts).
 */
export function scanCapLog(
  s: CapScratch,
  capLog: Buffer,
  notBefore: number,
  schema: EventSchema,
  startCount: number,
): void {
  const { levelCount, shift, mask, levelInts, table, watchedActions, starts, counts } = s;
  const { action: cAction, view: cView, since: cSince } = s;
  const fast = startCount > 0;
  const floor = Math.max(notBefore, s.minSince);
  const { layouts: cache, build } = s.scanLayouts(schema);
  const view = new DataView(capLog.buffer, capLog.byteOffset, capLog.byteLength);
  const size = capLog.length;
  let slots = s.tupleSlots;
  let tallies = s.tupleTallies;
  let tuples = 0;
  for (let pos = 1; pos < size; ) {
    if (pos + 4 > size) corrupt(pos, 'a record is cut short');
    // An event's tuple, action and view type in one read (a tuple record's first bytes otherwise).
    const head = view.getUint32(pos);
    const t = head >>> 16;
    if (t === CAP_LOG_TUPLE) {
      const at = pos + 2;
      const acc = cache[capLog[at] as number] ?? layoutAt(cache, capLog, at, schema, build);
      pos = at + acc.length - SHIFT;
      if (pos > size) corrupt(at, 'a tuple is cut short');
      const need = (tuples + 1) * levelCount;
      if (need > slots.length || (tuples + 1) * startCount > tallies.length) {
        s.ensureTuples(need, (tuples + 1) * startCount);
        slots = s.tupleSlots;
        tallies = s.tupleTallies;
      }
      if (fast) {
        // Resolved after the scan, and only if one of its events counted (in a long log with a
        // short window most tuples have none).
        slots[tuples] = at;
      } else {
        const offsets = acc.offsets;
        const base = tuples * levelCount;
        for (let li = 0; li < levelCount; li++) {
          const offset = offsets[li] as number;
          const hi = offset >= 0 ? view.getInt32(at + offset - SHIFT) : 0;
          const lo = offset >= 0 ? view.getInt32(at + offset - SHIFT + 4) : 0;
          slots[base + li] = probe(table, li * levelInts, hi, lo, shift, mask);
        }
      }
      // A loop, not TypedArray.fill: a builtin call per tuple cost more than the probes above.
      for (let c = tuples * startCount; c < (tuples + 1) * startCount; c++) tallies[c] = 0;
      tuples++;
      continue;
    }
    const at = pos;
    pos += CAP_LOG_EVENT_BYTES;
    if (pos > size) corrupt(at, 'an event is cut short');
    const action = (head >>> 8) & 0xff;
    if (watchedActions[action] === 0) continue;
    const ts = view.getUint16(at + 4) * TWO_32 + view.getUint32(at + 6);
    if (ts < floor) continue;
    if (t >= tuples) corrupt(at, `an event names tuple ${t} of ${tuples}`);
    if (fast) {
      // Window class: ts ≥ floor ≥ the first window start.
      let cls = 0;
      while (cls + 1 < startCount && ts >= (starts[cls + 1] as number)) cls++;
      const i = t * startCount + cls;
      tallies[i] = (tallies[i] as number) + 1;
      continue;
    }
    const viewType = head & 0xff;
    const base = t * levelCount;
    for (let li = 0; li < levelCount; li++) {
      const p = slots[base + li] as number;
      if (p < 0) continue;
      for (let k = table[p + 2] as number; k < (table[p + 3] as number) && ts >= (cSince[k] as number); k++) {
        if (cAction[k] === action) {
          const v = cView[k] as number;
          if (v < 0 || v === viewType) counts[k] = (counts[k] as number) + 1;
        }
      }
    }
  }
  if (fast) addTallies(s, capLog, view, cache, tuples, startCount);
}

/** The table position of the entity (hi, lo) in the level region at `region`, or −1. */
function probe(
  table: Int32Array,
  region: number,
  hi: number,
  lo: number,
  shift: number,
  mask: number,
): number {
  let slot = slotOf(hi, lo, shift);
  let p = region + slot * SLOT;
  while (table[p + 3] !== 0 && (table[p + 1] !== lo || table[p] !== hi)) {
    slot = (slot + 1) & mask;
    p = region + slot * SLOT;
  }
  return table[p + 3] === 0 ? -1 : p;
}

/**
 * Bucketed path, after the scan: each tuple with a counted event has its entities looked up
 * (`slots` holds its position) and its tallies added to their buckets.
 */
function addTallies(
  s: CapScratch,
  capLog: Buffer,
  view: DataView,
  cache: readonly (CapLayout | undefined)[],
  tuples: number,
  startCount: number,
): void {
  const { tupleSlots: slots, tupleTallies: tallies, buckets, levelCount, table, levelInts, shift, mask } = s;
  for (let t = 0; t < tuples; t++) {
    const first = t * startCount;
    let any = 0;
    for (let c = 0; c < startCount; c++) any |= tallies[first + c] as number;
    if (any === 0) continue;
    const at = slots[t] as number;
    const offsets = (cache[capLog[at] as number] as CapLayout).offsets;
    for (let li = 0; li < levelCount; li++) {
      const offset = offsets[li] as number;
      const hi = offset >= 0 ? view.getInt32(at + offset - SHIFT) : 0;
      const lo = offset >= 0 ? view.getInt32(at + offset - SHIFT + 4) : 0;
      const p = probe(table, li * levelInts, hi, lo, shift, mask);
      if (p < 0) continue;
      const b = table[p + 2] as number;
      for (let c = 0; c < startCount; c++)
        buckets[b + c] = (buckets[b + c] as number) + (tallies[first + c] as number);
    }
  }
}
