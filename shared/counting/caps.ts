/**
 * Frequency-cap checks: every candidate of one request over one scan of the user's events. The
 * check runs in phases over one reused working memory (cap-scratch.ts): resolve the caps to
 * counters (cap-setup.ts), scan the log (cap-scan.ts, the hot loop), then build the verdicts here.
 */
import type {
  CandidateVerdict,
  CapCandidate,
  CapCheckResult,
  CapRule,
  CapStatus,
  CountingCap,
} from './cap-rules.js';
import { capMax, capWindowMs } from './cap-rules.js';
import { scanLog } from './cap-scan.js';
import { scanCapLog } from './cap-scan-caplog.js';
import { CapScratch } from './cap-scratch.js';
import {
  bucketCounts,
  bucketEntities,
  type CapSubset,
  counterCounts,
  orderCounters,
  resolveCaps,
} from './cap-setup.js';
import { DEFAULT_IDENTITY } from './identities.js';
import { actionEventSchema, type EventSchema } from './schema.js';

/**
 * Requests up to this many caps (and a quarter as many candidates) use the shared working memory
 * (≈ 70 bytes per cap, 64 bytes per candidate and level); a larger one gets its own, so one
 * outsized request does not pin its memory for good.
 */
const SHARED_SCRATCH_CAPS = 16_384;
const sharedScratch = new CapScratch();
let sharedScratchBusy = false;

/** The `hits` of every candidate that hits no cap (frozen: verdicts are read-only). */
const NO_HITS: readonly CapStatus[] = Object.freeze([]);

/**
 * Evaluates frequency caps for all candidates of one request over one scan of the user's events.
 * A cap counts events with now − windowMs < timestamp (and within retention; stamps ahead of
 * `now` count as now); a candidate is allowed when it has no block and every cap has count < max.
 * `aggregates`: whole days of the day summary (store.ts), none of them holding a window start.
 */
export function evaluateCaps(
  log: Buffer | readonly Buffer[],
  candidates: readonly CapCandidate[],
  now: number,
  notBefore: number,
  schema: EventSchema = actionEventSchema,
  aggregates?: Buffer | readonly Buffer[],
): CapCheckResult {
  return evaluate(log, undefined, candidates, now, notBefore, schema, aggregates);
}

/**
 * {@link evaluateCaps} over the user's cap log (counting-caplog.lua; it starts with
 * `CAP_LOG_KEPT`) instead of its log: the same verdicts from a fraction of the bytes.
 */
export function evaluateCapLog(
  capLog: Buffer,
  candidates: readonly CapCandidate[],
  now: number,
  notBefore: number,
  schema: EventSchema = actionEventSchema,
): CapCheckResult {
  return evaluate(undefined, capLog, candidates, now, notBefore, schema, undefined);
}

/**
 * Per-cap states of a request whose caps count on several identities (`groupOf`, planKeys):
 * an index ≥ 0 names the identity group the cap counts in; these mark the caps no group counts.
 */
export const CAP_BLOCK = -1;
/** A cap the no-identity policy left uncapped: neither a hit nor a candidate for the strictest. */
export const CAP_SKIPPED = -2;
/** A cap the no-identity policy refused: a hit with count 0 and the identity reported missing. */
export const CAP_REFUSED = -3;

/** What each identity's evaluation of a request leaves for its verdicts: per cap (flat index). */
export interface RequestCounts {
  readonly counts: Int32Array;
  readonly limits: Float64Array;
  readonly ranks: Float64Array;
}

/** Empty {@link RequestCounts} for `capTotal` caps. */
export function requestCounts(capTotal: number): RequestCounts {
  return {
    counts: new Int32Array(capTotal),
    limits: new Float64Array(capTotal),
    ranks: new Float64Array(capTotal),
  };
}

/** The caps of all candidates. */
export function capTotalOf(candidates: readonly CapCandidate[]): number {
  let capTotal = 0;
  for (let ci = 0; ci < candidates.length; ci++) capTotal += (candidates[ci] as CapCandidate).caps.length;
  return capTotal;
}

/**
 * The shared working memory when it is free and the request not outsized, else a fresh one;
 * give it back with {@link releaseScratch}.
 */
function takeScratch(capTotal: number, candidateCount: number): CapScratch {
  if (sharedScratchBusy || capTotal > SHARED_SCRATCH_CAPS || candidateCount > SHARED_SCRATCH_CAPS / 4) {
    return new CapScratch();
  }
  sharedScratchBusy = true;
  return sharedScratch;
}

