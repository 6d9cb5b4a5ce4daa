/**
 * IAM policy evaluation for identity-based policies, the way AWS evaluates them for a principal
 * calling a resource of its own account: an explicit Deny wins, else an Allow is needed, else
 * the call is implicitly denied; with a permissions boundary both the policies and the boundary
 * must allow. Action and NotAction (case-insensitive, `*` and `?`), Resource and NotResource
 * (ARN wildcards per segment, a trailing `*` spanning the rest), and conditions:
 *
 * - operators: String(Not)Equals(IgnoreCase), String(Not)Like, Arn(Not)Equals, Arn(Not)Like,
 *   Numeric*, Date*, Bool, Null; the `…IfExists` suffix; `ForAnyValue:` / `ForAllValues:`;
 * - keys the local runtime knows ({@link SUPPORTED_CONDITION_KEYS}): `aws:RequestedRegion`,
 *   `aws:PrincipalAccount`, `aws:PrincipalArn`, `aws:SecureTransport` (true, as the SDK's HTTPS
 *   call to AWS carries), `aws:CurrentTime`, `aws:EpochTime`.
 *
 * A condition on any other key (e.g. `kms:ViaService`) or with another operator cannot be
 * evaluated here: the statement is taken fail-closed (an Allow does not apply, a Deny does) and
 * the decision says why. Resource-based policies (bucket, queue and key policies), SCPs and
 * session policies are not evaluated.
 */
import type { AttachedPolicy, PrincipalPolicy, Statement } from './policy.js';

/** Values of the request context, by condition key (keys compared case-insensitively). */
export type RequestContext = Readonly<Record<string, string | readonly string[] | undefined>>;

/** One authorization question: may the principal perform `action` on `resource`? */
export interface AccessRequest {
  /** `service:Operation`, e.g. `dynamodb:PutItem`. */
  readonly action: string;
  /** The resource ARN (or `*` for actions without a resource). */
  readonly resource: string;
  readonly context: RequestContext;
}

/** The answer, with the reason AWS would give. */
export type Decision =
  | { readonly allowed: true; readonly source: string }
  | {
      readonly allowed: false;
      readonly reason: 'explicit-deny' | 'implicit-deny';
      /** The policy with the explicit Deny. */
      readonly source?: string;
      /** Statements that could not be evaluated locally (unsupported condition key or operator). */
      readonly unevaluable?: readonly string[];
    };

/** Condition keys the local runtime provides (lower case). */
export const SUPPORTED_CONDITION_KEYS: readonly string[] = [
  'aws:requestedregion',
  'aws:principalaccount',
  'aws:principalarn',
  'aws:securetransport',
  'aws:currenttime',
  'aws:epochtime',
];

const globCache = new Map<string, RegExp>();

/** A glob (`*`, `?`) as an anchored regular expression. */
function glob(pattern: string, ignoreCase: boolean): RegExp {
  const id = `${ignoreCase ? 'i' : 's'}${pattern}`;
  let re = globCache.get(id);
  if (!re) {
    const body = pattern
      .replace(/[.+^${}()|[\]\\]/g, '\\$&')
      .replace(/\*/g, '.*')
      .replace(/\?/g, '.');
    re = new RegExp(`^${body}$`, ignoreCase ? 'is' : 's');
    if (globCache.size > 10_000) globCache.clear();
    globCache.set(id, re);
  }
  return re;
}

/** Whether an action pattern (`dynamodb:Get*`, `*`) matches an action (case-insensitive). */
export function actionMatches(pattern: string, action: string): boolean {
  return pattern === '*' || glob(pattern, true).test(action);
}

/** Splits an ARN into its five fixed segments and the resource part (which may hold colons). */
function arnParts(arn: string): string[] {
  const parts = arn.split(':');
  if (parts.length <= 6) return parts;
  return [...parts.slice(0, 5), parts.slice(5).join(':')];
}

/**
 * Whether a Resource pattern matches an ARN: wildcards within each segment; a segment ending in
 * `*` that is the pattern's last one spans the rest of the ARN (IAM's rule).
 */
export function resourceMatches(pattern: string, arn: string): boolean {
  if (pattern === '*') return true;
  const p = arnParts(pattern);
  const a = arnParts(arn);
  for (let i = 0; i < p.length; i++) {
    const seg = p[i] as string;
    if (i === p.length - 1 && p.length < a.length) {
      // Fewer segments than the ARN: only a trailing * may cover the remaining ones.
      return seg.endsWith('*') && glob(seg, false).test(a.slice(i).join(':'));
    }
    if (i >= a.length || !glob(seg, false).test(a[i] as string)) return false;
  }
  return p.length === a.length;
}

function list(v: string | readonly string[] | undefined): readonly string[] {
  if (v === undefined) return [];
  return typeof v === 'string' ? [v] : v;
}

type Compare = (actual: string, expected: string) => boolean;

const num = (s: string) => Number(s);
const date = (s: string) => (/^\d+$/.test(s) ? Number(s) * 1000 : Date.parse(s));

/** Positive comparison of each operator family; negated operators are `Not` of these. */
const comparisons: Record<string, Compare> = {
  stringequals: (a, e) => a === e,
  stringequalsignorecase: (a, e) => a.toLowerCase() === e.toLowerCase(),
  stringlike: (a, e) => glob(e, false).test(a),
  arnequals: (a, e) => resourceMatches(e, a),
  arnlike: (a, e) => resourceMatches(e, a),
  numericequals: (a, e) => num(a) === num(e),
  numericlessthan: (a, e) => num(a) < num(e),
  numericlessthanequals: (a, e) => num(a) <= num(e),
  numericgreaterthan: (a, e) => num(a) > num(e),
  numericgreaterthanequals: (a, e) => num(a) >= num(e),
  dateequals: (a, e) => date(a) === date(e),
  datelessthan: (a, e) => date(a) < date(e),
  datelessthanequals: (a, e) => date(a) <= date(e),
  dategreaterthan: (a, e) => date(a) > date(e),
  dategreaterthanequals: (a, e) => date(a) >= date(e),
  bool: (a, e) => a.toLowerCase() === e.toLowerCase(),
};

