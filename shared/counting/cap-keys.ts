/**
 * Cap checks over several identities (docs/counting.md, "Identities"): each cap counts on its
 * `key` — the user, the device or the household — so a request whose caps name several keys reads
 * one log per identity (pipelined, one round trip) and evaluates each identity's caps over its own
 * log. This module plans that split and merges the verdicts back, applying the no-identity policy
 * to caps whose identity the request lacks. A request whose caps all count on the user never comes
 * here (the store's one-GET path).
 */
import type {
  CandidateVerdict,
  CapCandidate,
  CapCheckResult,
  CapRule,
  CapStatus,
  CountingCap,
} from './cap-rules.js';
import { capSince, capWindowMs, checkCapEntity, checkRule, whereCap } from './cap-rules.js';
import { InvalidCountQueryError } from './event-log.js';
import {
  DEFAULT_IDENTITY,
  type IdentityKind,
  identityKind,
  identityNames,
  identityTag,
  NO_IDENTITY_POLICIES,
  type NoIdentityPolicy,
  type NoIdentityReport,
} from './identities.js';
import type { EventSchema } from './schema.js';

/** The ids a request carries, by identity kind name: `{ user: '42', household: '9001' }`. */
export type RequestIdentities = Readonly<Record<string, string | undefined>>;

/** The caps of every candidate that count on one identity (or none: blocks). */
export interface KeyGroup {
  /** The identity kind, or undefined for the group of blocks (no log). */
  readonly kind: IdentityKind | undefined;
  /** The key group's hash tag (what the store reads), undefined for the blocks. */
  readonly tag: string | undefined;
  /** The candidates with only this group's caps, in request order. */
  readonly candidates: CapCandidate[];
}

/** How a request splits over identities, and what the policy decided for caps without one. */
export interface KeyPlan {
  readonly groups: readonly KeyGroup[];
  /** Per candidate: the statuses of caps the policy refused (hits with count 0). */
  readonly refused: readonly (CapStatus[] | undefined)[];
  readonly report: NoIdentityReport | undefined;
}

/** Whether a request needs {@link planKeys}: a cap names an identity other than the user. */
export function namesOtherKeys(candidates: readonly CapCandidate[]): boolean {
  for (let ci = 0; ci < candidates.length; ci++) {
    const caps = (candidates[ci] as CapCandidate).caps;
    for (let k = 0; k < caps.length; k++) {
      const key = (caps[k] as CapRule).key;
      if (key !== undefined && key !== DEFAULT_IDENTITY) return true;
    }
  }
  return false;
}

/** The request's id of `kind`, normalised as events' ids are (decimal u64), or undefined. */
function idOf(identities: RequestIdentities, kind: IdentityKind): string | undefined {
  const raw = identities[kind.name];
  if (raw === undefined || raw === '') return undefined;
  if (kind.name === DEFAULT_IDENTITY) return String(raw);
  if (!/^\d{1,20}$/.test(String(raw)) || BigInt(raw) === 0n || BigInt(raw) >= 1n << 64n) {
    throw new InvalidCountQueryError(
      `cap check identities: ${kind.name} id ${JSON.stringify(raw)} is not an id events carry: give the decimal u64 (1..2^64-1) the events' ${kind.field} holds.`,
    );
  }
  return BigInt(raw).toString();
}

/** The request's ids by kind, each parsed once per request (on first use). */
function idCache(identities: RequestIdentities) {
  const cache = new Map<string, string | undefined>();
  return {
    of(kind: IdentityKind): string | undefined {
      if (cache.has(kind.name)) return cache.get(kind.name);
      const id = idOf(identities, kind);
      cache.set(kind.name, id);
      return id;
    },
  };
}

/**
 * Checks every rule of the request against its own candidate and index, the flight starts against
 * the retention included: run when a group's evaluation refused the request, whose copies are
 * renumbered, so the error the caller sees names the cap as they wrote it.
 */
export function validateRequest(
  schema: EventSchema,
  candidates: readonly CapCandidate[],
  now: number,
  notBefore: number,
): void {
  for (let ci = 0; ci < candidates.length; ci++) {
    const c = candidates[ci] as CapCandidate;
    for (let k = 0; k < c.caps.length; k++) {
      const cap = c.caps[k] as CapRule;
      checkRule(schema, c, ci, k, cap);
      if (cap.block !== undefined) continue;
      checkCapEntity(schema, c, ci, k, cap.level);
      capSince(cap, c, ci, k, now, notBefore);
    }
  }
}

