/**
 * The working memory of a cap check (caps.ts): flat typed arrays reused from call to call, the
 * id tables' hashing, and the per-layout accessors the scan reads members through.
 */

import type { ValueKey } from './event-log.js';
import type { EventSchema, FieldSpec, Layout } from './schema.js';

export const TWO_32 = 4294967296;

/**
 * The signed 32-bit halves of an 8-byte id key: what `DataView.getInt32` reads from the id's
 * bytes, so the scan compares int32s with int32s.
 */
export function idHalves(key: ValueKey, spec: FieldSpec): [number, number] {
  if (spec.width !== 8) throw new RangeError(`level ${spec.name} is not 8 bytes wide`);
  if (typeof key === 'number') return [Math.floor(key / TWO_32) | 0, key | 0];
  const b = Buffer.from(key.slice(1), 'latin1');
  return [b.readInt32BE(0), b.readInt32BE(4)];
}

/** Fibonacci hashing of an id's halves: the top `32 − shift` bits of the product pick the slot. */
export function slotOf(hi: number, lo: number, shift: number): number {
  return Math.imul(lo ^ Math.imul(hi, 0x85ebca6b), 0x9e3779b1) >>> shift;
}

/**
 * Int32s per slot of the id tables: id hi, id lo, then (setup) entity index + 1 and 0, or
 * (scan) the entity's counter range [first, end). end = 0 marks an empty slot.
 */
export const SLOT = 4;

/** Most action and view-type values a scratch remembers the codes of (requests use a handful). */
export const MAX_REMEMBERED_CODES = 64;

/** (Schema, levels) pairs whose scan accessors are kept: one per identity a request's caps name. */
const LAYOUT_SETS = 4;

/** Most distinct window starts of a request the bucketed scan handles; more take the general scan. */
export const MAX_FAST_WINDOWS = 8;

/**
 * Working memory of a cap check, reused from call to call: allocating its dozen typed arrays
 * anew cost more than resolving all the caps of a request. It carries nothing over: a call
 * clears or overwrites every part it reads (counts, tables, watched actions). Calls are
 * synchronous; a nested one (say, from a getter on a candidate) gets a fresh instance.
 */
export class CapScratch {
  /** Caps (hence counters and entities) the arrays hold. */
  capacity = 0;
  // What the setup (cap-setup.ts) leaves for the scan and the verdicts: the id tables' geometry
  // (slots per level = mask + 1, int32s per level, the hash shift) and how many levels,
  // entities and counters this check has, and its earliest window start.
  shift = 0;
  mask = 0;
  levelInts = 0;
  levelCount = 0;
  entityCount = 0;
  counterCount = 0;
  minSince = 0;
  /** Per cap (in request order): its counter, by setup-order id; −1 for a block. */
  capCounter = new Int32Array(0);
  /**
   * Per cap, read from the rule once, in the setup: its max (`limits`), its window for ranking
   * (`ranks`: capWindowMs)
   * and, after the scan, its count — so the verdicts never read a rule object again.
   */
  limits = new Float64Array(0);
  ranks = new Float64Array(0);
  capCount = new Int32Array(0);
  /** Bucketed scan: per cap, its window class (the index of its window start in `starts`). */
  capClass = new Int32Array(0);
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
  // Per candidate, for building the verdicts: the strictest cap (−1: none), the first block
  // (−1: none), and how many rules hit.
  candidateBest = new Int32Array(0);
  candidateBlock = new Int32Array(0);
  candidateHits = new Int32Array(0);
  /**
   * Bucketed scan: the distinct window starts (ascending once laid out) and how many, per entity a
   * count per window class, and the setup's renumbering of classes when it sorts the starts.
   */
  readonly starts = new Float64Array(MAX_FAST_WINDOWS);
  startCount = 0;
  readonly classOrder = new Int32Array(MAX_FAST_WINDOWS);
  readonly rankOf = new Int32Array(MAX_FAST_WINDOWS);
  buckets = new Int32Array(0);
  /**
   * Cap-log scan (cap-scan-caplog.ts): on the general path per tuple and level the table position
   * of the tuple's entity (−1: none of the request's); on the bucketed path per tuple its position
   * in the cap log and a count per window class.
   */
  tupleSlots = new Int32Array(0);
  tupleTallies = new Int32Array(0);
  /** One open-addressing region of `SLOT` int32s × slots per level. */
  table = new Int32Array(0);
  /** Actions some counter watches: other events are skipped before any id lookup. */
  readonly watchedActions = new Uint8Array(256);
  /**
   * Scan accessors by layout version, for the last few (schema, levels in order) pairs seen —
   * instead of rebuilt per check (a typed array and a few objects each: garbage, and garbage sets
   * how often the young generation is collected). Several, because a request whose caps count on
   * several identities evaluates each identity's caps, with their own levels, in turn.
   */
  private layoutSets: LayoutSet[] = [];
  /**
   * Per-check tables of the setup (see resolveCaps), overwritten by index from the start —
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

  /**
   * What a scan (cap-scan.ts, cap-scan-caplog.ts) reads members through: the accessors of this
   * check's levels of `schema` (one of the last {@link LAYOUT_SETS} sets kept) and their builder.
   * Drops the levels a previous check had beyond this one's first (a shape change, so rare).
   */
  scanLayouts(schema: EventSchema): LayoutSet {
    const levelCount = this.levelCount;
    const levels = this.levels;
    if (levels.length > levelCount) {
      levels.length = levelCount;
      this.levelNames.length = levelCount;
      this.valueKeys.length = levelCount;
      this.candidateEntity.length = levelCount;
      this.candidateStamp.length = levelCount;
    }
    const sets = this.layoutSets;
    for (let k = 0; k < sets.length; k++) {
      const set = sets[k] as LayoutSet;
      const known = set.levels;
      let same = set.schema === schema && known.length === levels.length;
      for (let i = 0; same && i < levels.length; i++) same = known[i] === levels[i];
      if (same) return set;
    }
    const kept = levels.slice();
    const set: LayoutSet = {
      schema,
      levels: kept,
      layouts: [],
      build: (layout) => new CapLayout(layout, kept),
    };
    if (sets.length >= LAYOUT_SETS) sets.shift();
    sets.push(set);
    return set;
  }