function releaseScratch(s: CapScratch): void {
  if (s === sharedScratch) sharedScratchBusy = false;
}

/** A check over `log` (with the day summary's `aggregates`) or, when given, over `capLog`. */
function evaluate(
  log: Buffer | readonly Buffer[] | undefined,
  capLog: Buffer | undefined,
  candidates: readonly CapCandidate[],
  now: number,
  notBefore: number,
  schema: EventSchema,
  aggregates: Buffer | readonly Buffer[] | undefined,
): CapCheckResult {
  const capTotal = capTotalOf(candidates);
  const s = takeScratch(capTotal, candidates.length);
  try {
    countIn(s, capTotal, log, capLog, aggregates, candidates, now, notBefore, schema, undefined, undefined);
    // capCounter: −1 for a block, else ≥ 0 (a counter or an entity): the verdicts' states.
    return verdicts(s, candidates, s.capCounter, s.capCount, s.limits, s.ranks, undefined);
  } finally {
    releaseScratch(s);
  }
}

/**
 * Counts the caps of `subset` (one identity's: see planKeys) over that identity's `log` (with the
 * day summary's `aggregates`) or `capLog`, into `into` at each cap's flat index; the verdicts
 * come once every identity is counted ({@link groupVerdicts}).
 */
export function countCaps(
  log: Buffer | readonly Buffer[] | undefined,
  capLog: Buffer | undefined,
  aggregates: Buffer | readonly Buffer[] | undefined,
  candidates: readonly CapCandidate[],
  now: number,
  notBefore: number,
  schema: EventSchema,
  subset: CapSubset,
  into: RequestCounts,
): void {
  const capTotal = into.counts.length;
  const s = takeScratch(capTotal, candidates.length);
  try {
    countIn(s, capTotal, log, capLog, aggregates, candidates, now, notBefore, schema, subset, into);
  } finally {
    releaseScratch(s);
  }
}

/**
 * The verdicts of a request whose caps count on several identities, from `groupOf` (a group
 * index or a CAP_* state per cap), each group's status key (`keys`; undefined: the user) and
 * the counts every group left in `counts`.
 */
export function groupVerdicts(
  candidates: readonly CapCandidate[],
  groupOf: Int32Array,
  keys: readonly (string | undefined)[],
  counts: RequestCounts,
): CapCheckResult {
  const s = takeScratch(0, candidates.length);
  try {
    return verdicts(s, candidates, groupOf, counts.counts, counts.limits, counts.ranks, keys);
  } finally {
    releaseScratch(s);
  }
}

/**
 * Setup and scan in `s`: each cap's count (of `subset`'s caps, when given), limit and rank at its
 * flat index into `into`, or without it into the scratch's own (`capCount`, `limits`, `ranks`, as
 * grown for this request).
 */
function countIn(
  s: CapScratch,
  capTotal: number,
  log: Buffer | readonly Buffer[] | undefined,
  capLog: Buffer | undefined,
  aggregates: Buffer | readonly Buffer[] | undefined,
  candidates: readonly CapCandidate[],
  now: number,
  notBefore: number,
  schema: EventSchema,
  subset: CapSubset | undefined,
  into: RequestCounts | undefined,
): void {
  const bucketed = resolveCaps(s, capTotal, candidates, now, notBefore, schema, subset, into);
  let startCount = 0;
  if (bucketed) startCount = bucketEntities(s, capTotal);
  else orderCounters(s);
  if (capLog !== undefined) scanCapLog(s, capLog, notBefore, schema, startCount);
  else if (log !== undefined) scanLog(s, log, notBefore, schema, startCount);
  if (aggregates !== undefined && aggregates.length > 0)
    scanLog(s, aggregates, notBefore, schema, startCount, true);
  const counts = into === undefined ? s.capCount : into.counts;
  if (bucketed) bucketCounts(s, capTotal, startCount, counts, subset);
  else counterCounts(s, capTotal, counts, subset);
}

/** A status; `key` only when given (the user's statuses carry none). */
function status(
  c: CapCandidate,
  k: number,
  count: number,
  remaining: number,
  key: string | undefined,
): CapStatus {
  const cap = c.caps[k] as CapRule;
  const entity = String(c.entities[cap.level]);
  return key === undefined ? { cap, entity, count, remaining } : { cap, entity, count, remaining, key };
}

/** The status of a cap the policy refused: its identity is missing. */
function refusedStatus(c: CapCandidate, k: number): CapStatus {
  const cap = c.caps[k] as CapRule;
  return {
    cap,
    entity: String(c.entities[cap.level]),
    count: 0,
    remaining: 0,
    key: cap.key ?? DEFAULT_IDENTITY,
    missingIdentity: true,
  };
}

