/**
 * The setup of a cap check (caps.ts), before the scan of the user's events. It works on the flat
 * integer arrays of a {@link CapScratch}: a candidate's entity is resolved once per level (the
 * windows of a level share it) and found in its level's id table (the same table the scan
 * probes), identical caps share one counter (same entity, action, view type and window start),
 * and each entity's counters end up contiguous, so the scan finds them with one probe per event
 * and level. Nothing here allocates per cap; what it leaves is in the scratch.
 */
import {
  type CapCandidate,
  type CapRule,
  type CountingCap,
  capMax,
  capSince,
  capWindowMs,
  checkRule,
  codeOf,
  whereCap,
} from './cap-rules.js';
import { type CapScratch, idHalves, MAX_FAST_WINDOWS, SLOT, slotOf, TWO_32 } from './cap-scratch.js';
import { InvalidCountQueryError, specOf, valueKey } from './event-log.js';
import { ACTIONS, type EventSchema, type FieldSpec } from './schema.js';

/**
 * The caps of a request one evaluation counts, when its caps count on several identities: those
 * whose entry in `groupOf` (by flat index: candidate by candidate, cap by cap) is `group`.
 */
export interface CapSubset {
  readonly groupOf: Int32Array;
  readonly group: number;
}

/** Per cap (flat index), what the verdicts need of its rule: its max and its rank (capWindowMs). */
export interface CapLimits {
  readonly limits: Float64Array;
  readonly ranks: Float64Array;
}

/**
 * Resolves every cap of the request (of `subset` only, when given), filling the levels' id
 * tables, the watched actions and, in `out` (default: the scratch's), each cap's limit and rank.
 * Returns whether the request takes the bucketed scan (the usual request: every cap counts one
 * action in any view type, over at most MAX_FAST_WINDOWS distinct window starts; see
 * {@link bucketEntities}): then `capCounter` holds each cap's entity and `capClass` the index of
 * its window start in `starts` (in discovery order), and no counter exists. Else `capCounter`
 * holds each cap's counter, by setup-order id, in its entity's counter list. −1 in `capCounter`:
 * a block or a cap of another subset. Throws {@link InvalidCountQueryError} naming the first
 * unusable cap.
 */