const negated: Record<string, string> = {
  stringnotequals: 'stringequals',
  stringnotequalsignorecase: 'stringequalsignorecase',
  stringnotlike: 'stringlike',
  arnnotequals: 'arnequals',
  arnnotlike: 'arnlike',
  numericnotequals: 'numericequals',
  datenotequals: 'dateequals',
};

/** Thrown inside evaluation for a condition the local runtime cannot evaluate. */
class Unevaluable extends Error {}

function contextValue(context: RequestContext, key: string): readonly string[] | undefined {
  const lower = key.toLowerCase();
  for (const [k, v] of Object.entries(context)) if (k.toLowerCase() === lower) return list(v);
  return undefined;
}

/** One `operator: { key: values }` entry: every key must match (AND), any value of a key (OR). */
function conditionHolds(
  rawOperator: string,
  entries: Readonly<Record<string, string | readonly string[]>>,
  context: RequestContext,
): boolean {
  let operator = rawOperator.toLowerCase();
  let set: 'any' | 'all' | undefined;
  if (operator.startsWith('foranyvalue:')) [set, operator] = ['any', operator.slice(12)];
  else if (operator.startsWith('forallvalues:')) [set, operator] = ['all', operator.slice(13)];
  const ifExists = operator.endsWith('ifexists');
  if (ifExists) operator = operator.slice(0, -8);
  for (const [key, expectedRaw] of Object.entries(entries)) {
    if (!SUPPORTED_CONDITION_KEYS.includes(key.toLowerCase()))
      throw new Unevaluable(`condition key ${key} is not known to the local runtime`);
    const expected = list(expectedRaw);
    const actual = contextValue(context, key);
    if (operator === 'null') {
      const wantAbsent = expected.some((e) => e.toLowerCase() === 'true');
      if ((actual === undefined || actual.length === 0) !== wantAbsent) return false;
      continue;
    }
    const positive = negated[operator] ?? operator;
    const compare = comparisons[positive];
    if (!compare) throw new Unevaluable(`condition operator ${rawOperator} is not supported locally`);
    const isNegated = positive !== operator;
    if (actual === undefined || actual.length === 0) {
      // An absent key: IfExists and ForAllValues hold, negated operators hold, others do not.
      if (ifExists || set === 'all' || isNegated) continue;
      return false;
    }
    const one = (v: string) => {
      const hit = expected.some((e) => compare(v, e));
      return isNegated ? !hit : hit;
    };
    const ok = set === 'all' ? actual.every(one) : actual.some(one);
    if (!ok) return false;
  }
  return true;
}

/** Whether a statement applies to the request (throws Unevaluable for what cannot be decided). */
function statementApplies(s: Statement, request: AccessRequest): boolean {
  const actionHit = s.actions
    ? s.actions.some((p) => actionMatches(p, request.action))
    : !(s.notActions ?? []).some((p) => actionMatches(p, request.action));
  if (!actionHit) return false;
  const resourceHit = s.resources
    ? s.resources.some((p) => resourceMatches(p, request.resource))
    : !(s.notResources ?? []).some((p) => resourceMatches(p, request.resource));
  if (!resourceHit) return false;
  for (const [operator, entries] of Object.entries(s.condition ?? {})) {
    if (!conditionHolds(operator, entries, request.context)) return false;
  }
  return true;
}

interface Verdict {
  readonly allow?: string;
  readonly deny?: string;
  readonly unevaluable: string[];
}

function verdictOf(policies: readonly AttachedPolicy[], request: AccessRequest): Verdict {
  let allow: string | undefined;
  const unevaluable: string[] = [];
  for (const policy of policies) {
    for (const s of policy.statements) {
      let applies: boolean;
      try {
        applies = statementApplies(s, request);
      } catch (error) {
        if (!(error instanceof Unevaluable)) throw error;
        const where = `${policy.source}${s.sid ? ` (${s.sid})` : ''}: ${error.message}`;
        unevaluable.push(where);
        // Fail closed: a Deny we cannot evaluate applies, an Allow does not.
        if (s.effect === 'Deny') return { deny: policy.source, unevaluable };
        continue;
      }
      if (!applies) continue;
      if (s.effect === 'Deny') return { deny: policy.source, unevaluable };
      allow ??= policy.source;
    }
  }
  return { ...(allow ? { allow } : {}), unevaluable };
}

/** Evaluates one request against a principal's identity policies (and boundary). */
export function evaluate(principal: PrincipalPolicy, request: AccessRequest): Decision {
  const main = verdictOf(principal.policies, request);
  const boundary = principal.boundary ? verdictOf([principal.boundary], request) : undefined;
  const unevaluable = [...main.unevaluable, ...(boundary?.unevaluable ?? [])];
  const extra = unevaluable.length > 0 ? { unevaluable } : {};
  const deny = main.deny ?? boundary?.deny;
  if (deny) return { allowed: false, reason: 'explicit-deny', source: deny, ...extra };
  if (main.allow && (!boundary || boundary.allow)) return { allowed: true, source: main.allow };
  return { allowed: false, reason: 'implicit-deny', ...extra };
}