/** Throws unless the policy is one of {@link NO_IDENTITY_POLICIES}. */
export function checkPolicy(policy: unknown, where: string): NoIdentityPolicy {
  if (!NO_IDENTITY_POLICIES.includes(policy as NoIdentityPolicy)) {
    throw new InvalidCountQueryError(
      `${where}: noIdentity ${JSON.stringify(policy)} is not a policy: give ${NO_IDENTITY_POLICIES.join(', ')}.`,
    );
  }
  return policy as NoIdentityPolicy;
}

/**
 * Splits the request's caps by the identity each counts on. A cap whose identity the request
 * does not carry is handled by `policy`: refused (a hit, reported in `refused`), skipped, or moved
 * to its kind's coarser identity (refused when that is missing too). Throws
 * {@link InvalidCountQueryError} for an unknown key or a malformed id.
 */
export function planKeys(
  schema: EventSchema,
  candidates: readonly CapCandidate[],
  identities: RequestIdentities,
  policy: NoIdentityPolicy,
): KeyPlan {
  for (const name of Object.keys(identities)) {
    if (identities[name] !== undefined && !identityKind(name)) {
      throw new InvalidCountQueryError(
        `cap check identities: "${name}" is not an identity kind: give ${identityNames()}.`,
      );
    }
  }
  const ids = idCache(identities);
  const groups = new Map<string, KeyGroup & { candidates: CapCandidate[] }>();
  const group = (kind: IdentityKind | undefined, tag: string | undefined) => {
    const name = kind?.name ?? '';
    let g = groups.get(name);
    if (!g) {
      g = {
        kind,
        tag,
        // The copies carry their request index as id (mergeVerdicts puts them back by it).
        candidates: candidates.map(
          (c, ci): CapCandidate => ({
            id: String(ci),
            entities: c.entities,
            caps: [],
            flightStartMs: c.flightStartMs,
          }),
        ),
      };
      groups.set(name, g);
    }
    return g;
  };
  const refused: (CapStatus[] | undefined)[] = new Array(candidates.length);
  // The group of the last key whose own id the request carries: a request's caps name a key or
  // two, over and over, and this skips the lookups (and the tag) for each repeat.
  let lastName: string | undefined;
  let lastGroup: KeyGroup | undefined;
  let refusedCount = 0;
  let uncapped = 0;
  let coarser = 0;
  for (let ci = 0; ci < candidates.length; ci++) {
    const c = candidates[ci] as CapCandidate;
    for (let k = 0; k < c.caps.length; k++) {
      const cap = c.caps[k] as CapRule;
      // Rules are checked where they are evaluated (a group's evaluation; on its error the store
      // re-checks the request with the caller's numbering: validateRequest).
      if (cap.block !== undefined) {
        capsOf(group(undefined, undefined), ci).push(cap);
        continue;
      }
      const name = cap.key ?? DEFAULT_IDENTITY;
      if (name === lastName) {
        capsOf(lastGroup as KeyGroup, ci).push(cap);
        continue;
      }
      const kind = identityKind(name);
      if (!kind) {
        throw new InvalidCountQueryError(
          `${whereCap(c, ci, k)}: key ${JSON.stringify(name)} is not an identity kind: give ${identityNames()} (default user).`,
        );
      }
      let counted: IdentityKind | undefined = kind;
      let id = ids.of(kind);
      if (id === undefined) {
        // Not evaluated in any group: checked here (bad input is never skipped by a policy).
        checkRule(schema, c, ci, k, cap);
        checkCapEntity(schema, c, ci, k, cap.level);
        counted = undefined;
        if (policy === 'coarser' && kind.coarser !== undefined) {
          const wider = identityKind(kind.coarser) as IdentityKind;
          id = ids.of(wider);
          if (id !== undefined) {
            counted = wider;
            coarser++;
          }
        }
        if (counted === undefined) {
          if (policy === 'uncapped') {
            uncapped++;
            continue;
          }
          refusedCount++;
          const status: CapStatus = {
            cap,
            entity: String(c.entities[cap.level]),
            count: 0,
            remaining: 0,
            key: name,
            missingIdentity: true,
          };
          const list = refused[ci] ?? [];
          list.push(status);
          refused[ci] = list;
          continue;
        }
      }
      const g = group(counted, identityTag(counted, id as string));
      if (counted === kind) {
        lastName = name;
        lastGroup = g;
      }
      capsOf(g, ci).push(cap);
    }
  }
  const report =
    refusedCount + uncapped + coarser > 0 ? { policy, refused: refusedCount, uncapped, coarser } : undefined;
  return { groups: [...groups.values()], refused, report };
}