export function resolveCaps(
  s: CapScratch,
  capTotal: number,
  candidates: readonly CapCandidate[],
  now: number,
  notBefore: number,
  schema: EventSchema,
  subset?: CapSubset,
  out?: CapLimits,
): boolean {
  // A level holds at most one entity per candidate: ≥ 4 slots per candidate keeps the load ≤ 1/4.
  let bits = 4;
  while (1 << bits < candidates.length * 4) bits++;
  s.shift = 32 - bits;
  s.mask = (1 << bits) - 1;
  s.levelInts = (1 << bits) * SLOT;
  s.levelCount = 0;
  s.entityCount = 0;
  s.counterCount = 0;
  s.ensure(capTotal);
  s.watchedActions.fill(0);
  s.codesFor(schema);
  const { capCounter, capClass, starts } = s;
  const { limits: capLimit, ranks: capRank } = out ?? s;
  // The bucketed scan until a cap rules it out: its one action (−1: none yet) and window starts.
  let bucketed = true;
  let bucketAction = -1;
  let startCount = 0;
  const groupOf = subset?.groupOf;
  const group = subset?.group ?? 0;
  let lastActionValue: unknown;
  let lastAction = 0;
  let lastViewValue: unknown;
  let lastView = 0;
  let lastLevel: string | undefined;
  let lastLevelIndex = 0;
  let minSince = Number.POSITIVE_INFINITY;
  let capIndex = 0;
  for (let ci = 0; ci < candidates.length; ci++) {
    const c = candidates[ci] as CapCandidate;
    const caps = c.caps;
    for (let k = 0; k < caps.length; k++) {
      if (groupOf !== undefined && groupOf[capIndex] !== group) {
        capCounter[capIndex++] = -1;
        continue;
      }
      const rule = caps[k] as CapRule;
      const windowMs = rule.windowMs as number;
      let since: number;
      if (
        rule.block !== undefined ||
        rule.recencyMs !== undefined ||
        rule.lifetime !== undefined ||
        rule.stopAfter !== undefined ||
        !Number.isSafeInteger(windowMs) ||
        windowMs <= 0 ||
        !Number.isSafeInteger(rule.max) ||
        (rule.max as number) < 1
      ) {
        // Not a plain frequency cap: a block, a recency, lifetime or conversion cap, or an error
        // (checkRule throws; a field of another kind is refused there, never ignored).
        checkRule(schema, c, ci, k, rule);
        if (rule.block !== undefined) {
          // A block: no counter (−1); the verdict rejects on it.
          capCounter[capIndex++] = -1;
          continue;
        }
        since = capSince(rule, c, ci, k, now, notBefore);
        capLimit[capIndex] = capMax(rule as CountingCap);
        capRank[capIndex] = capWindowMs(rule as CountingCap);
      } else {
        // (now − w, now]: the first millisecond that counts is one after now − w.
        since = now - windowMs + 1;
        capLimit[capIndex] = rule.max as number;
        capRank[capIndex] = windowMs;
      }
      const cap = rule as CountingCap;
      // Caps of one level come in runs: the last level's index, without the search.
      const level = cap.level;
      let li = lastLevelIndex;
      if (level !== lastLevel) {
        li = levelIndex(s, schema, c, ci, k, level);
        lastLevel = level;
        lastLevelIndex = li;
      }
      const entity =
        s.candidateStamp[li] === ci ? (s.candidateEntity[li] as number) : entityOf(s, c, ci, k, li);
      const actionValue = cap.stopAfter ?? cap.action ?? ACTIONS.impression;
      let action: number;
      if (actionValue === lastActionValue) action = lastAction;
      else {
        action = codeFor(s.actionCodes, schema, 'action', actionValue, c, ci, k);
        lastActionValue = actionValue;
        lastAction = action;
      }
      let viewType = -1;
      const viewValue = cap.viewType;
      if (viewValue === undefined) viewType = -1;
      else if (viewValue === lastViewValue) viewType = lastView;
      else {
        viewType = codeFor(s.viewCodes, schema, 'viewType', viewValue, c, ci, k);
        lastViewValue = viewValue;
        lastView = viewType;
      }
      if (since < minSince) minSince = since;
      if (bucketed) {
        if (viewType < 0 && (action === bucketAction || bucketAction < 0)) {
          let cls = 0;
          while (cls < startCount && starts[cls] !== since) cls++;
          if (cls < MAX_FAST_WINDOWS) {
            if (cls === startCount) starts[startCount++] = since;
            bucketAction = action;
            capClass[capIndex] = cls;
            capCounter[capIndex++] = entity;
            continue;
          }
        }
        // Not one of the bucketed scan's: the caps so far get counters, and so does the rest.
        countersForBuckets(s, capIndex, bucketAction);
        bucketed = false;
      }
      capCounter[capIndex++] = counterOf(s, entity, action, viewType, since);
    }
  }
  s.minSince = minSince;
  if (bucketed && startCount > 0) {
    s.startCount = startCount;
    s.watchedActions[bucketAction] = 1;
    return true;
  }
  return false;
}

/** The index of `level` among the request's levels, added (with an empty id table) on first sight. */
function levelIndex(
  s: CapScratch,
  schema: EventSchema,
  c: CapCandidate,
  ci: number,
  k: number,
  level: string,
): number {
  // A handful of levels per request, found by comparison.
  const levelNames = s.levelNames;
  const levelCount = s.levelCount;
  let li = 0;
  while (li < levelCount && levelNames[li] !== level) li++;
  if (li < levelCount) return li;
  // The message is built only for the error (it was a string per level per check).
  const spec = schema.dimension(level) ?? specOf(schema, level, whereCap(c, ci, k));
  if (spec.kind !== 'id')
    throw new InvalidCountQueryError(
      `${whereCap(c, ci, k)}: level "${level}" is not an entity id dimension.`,
    );
  s.levels[li] = spec;
  levelNames[li] = level;
  s.valueKeys[li] = undefined;
  s.candidateEntity[li] = 0;
  s.candidateStamp[li] = -1;
  s.levelCount = levelCount + 1;
  const levelInts = s.levelInts;
  s.ensureTable((li + 1) * levelInts);
  s.table.fill(0, li * levelInts, (li + 1) * levelInts);
  return li;
}