  /** Makes room for `caps` caps (counters and entities are at most as many). */
  ensure(caps: number): void {
    if (caps <= this.capacity) return;
    const n = Math.max(caps, this.capacity * 2, 64);
    this.capacity = n;
    this.capCounter = new Int32Array(n);
    this.limits = new Float64Array(n);
    this.ranks = new Float64Array(n);
    this.capCount = new Int32Array(n);
    this.capClass = new Int32Array(n);
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

  /** Makes room for `ints` tuple slots and `tallies` tuple tallies, keeping what is there. */
  ensureTuples(ints: number, tallies: number): void {
    if (ints > this.tupleSlots.length) {
      const grown = new Int32Array(Math.max(ints, this.tupleSlots.length * 2, 1024));
      grown.set(this.tupleSlots);
      this.tupleSlots = grown;
    }
    if (tallies > this.tupleTallies.length) {
      // Kept on growth: a scan grows them mid-log, past the tuples it has tallied so far.
      const grown = new Int32Array(Math.max(tallies, this.tupleTallies.length * 2, 1024));
      grown.set(this.tupleTallies);
      this.tupleTallies = grown;
    }
  }

  /** Makes room for `ints` table entries, keeping the regions of the levels seen so far. */
  ensureTable(ints: number): void {
    if (ints <= this.table.length) return;
    const table = new Int32Array(Math.max(ints, this.table.length * 2));
    table.set(this.table);
    this.table = table;
  }
}

/** Scan accessors by layout version for one (schema, levels) pair, and how to build a missing one. */
export interface LayoutSet {
  readonly schema: EventSchema;
  readonly levels: readonly FieldSpec[];
  readonly layouts: (CapLayout | undefined)[];
  readonly build: (layout: Layout) => CapLayout;
}

/**
 * Where the scan finds what it reads in one layout version's members. A class with an Int32Array,
 * not an object literal with an array: a literal's map is shared with every other literal of the
 * same property sequence, and a change to one of those (a field's representation) deoptimises the
 * scan in the middle of a run (`node --trace-deopt` on `npm run bench -- counting`: the check then
 * runs unoptimised, ≈ 2 ms, until TurboFan compiles it again).
 */
export class CapLayout {
  readonly length: number;
  /** Per level; −1: the version lacks the level (its value is zero). */
  readonly offsets: Int32Array;
  readonly action: number;
  readonly viewType: number;
  /** Where an aggregate of the day summary holds its count (u32). */
  readonly insertion: number;

  constructor(layout: Layout, levels: readonly FieldSpec[]) {
    this.length = layout.memberLength;
    this.offsets = Int32Array.from(levels, (l) => layout.byName.get(l.name)?.offset ?? -1);
    this.action = layout.byName.get('action')?.offset ?? 0;
    this.viewType = layout.byName.get('viewType')?.offset ?? 0;
    this.insertion = layout.byName.get('insertionId')?.offset ?? 0;
  }
}