/** The `hits` of a candidate that hits no cap (frozen: verdicts are read-only). */
const NO_HITS: readonly CapStatus[] = Object.freeze([]);

/** The (growing) cap list of candidate `ci` in group `g`. */
function capsOf(g: KeyGroup, ci: number): CapRule[] {
  return (g.candidates[ci] as CapCandidate).caps as CapRule[];
}

/** Which of two statuses is the stricter: a block, else less remaining, else the longer window, else the earlier cap. */
function stricter(a: CapStatus, b: CapStatus, caps: readonly CapRule[]): boolean {
  const aBlock = a.cap.block === true;
  const bBlock = b.cap.block === true;
  if (aBlock !== bBlock) return aBlock;
  if (!aBlock && a.remaining !== b.remaining) return a.remaining < b.remaining;
  const aWindow = aBlock ? 0 : capWindowMs(a.cap as CountingCap);
  const bWindow = bBlock ? 0 : capWindowMs(b.cap as CountingCap);
  if (aWindow !== bWindow) return aWindow > bWindow;
  return caps.indexOf(a.cap) < caps.indexOf(b.cap);
}

/** The status as reported: with the identity it counted on when that is not the user. */
function withKey(status: CapStatus, key: string | undefined): CapStatus {
  return key === undefined ? status : { ...status, key };
}

/** `hits` in the candidate's cap order (they came from several identities). */
function inCapOrder(hits: CapStatus[], caps: readonly CapRule[]): CapStatus[] {
  const order = new Map<CapRule, number>();
  for (let k = caps.length - 1; k >= 0; k--) order.set(caps[k] as CapRule, k);
  return hits.sort((x, y) => (order.get(x.cap) as number) - (order.get(y.cap) as number));
}

/**
 * One verdict per candidate from the groups' results (each in request order): allowed when no
 * group and no refusal hit; hits in the candidate's cap order; the strictest across groups by the
 * same rule as within one.
 */
export function mergeVerdicts(
  candidates: readonly CapCandidate[],
  plan: KeyPlan,
  results: readonly CapCheckResult[],
): CapCheckResult {
  // The copies carry their request index as id (planKeys): each group's verdicts back in order.
  const verdictsOf = results.map((r) => {
    const ordered: CandidateVerdict[] = new Array(candidates.length);
    for (const v of r.allowed) ordered[Number(v.id)] = v;
    for (const v of r.rejected) ordered[Number(v.id)] = v;
    return ordered;
  });
  // The identity each group counted on, as statuses report it (none for the user and blocks).
  const keys = plan.groups.map((g) =>
    g.kind === undefined || g.kind.name === DEFAULT_IDENTITY ? undefined : g.kind.name,
  );
  const allowed: CandidateVerdict[] = [];
  const rejected: CandidateVerdict[] = [];
  for (let ci = 0; ci < candidates.length; ci++) {
    const c = candidates[ci] as CapCandidate;
    const refused = plan.refused[ci];
    // Allocated only for a candidate with hits: most have none, and share one frozen empty list.
    let hits: CapStatus[] | undefined = refused ? [...refused] : undefined;
    let sources = refused ? 1 : 0;
    let strictest: CapStatus | undefined;
    for (const s of refused ?? []) if (!strictest || stricter(s, strictest, c.caps)) strictest = s;
    // The strictest's identity is added once it is known, not to every status compared.
    let strictestKey: string | undefined;
    for (let g = 0; g < verdictsOf.length; g++) {
      const v = (verdictsOf[g] as CandidateVerdict[])[ci] as CandidateVerdict;
      const key = keys[g];
      if (v.hits.length > 0) {
        sources++;
        hits ??= [];
        for (const h of v.hits) hits.push(withKey(h, key));
      }
      if (v.strictest && (!strictest || stricter(v.strictest, strictest, c.caps))) {
        strictest = v.strictest;
        strictestKey = key;
      }
    }
    if (strictest !== undefined) strictest = withKey(strictest, strictestKey);
    if (hits !== undefined && sources > 1) hits = inCapOrder(hits, c.caps);
    const id = c.id ?? String(c.entities.ad ?? ci);
    const isAllowed = hits === undefined || hits.length === 0;
    const list: readonly CapStatus[] = hits ?? NO_HITS;
    const verdict: CandidateVerdict = strictest
      ? { id, allowed: isAllowed, strictest, hits: list }
      : { id, allowed: isAllowed, hits: list };
    (isAllowed ? allowed : rejected).push(verdict);
  }
  return plan.report ? { allowed, rejected, noIdentity: plan.report } : { allowed, rejected };
}
