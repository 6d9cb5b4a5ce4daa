/**
 * The identities an event counts for and a cap counts on: user, device, household. Each is a key
 * group of its own in Redis (docs/counting.md, "Identities"), written by the same ingest script
 * and read by the same GET; an event that carries several identities is stored in each group.
 *
 * Adding an identity kind is one entry in {@link IDENTITY_KINDS} plus its wire field in a new
 * layout version (shared/counting/schema.ts): keys, fan-out at ingest, cap keys, the no-identity
 * policy and the docs' kind list all follow from the entry.
 */

/** One kind of identity. */
export interface IdentityKind {
  /** The name caps and requests use: `key: 'household'`, `identities: { household: '…' }`. */
  readonly name: string;
  /** The event's wire field that carries it (a u64; 0 = the event does not carry it). */
  readonly field: string;
  /**
   * What the key group's hash tag starts with, before the decimal id: the user's is empty, so
   * user keys are the ones every earlier version wrote (`act:v2:{42}`); a device's is `d`
   * (`act:v2:{d42}`), a household's `h`. Distinct per kind, so equal ids of two kinds never share
   * a group.
   */
  readonly tag: string;
  /**
   * The kind a cap falls back to under the `coarser` no-identity policy: one that groups more
   * people (a user without an id is capped per household). Undefined: none.
   */
  readonly coarser?: string;
}

/** The identity kinds: people and devices finest first, then the stream session. */
export const IDENTITY_KINDS: readonly IdentityKind[] = [
  { name: 'user', field: 'userId', tag: '', coarser: 'household' },
  { name: 'device', field: 'deviceId', tag: 'd', coarser: 'household' },
  { name: 'household', field: 'householdId', tag: 'h' },
  { name: 'session', field: 'sessionId', tag: 's' },
];

/** The kind a cap counts on when it names none. */
export const DEFAULT_IDENTITY = 'user';

const byName = new Map(IDENTITY_KINDS.map((k) => [k.name, k]));

/** The kind called `name`, or undefined. */
export function identityKind(name: string): IdentityKind | undefined {
  return byName.get(name);
}

/** The names of every kind, for messages ("user, device, household"). */
export function identityNames(): string {
  return IDENTITY_KINDS.map((k) => k.name).join(', ');
}

/** The hash tag of an identity's key group (what goes between the braces of its keys). */
export function identityTag(kind: IdentityKind, id: string): string {
  return kind.tag + id;
}

/**
 * What to do with a cap whose identity the request does not carry (a user without an id, a
 * device that sent none):
 * - `refuse`: the cap is hit (count 0, remaining 0): the candidate is not served — the cap is a
 *   promise that cannot be checked;
 * - `uncapped`: the cap is skipped; the candidate's other caps still apply;
 * - `coarser`: the cap counts on the kind's coarser identity (a user's household) when the
 *   request carries it, else it is hit as under `refuse`.
 */
export type NoIdentityPolicy = 'refuse' | 'uncapped' | 'coarser';

/** The policies, for validation and messages. */
export const NO_IDENTITY_POLICIES: readonly NoIdentityPolicy[] = ['refuse', 'uncapped', 'coarser'];

/** How the caps of one check that had no identity of their own were handled. */
export interface NoIdentityReport {
  readonly policy: NoIdentityPolicy;
  /** Caps the policy hit (refused the candidate). */
  readonly refused: number;
  /** Caps the policy skipped. */
  readonly uncapped: number;
  /** Caps counted on a coarser identity instead. */
  readonly coarser: number;
}

/** An identity as an event or a request may list it. */
export interface IdentityRef {
  /** A kind name: 'user' | 'device' | 'household'. */
  readonly kind: string;
  /** The id: a u64 (bigint, number or decimal string), never 0. */
  readonly id: unknown;
}

/**
 * The event's identities by wire field, from its fields (`userId`, `deviceId`, `householdId`) and
 * its `identities` list, or a one-line problem: an unknown kind, a kind given twice with two ids,
 * or more identities than there are kinds (an event carries at most one id per kind).
 */
export function identityFieldsOf(
  event: Readonly<Record<string, unknown>>,
):
  | { readonly fields: Readonly<Record<string, unknown>> }
  | { readonly problem: string; readonly field: string } {
  const list = event.identities;
  if (list === undefined) return { fields: event };
  if (!Array.isArray(list)) {
    return {
      field: 'identities',
      problem: `must be a list of { kind, id } (kinds: ${identityNames()}).`,
    };
  }
  if (list.length > IDENTITY_KINDS.length) {
    return {
      field: 'identities',
      problem:
        `lists ${list.length} identities: an event carries at most one id per kind (${identityNames()}), ` +
        `${IDENTITY_KINDS.length} in all — send the ones its caps count on.`,
    };
  }
  const fields: Record<string, unknown> = { ...event };
  for (const ref of list as readonly IdentityRef[]) {
    const kind = typeof ref?.kind === 'string' ? identityKind(ref.kind) : undefined;
    if (!kind) {
      return {
        field: 'identities',
        problem: `has kind ${JSON.stringify(ref?.kind)}: known kinds are ${identityNames()}.`,
      };
    }
    const given = fields[kind.field];
    if (given !== undefined && String(given) !== String(ref.id)) {
      return {
        field: 'identities',
        problem: `gives the ${kind.name} twice (${String(given)} and ${String(ref.id)}): an event carries one id per kind.`,
      };
    }
    fields[kind.field] = ref.id;
  }
  return { fields };
}
