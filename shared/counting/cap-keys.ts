/**
 * Cap checks over several identities (docs/counting.md, "Identities"): each cap counts on its
 * `key` — the user, the device or the household — so a request whose caps name several keys reads
 * one log per identity (pipelined, one round trip) and counts each identity's caps over its own
 * log, then builds the verdicts once. This module plans that split, applying the no-identity
 * policy to caps whose identity the request lacks. A request whose caps all count on the user never comes
 * here (the store's one-GET path).
 */
import type { CapCandidate, CapCheckResult, CapRule } from './cap-rules.js';
import { capSince, checkCapEntity, checkRule, whereCap } from './cap-rules.js';
import {
  CAP_BLOCK,
  CAP_REFUSED,
  CAP_SKIPPED,
  capTotalOf,
  groupVerdicts,
  type RequestCounts,
} from './caps.js';
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

/** An identity the request's caps count on: one log read, its caps counted over it. */
export interface KeyGroup {
  readonly kind: IdentityKind;
  /** The key group's hash tag (what the store reads). */
  readonly tag: string;
  /** What its caps' statuses report as `key`: the kind's name, none for the user. */
  readonly key: string | undefined;
}

/** How a request splits over identities, and what the policy decided for caps without one. */
export interface KeyPlan {
  readonly groups: readonly KeyGroup[];
  /**
   * Per cap (flat index: candidate by candidate, cap by cap): the index of its group, or
   * CAP_BLOCK, CAP_SKIPPED (left uncapped by the policy) or CAP_REFUSED (refused by it).
   */
  readonly groupOf: Int32Array;
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
 * does not carry is handled by `policy`: refused (a hit), skipped, or moved to its kind's coarser
 * identity (refused when that is missing too). Throws {@link InvalidCountQueryError} for an
 * unknown key or a malformed id.
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
  const groups: KeyGroup[] = [];
  const groupIndex = (kind: IdentityKind, id: string): number => {
    for (let g = 0; g < groups.length; g++) if ((groups[g] as KeyGroup).kind === kind) return g;
    const key = kind.name === DEFAULT_IDENTITY ? undefined : kind.name;
    groups.push({ kind, tag: identityTag(kind, id), key });
    return groups.length - 1;
  };
  const groupOf = new Int32Array(capTotalOf(candidates));
  // The group of the last key whose own id the request carries: a request's caps name a key or
  // two, over and over, and this skips the lookups for each repeat.
  let lastName: string | undefined;
  let lastGroup = 0;
  let refused = 0;
  let uncapped = 0;
  let coarser = 0;
  let i = 0;
  for (let ci = 0; ci < candidates.length; ci++) {
    const c = candidates[ci] as CapCandidate;
    for (let k = 0; k < c.caps.length; k++, i++) {
      const cap = c.caps[k] as CapRule;
      // Rules are checked where they are counted (a group's evaluation; on its error the store
      // re-checks the whole request in order: validateRequest).
      if (cap.block !== undefined) {
        checkRule(schema, c, ci, k, cap);
        groupOf[i] = CAP_BLOCK;
        continue;
      }
      const name = cap.key ?? DEFAULT_IDENTITY;
      if (name === lastName) {
        groupOf[i] = lastGroup;
        continue;
      }
      const kind = identityKind(name);
      if (!kind) {
        throw new InvalidCountQueryError(
          `${whereCap(c, ci, k)}: key ${JSON.stringify(name)} is not an identity kind: give ${identityNames()} (default user).`,
        );
      }
      const id = ids.of(kind);
      if (id !== undefined) {
        lastName = name;
        lastGroup = groupIndex(kind, id);
        groupOf[i] = lastGroup;
        continue;
      }
      // Counted in no group of its own: checked here (bad input is never skipped by a policy).
      checkRule(schema, c, ci, k, cap);
      checkCapEntity(schema, c, ci, k, cap.level);
      const wider =
        policy === 'coarser' && kind.coarser !== undefined ? identityKind(kind.coarser) : undefined;
      const widerId = wider === undefined ? undefined : ids.of(wider);
      if (wider !== undefined && widerId !== undefined) {
        coarser++;
        groupOf[i] = groupIndex(wider, widerId);
      } else if (policy === 'uncapped') {
        uncapped++;
        groupOf[i] = CAP_SKIPPED;
      } else {
        refused++;
        groupOf[i] = CAP_REFUSED;
      }
    }
  }
  const report = refused + uncapped + coarser > 0 ? { policy, refused, uncapped, coarser } : undefined;
  return { groups, groupOf, report };
}

/** The request's verdicts once every group of `plan` has counted its caps into `counts`. */
export function planVerdicts(
  candidates: readonly CapCandidate[],
  plan: KeyPlan,
  counts: RequestCounts,
): CapCheckResult {
  const keys = plan.groups.map((g) => g.key);
  const result = groupVerdicts(candidates, plan.groupOf, keys, counts);
  return plan.report ? { ...result, noIdentity: plan.report } : result;
}