/** The status of a block (no count; its remaining as a counting cap's would be, 0 when blocking). */
function blockStatus(c: CapCandidate, k: number): CapStatus {
  const cap = c.caps[k] as CapRule;
  const remaining = cap.block === true ? 0 : capMax(cap as CountingCap);
  return { cap, entity: String(c.entities[cap.level]), count: 0, remaining };
}

/**
 * The verdicts, in two passes: first each candidate's outcome into the scratch, then the result
 * lists at their exact length (grown by push they were a third again of their size in garbage).
 * Per cap (flat index): `state` is CAP_BLOCK, CAP_SKIPPED, CAP_REFUSED or (≥ 0) counted, with
 * `counts`, `limits` and `ranks`; a counted cap's status carries `keys[state]` when `keys` is given.
 */
function verdicts(
  s: CapScratch,
  candidates: readonly CapCandidate[],
  state: Int32Array,
  counts: Int32Array,
  limits: Float64Array,
  ranks: Float64Array,
  keys: readonly (string | undefined)[] | undefined,
): CapCheckResult {
  s.ensureCandidates(candidates.length);
  const { candidateBest, candidateBlock, candidateHits } = s;
  let allowedCount = 0;
  let capIndex = 0;
  for (let ci = 0; ci < candidates.length; ci++) {
    const c = candidates[ci] as CapCandidate;
    const n = c.caps.length;
    const base = capIndex;
    capIndex += n;
    let best = -1;
    let bestRemaining = 0;
    let bestRank = 0;
    let block = -1;
    let hitCount = 0;
    for (let k = 0; k < n; k++) {
      const i = base + k;
      const st = state[i] as number;
      let remaining = 0;
      let rank = 0;
      if (st >= 0) {
        remaining = (limits[i] as number) - (counts[i] as number);
        rank = ranks[i] as number;
      } else if (st === CAP_BLOCK) {
        // A block: always a hit, and the strictest (the first one if several).
        hitCount++;
        if (block < 0) block = k;
        continue;
      } else if (st === CAP_SKIPPED) continue;
      else rank = capWindowMs(c.caps[k] as CountingCap);
      if (remaining <= 0) hitCount++;
      if (best < 0 || remaining < bestRemaining || (remaining === bestRemaining && rank > bestRank)) {
        best = k;
        bestRemaining = remaining;
        bestRank = rank;
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
    const base = capIndex;
    capIndex += c.caps.length;
    const best = candidateBest[ci] as number;
    const block = candidateBlock[ci] as number;
    const isAllowed = candidateHits[ci] === 0;
    // Most candidates hit nothing: they share one frozen empty list (an array per candidate was
    // a third of the check's garbage, and garbage is what sets the scavenges under load).
    const hits = isAllowed ? NO_HITS : hitsOf(c, base, state, counts, limits, keys);
    const id = c.id ?? String(c.entities.ad ?? ci);
    let verdict: CandidateVerdict;
    if (block >= 0) verdict = { id, allowed: false, strictest: blockStatus(c, block), hits };
    else if (best < 0) verdict = { id, allowed: isAllowed, hits };
    else {
      const i = base + best;
      const st = state[i] as number;
      const strictest =
        st === CAP_REFUSED
          ? refusedStatus(c, best)
          : status(c, best, counts[i] as number, (limits[i] as number) - (counts[i] as number), keys?.[st]);
      verdict = { id, allowed: isAllowed, strictest, hits };
    }
    if (isAllowed) allowed[allowedAt++] = verdict;
    else rejected[rejectedAt++] = verdict;
  }
  return { allowed, rejected };
}

/** The statuses of the caps candidate `c` hits, in its cap order. */
function hitsOf(
  c: CapCandidate,
  base: number,
  state: Int32Array,
  counts: Int32Array,
  limits: Float64Array,
  keys: readonly (string | undefined)[] | undefined,
): CapStatus[] {
  const list: CapStatus[] = [];
  for (let k = 0; k < c.caps.length; k++) {
    const i = base + k;
    const st = state[i] as number;
    if (st === CAP_BLOCK) list.push(blockStatus(c, k));
    else if (st === CAP_REFUSED) list.push(refusedStatus(c, k));
    else if (st >= 0) {
      const count = counts[i] as number;
      const remaining = (limits[i] as number) - count;
      if (remaining <= 0) list.push(status(c, k, count, remaining, keys?.[st]));
    }
  }
  return list;
}
