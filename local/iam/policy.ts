/**
 * The local IAM layer's data: the identity policies the CDK stack synthesizes for each principal
 * (every function's execution role, the ad-server access policy), with every CloudFormation
 * intrinsic already resolved to the local region's names and ARNs, and the access keys that name
 * those principals in the local runtime. Produced by `template.ts` from a synthesized cloud
 * assembly, cached by `load.ts`, evaluated by `evaluate.ts`, enforced by `gate.ts`.
 */
import { LOCAL_ACCOUNT_ID } from '../esm/lambda-shapes.js';

/** A condition block: operator → key → value(s), as IAM writes it. */
export type ConditionBlock = Readonly<Record<string, Readonly<Record<string, string | readonly string[]>>>>;

/** One statement with every value a plain string (lists normalised to arrays). */
export interface Statement {
  readonly sid?: string;
  readonly effect: 'Allow' | 'Deny';
  /** Exactly one of `actions` / `notActions`. */
  readonly actions?: readonly string[];
  readonly notActions?: readonly string[];
  /** Exactly one of `resources` / `notResources`. */
  readonly resources?: readonly string[];
  readonly notResources?: readonly string[];
  readonly condition?: ConditionBlock;
}

/** One identity policy attached to a principal, with where it came from. */
export interface AttachedPolicy {
  /** e.g. `Paceline-us-east-1/FunctionpacerFunctionServiceRoleDefaultPolicyB5EB6C66` or an AWS managed policy ARN. */
  readonly source: string;
  readonly statements: readonly Statement[];
}

/** What kind of principal: a function's execution role or the ad-server client. */
export type PrincipalKind = 'function' | 'ad-server';

/** One principal of one region and every identity policy it has. */
export interface PrincipalPolicy {
  /** `<region>/<name>`, e.g. `us-east-1/pacer`, `us-east-1/ad-server`. */
  readonly id: string;
  readonly region: string;
  readonly kind: PrincipalKind;
  /** The function's name in the region description (`pacer`), or `ad-server`. */
  readonly name: string;
  /** The caller ARN AWS would name in an AccessDenied message. */
  readonly arn: string;
  readonly policies: readonly AttachedPolicy[];
  /** The role's permissions boundary, when it has one (both must allow). @default none */
  readonly boundary?: AttachedPolicy;
}

/** What the policies were synthesized from. */
export interface SynthesisInfo {
  /** Hash of every input (source files, settings); the cache key. */
  readonly hash: string;
  /** Wall time of the synthesis and extraction, ms. */
  readonly synthMs: number;
  /** ISO time it was made. */
  readonly at: string;
  readonly regions: readonly string[];
  readonly primaryRegion: string;
  readonly pacer: { readonly shards: number; readonly instancesPerShard: number };
}

/** Every principal's policies for a set of local regions (one synthesized deployment). */
export interface LocalPolicySet {
  readonly version: 1;
  /** The account the ARNs are in: the local runtime's. */
  readonly account: string;
  readonly synthesis: SynthesisInfo;
  readonly principals: readonly PrincipalPolicy[];
}

/**
 * The operator's access key: the CLI, the dashboard, test fixtures and the runtime's own
 * provisioning use it; it stands for an administrator and is never checked.
 */
export const ADMIN_ACCESS_KEY_ID = 'local';

/** The secret of every local access key (s3rver verifies S3 signatures with it). */
export const LOCAL_SECRET_ACCESS_KEY = 'local';

/** Local credentials, as the SDK takes them. */
export interface LocalCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
}

/** The id of a principal of a region. */
export function principalId(region: string, name: string): string {
  return `${region}/${name}`;
}

/**
 * The access key id naming a principal in the local runtime, e.g. `local-us-east-1-pacer`,
 * `local-us-east-1-ad-server`. Keys are looked up, never parsed.
 */
export function accessKeyFor(region: string, name: string): string {
  return `local-${region}-${name}`;
}

/** The credentials of a principal. */
export function principalCredentials(region: string, name: string): LocalCredentials {
  return { accessKeyId: accessKeyFor(region, name), secretAccessKey: LOCAL_SECRET_ACCESS_KEY };
}

/** The name the ad-server principal has in every region. */
export const AD_SERVER_PRINCIPAL = 'ad-server';

/** The account of local ARNs. */
export const LOCAL_ACCOUNT = LOCAL_ACCOUNT_ID;

/**
 * A copy of `set` without `action` (exact, case-insensitive) in any Allow statement of the
 * principal `id`: what a policy missing one grant would give (tests of the gate use it).
 * Statements left with no action are dropped.
 */
export function withoutAction(set: LocalPolicySet, id: string, action: string): LocalPolicySet {
  const drop = action.toLowerCase();
  let found = false;
  const principals = set.principals.map((p) => {
    if (p.id !== id) return p;
    return {
      ...p,
      policies: p.policies.map((policy) => ({
        ...policy,
        statements: policy.statements.flatMap((s) => {
          if (s.effect !== 'Allow' || !s.actions) return [s];
          const actions = s.actions.filter((a) => a.toLowerCase() !== drop);
          if (actions.length !== s.actions.length) found = true;
          return actions.length === 0 ? [] : [{ ...s, actions }];
        }),
      })),
    };
  });
  if (!found) throw new Error(`withoutAction: ${id} has no Allow statement naming ${action}`);
  return { ...set, principals };
}
