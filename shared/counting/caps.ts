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
import { foldBuckets, scanLog } from './cap-scan.js';
import { scanCapLog } from './cap-scan-caplog.js';
import { CapScratch } from './cap-scratch.js';
import { fastWindows, orderCounters, resolveCaps } from './cap-setup.js';
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

function capStatus(c: CapCandidate, k: number, count: number): CapStatus {
  const cap = c.caps[k] as CapRule;
  const remaining = cap.block === true ? 0 : capMax(cap) - count;
  return { cap, entity: String(c.entities[cap.level]), count, remaining };
}

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
  let capTotal = 0;
  for (let ci = 0; ci < candidates.length; ci++) capTotal += (candidates[ci] as CapCandidate).caps.length;
  if (sharedScratchBusy || capTotal > SHARED_SCRATCH_CAPS || candidates.length > SHARED_SCRATCH_CAPS / 4) {
    return evaluateCapsWith(
      new CapScratch(),
      capTotal,
      log,
      capLog,
      aggregates,
      candidates,
      now,
      notBefore,
      schema,
    );
  }
  sharedScratchBusy = true;
  try {
    return evaluateCapsWith(
      sharedScratch,
      capTotal,
      log,
      capLog,
      aggregates,
      candidates,
      now,
      notBefore,
      schema,
    );
  } finally {
    sharedScratchBusy = false;
  }
}

/** One cap check in `s`: setup, scan, verdicts. */
function evaluateCapsWith(
  s: CapScratch,
  capTotal: number,
  log: Buffer | readonly Buffer[] | undefined,
  capLog: Buffer | undefined,
  aggregates: Buffer | readonly Buffer[] | undefined,
  candidates: readonly CapCandidate[],
  now: number,
  notBefore: number,
  schema: EventSchema,
): CapCheckResult {
  resolveCaps(s, capTotal, candidates, now, notBefore, schema);
  orderCounters(s);
  const startCount = fastWindows(s);
  if (capLog !== undefined) scanCapLog(s, capLog, notBefore, schema, startCount);
  else if (log !== undefined) scanLog(s, log, notBefore, schema, startCount);
  if (aggregates !== undefined && aggregates.length > 0)
    scanLog(s, aggregates, notBefore, schema, startCount, true);
  if (startCount > 0) foldBuckets(s, startCount);
  return verdicts(s, candidates);
}

/**
 * The verdicts from the counts, in two passes: first each candidate's outcome into the scratch,
 * then the result lists at their exact length (grown by push they were a third again of their
 * size in garbage).
 */
function verdicts(s: CapScratch, candidates: readonly CapCandidate[]): CapCheckResult {
  const { capCounter, counts, finalIndex } = s;
  s.ensureCandidates(candidates.length);
  const { candidateBest, candidateBlock, candidateHits } = s;
  let allowedCount = 0;
  let capIndex = 0;
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
      const cap = caps[k] as CountingCap;
      const remaining = capMax(cap) - (counts[finalIndex[counter] as number] as number);
      if (remaining <= 0) hitCount++;
      const window = capWindowMs(cap);
      if (best < 0 || remaining < bestRemaining || (remaining === bestRemaining && window > bestWindow)) {
        best = k;
        bestRemaining = remaining;
        bestWindow = window;
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
          if (capMax(caps[k] as CountingCap) - count <= 0) list.push(capStatus(c, k, count));
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
