/**
 * The hot loop of a cap check (caps.ts): one pass over the user's packed event log that adds each
 * event to the counters the setup (cap-setup.ts) laid out in the scratch. Per event and level it
 * does two 32-bit reads and a probe or two of the level's id table, and allocates nothing: this
 * loop is most of a cap check's CPU (`npm run bench -- counting`), so it reads everything it needs
 * into locals first and calls nothing per event but the DataView getters the optimizing compiler
 * inlines.
 */
import { type CapScratch, SLOT, slotOf, TWO_32 } from './cap-scratch.js';
import { layoutAt } from './event-log.js';
import type { EventSchema } from './schema.js';

/**
 * Counts the log's events into the scratch's counters (`counts`, scan order) or, on the fast path
 * (`startCount` > 0 window classes), into the entities' buckets. `weighted`: the log holds the
 * day summary's aggregates (shared/redis/scripts/counting-days.lua), each counting its count.
 */
export function scanLog(
  s: CapScratch,
  log: Buffer | readonly Buffer[],
  notBefore: number,
  schema: EventSchema,
  startCount: number,
  weighted = false,
): void {
  const { levelCount, shift, mask, levelInts, table, watchedActions, starts, buckets, counts } = s;
  const { action: cAction, view: cView, since: cSince } = s;
  const fast = startCount > 0;
  const floor = Math.max(notBefore, s.minSince);
  const { layouts: cache, build } = s.scanLayouts(schema);
  // Parts of whole members (a day-summary read's ranges) are scanned one after the other with
  // the setup above done once, not concatenated (a copy of tens of KB per check).
  const parts = Buffer.isBuffer(log) ? undefined : log;
  const partCount = parts === undefined ? 1 : parts.length;
  for (let pi = 0; pi < partCount; pi++) {
    const buf = parts === undefined ? (log as Buffer) : (parts[pi] as Buffer);
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
      // An aggregate of the day summary stands for `count` events (its insertion id's first bytes).
      const weight = weighted ? view.getUint32(at + acc.insertion) : 1;
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
          buckets[b] = (buckets[b] as number) + weight;
          continue;
        }
        for (let k = table[p + 2] as number; k < end && ts >= (cSince[k] as number); k++) {
          if (cAction[k] === action) {
            const v = cView[k] as number;
            if (v < 0 || v === viewType) counts[k] = (counts[k] as number) + weight;
          }
        }
      }
    }
  }
}