/**
 * The entity candidate `ci` names on level `li`: found in (or added to) the level's id table,
 * where 5 and '5' are one entity, and remembered for the candidate's other caps on the level.
 */
function entityOf(s: CapScratch, c: CapCandidate, ci: number, k: number, li: number): number {
  const level = s.levelNames[li] as string;
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
    // Entity values that are not plain numbers: value → key per level (parsing once).
    const spec = s.levels[li] as FieldSpec;
    let keys = s.valueKeys[li];
    if (keys === undefined) {
      keys = new Map();
      s.valueKeys[li] = keys;
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
  const table = s.table;
  const mask = s.mask;
  const base = li * s.levelInts;
  let p = base + slotOf(hi, lo, s.shift) * SLOT;
  let mark = table[p + 2] as number;
  while (mark !== 0 && (table[p] !== hi || table[p + 1] !== lo)) {
    p = base + (((p - base) / SLOT + 1) & mask) * SLOT;
    mark = table[p + 2] as number;
  }
  let entity: number;
  if (mark === 0) {
    entity = s.entityCount++;
    table[p] = hi;
    table[p + 1] = lo;
    table[p + 2] = entity + 1;
    s.entitySlot[entity] = p;
    s.entityHead[entity] = -1;
  } else entity = mark - 1;
  s.candidateEntity[li] = entity;
  s.candidateStamp[li] = ci;
  return entity;
}

/** The code of an action or view-type value, remembered in `codes` (the scratch's, per schema). */
function codeFor(
  codes: Map<unknown, number>,
  schema: EventSchema,
  dim: string,
  value: string | number,
  c: CapCandidate,
  ci: number,
  k: number,
): number {
  const cached = codes.get(value);
  if (cached !== undefined) return cached;
  const code = codeOf(schema, dim, value, whereCap(c, ci, k));
  codes.set(value, code);
  return code;
}

/** The entity's counter for (action, view type, window start): identical caps share one. */
function counterOf(s: CapScratch, entity: number, action: number, viewType: number, since: number): number {
  const { setupAction, setupView, setupSince, counterNext, entityHead } = s;
  // An entity has a few counters (its windows × actions).
  let counter = entityHead[entity] as number;
  while (
    counter >= 0 &&
    (setupSince[counter] !== since || setupAction[counter] !== action || setupView[counter] !== viewType)
  ) {
    counter = counterNext[counter] as number;
  }
  if (counter >= 0) return counter;
  counter = s.counterCount++;
  setupAction[counter] = action;
  setupView[counter] = viewType;
  setupSince[counter] = since;
  counterNext[counter] = -1;
  if ((entityHead[entity] as number) < 0) entityHead[entity] = counter;
  else counterNext[s.entityTail[entity] as number] = counter;
  s.entityTail[entity] = counter;
  s.watchedActions[action] = 1;
  return counter;
}

/**
 * General scan: lays the counters out in scan order, each entity's counters contiguous, longest
 * window first (the scan stops at the first window an event is older than); its table slot gets
 * their range.
 */
export function orderCounters(s: CapScratch): void {
  const { entityHead, counterNext, setupAction, setupView, setupSince, entitySlot, table } = s;
  const { finalIndex, origin, action: cAction, view: cView, since: cSince, counts } = s;
  counts.fill(0, 0, s.counterCount);
  let next = 0;
  for (let e = 0; e < s.entityCount; e++) {
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
  }
}

/**
 * The caps resolved so far for the bucketed scan (`capIndex` of them, all counting `action`)
 * given counters instead, as the general scan needs.
 */
function countersForBuckets(s: CapScratch, capIndex: number, action: number): void {
  const { capCounter, capClass, starts } = s;
  for (let i = 0; i < capIndex; i++) {
    const entity = capCounter[i] as number;
    if (entity >= 0)
      capCounter[i] = counterOf(s, entity, action, -1, starts[capClass[i] as number] as number);
  }
}

/**
 * Lays out the bucketed scan after {@link resolveCaps} chose it, and returns its number of
 * window classes: the window starts ascending, each cap's class renumbered to match, and per
 * entity a bucket per class (its table slot holds the first). An event's class (the last window
 * start it is at or after) is found once per event and each level adds one to its entity's
 * bucket of that class; a cap's count is then the sum of its entity's buckets from its class up
 * ({@link bucketCounts}). The hot loop then has no loop over an entity's counters, whose window
 * comparisons the CPU mispredicts.
 */
export function bucketEntities(s: CapScratch, capTotal: number): number {
  const { starts, rankOf, capClass, capCounter } = s;
  const startCount = s.startCount;
  // Insertion sort of a handful of starts, remembering where each went.
  const order = s.classOrder;
  for (let c = 0; c < startCount; c++) order[c] = c;
  for (let c = 1; c < startCount; c++) {
    const since = starts[c] as number;
    const from = order[c] as number;
    let j = c;
    while (j > 0 && (starts[j - 1] as number) > since) {
      starts[j] = starts[j - 1] as number;
      order[j] = order[j - 1] as number;
      j--;
    }
    starts[j] = since;
    order[j] = from;
  }
  for (let c = 0; c < startCount; c++) rankOf[order[c] as number] = c;
  for (let i = 0; i < capTotal; i++)
    if ((capCounter[i] as number) >= 0) capClass[i] = rankOf[capClass[i] as number] as number;
  s.bucketsFor(s.entityCount * startCount);
  // The table slot of an entity now holds its first bucket, and a non-zero end mark.
  const { table, entitySlot } = s;
  for (let e = 0; e < s.entityCount; e++) {
    const p = entitySlot[e] as number;
    table[p + 2] = e * startCount;
    table[p + 3] = 1;
  }
  return startCount;
}

/**
 * After the bucketed scan: each cap's count (of `subset`'s caps, when given) into `out`, the sum
 * of its entity's buckets from its window class up.
 */
export function bucketCounts(
  s: CapScratch,
  capTotal: number,
  startCount: number,
  out: Int32Array,
  subset?: CapSubset,
): void {
  const { buckets, capCounter, capClass } = s;
  for (let e = 0; e < s.entityCount; e++) {
    const base = e * startCount;
    for (let c = startCount - 2; c >= 0; c--) {
      buckets[base + c] = (buckets[base + c] as number) + (buckets[base + c + 1] as number);
    }
  }
  const groupOf = subset?.groupOf;
  const group = subset?.group ?? 0;
  for (let i = 0; i < capTotal; i++) {
    const entity = capCounter[i] as number;
    if (entity < 0 || (groupOf !== undefined && groupOf[i] !== group)) continue;
    out[i] = buckets[entity * startCount + (capClass[i] as number)] as number;
  }
}

/** After the general scan: each cap's count (of `subset`'s caps, when given) into `out`. */
export function counterCounts(s: CapScratch, capTotal: number, out: Int32Array, subset?: CapSubset): void {
  const { capCounter, counts, finalIndex } = s;
  const groupOf = subset?.groupOf;
  const group = subset?.group ?? 0;
  for (let i = 0; i < capTotal; i++) {
    const counter = capCounter[i] as number;
    if (counter < 0 || (groupOf !== undefined && groupOf[i] !== group)) continue;
    out[i] = counts[finalIndex[counter] as number] as number;
  }
}
