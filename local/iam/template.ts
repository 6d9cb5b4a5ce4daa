/**
 * Extraction of every local principal's identity policies from a synthesized cloud assembly,
 * generic over the template's shape:
 *
 * - a **function** is an `AWS::Lambda::Function` whose `POWERTOOLS_SERVICE_NAME` (else its
 *   `FunctionName`) is a function of the region description; its policies are everything attached
 *   to its execution role (`Role`): the role's inline `Policies`, every `AWS::IAM::Policy` /
 *   `AWS::IAM::ManagedPolicy` listing the role in `Roles`, every `AWS::IAM::RolePolicy` naming
 *   it, the customer managed policies in its `ManagedPolicyArns`, and AWS managed policies from
 *   the table {@link AWS_MANAGED_POLICIES} (an AWS managed policy not in it is an error: its
 *   document is not in the template). A `PermissionsBoundary` is kept as the boundary;
 * - the **ad-server** principal of a region is the one customer managed policy of the
 *   ad-server access construct (construct path `…/AdServerAccess/…`, or a name containing
 *   `ad-server`): exactly what an ad-server fleet's role is given.
 *
 * Every stack of the assembly is walked with its nested stacks; intrinsics are resolved to the
 * local region's ARNs by `intrinsics.ts`.
 */

import { type CfnResource, type CfnTemplate, Scope } from './intrinsics.js';
import type { AttachedPolicy, ConditionBlock, PrincipalPolicy, Statement } from './policy.js';
import { AD_SERVER_PRINCIPAL, principalId } from './policy.js';

/** One top-level stack of the assembly. */
export interface AssemblyStack {
  readonly stackName: string;
  readonly region: string;
  readonly template: CfnTemplate;
}

/** What {@link extractPrincipals} reads. */
export interface ExtractOptions {
  readonly stacks: readonly AssemblyStack[];
  /** The account of every ARN (the local runtime's). */
  readonly account: string;
  /** Nested template by asset path (relative to the assembly directory). */
  readonly readNested: (assetPath: string) => CfnTemplate;
  /** Function names of the region description (`pacer`, `track-spend`, …). */
  readonly functionNames: readonly string[];
  /** Local bucket name by the environment variable functions receive it in. */
  readonly bucketNamesByEnvVar: Readonly<Record<string, string>>;
}

/** The principals found, and what could not be resolved. */
export interface Extraction {
  readonly principals: PrincipalPolicy[];
  readonly diagnostics: readonly string[];
}

/**
 * AWS managed policies the stack may attach, with their documents (IAM's published versions).
 * They grant CloudWatch Logs, EC2 network-interface and X-Ray calls only, none of which the local
 * runtime serves; they are kept so a call they would allow is never refused.
 */
export const AWS_MANAGED_POLICIES: Readonly<Record<string, readonly Statement[]>> = {
  'service-role/AWSLambdaBasicExecutionRole': [
    {
      effect: 'Allow',
      actions: ['logs:CreateLogGroup', 'logs:CreateLogStream', 'logs:PutLogEvents'],
      resources: ['*'],
    },
  ],
  'service-role/AWSLambdaVPCAccessExecutionRole': [
    {
      effect: 'Allow',
      actions: [
        'logs:CreateLogGroup',
        'logs:CreateLogStream',
        'logs:PutLogEvents',
        'ec2:CreateNetworkInterface',
        'ec2:DescribeNetworkInterfaces',
        'ec2:DescribeSubnets',
        'ec2:DeleteNetworkInterface',
        'ec2:AssignPrivateIpAddresses',
        'ec2:UnassignPrivateIpAddresses',
      ],
      resources: ['*'],
    },
  ],
  AWSXRayDaemonWriteAccess: [
    {
      effect: 'Allow',
      actions: [
        'xray:PutTraceSegments',
        'xray:PutTelemetryRecords',
        'xray:GetSamplingRules',
        'xray:GetSamplingTargets',
        'xray:GetSamplingStatisticSummaries',
      ],
      resources: ['*'],
    },
  ],
};

const asList = (v: unknown): unknown[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);

/** A resolved policy document as statements with plain string values. */
export function statementsOf(document: unknown, where: string): Statement[] {
  const doc = document as { Statement?: unknown };
  return asList(doc?.Statement).map((raw, i) => {
    const s = raw as Record<string, unknown>;
    const strings = (v: unknown) => asList(v).map(String);
    const effect = s.Effect === 'Deny' ? 'Deny' : s.Effect === 'Allow' ? 'Allow' : undefined;
    if (!effect) throw new Error(`${where}: statement ${i} has Effect ${JSON.stringify(s.Effect)}`);
    let condition: ConditionBlock | undefined;
    if (s.Condition !== undefined) {
      const out: Record<string, Record<string, string[]>> = {};
      for (const [op, entries] of Object.entries(s.Condition as Record<string, Record<string, unknown>>)) {
        out[op] = Object.fromEntries(Object.entries(entries).map(([k, v]) => [k, strings(v)]));
      }
      condition = out;
    }
    return {
      ...(typeof s.Sid === 'string' ? { sid: s.Sid } : {}),
      effect,
      ...(s.Action !== undefined ? { actions: strings(s.Action) } : { notActions: strings(s.NotAction) }),
      ...(s.Resource !== undefined
        ? { resources: strings(s.Resource) }
        : { notResources: strings(s.NotResource) }),
      ...(condition ? { condition } : {}),
    };
  });
}

interface Located {
  readonly scope: Scope;
  readonly id: string;
  readonly resource: CfnResource;
}

/** The last path segment of a role ARN or name (`arn:…:role/path/name` → `name`). */
function roleNameOf(arnOrName: string): string {
  return arnOrName.slice(arnOrName.lastIndexOf('/') + 1);
}

/**
 * The local name of a bucket without a `BucketName`: the one the description gives the
 * environment variable a function of the same template receives `{ Ref: bucket }` in.
 */
function bucketNamer(options: ExtractOptions): (scope: Scope, id: string) => string | undefined {
  return (scope, id) => {
    for (const r of Object.values(scope.template.Resources ?? {})) {
      if (r.Type !== 'AWS::Lambda::Function') continue;
      const vars = (r.Properties?.Environment as { Variables?: Record<string, unknown> } | undefined)
        ?.Variables;
      for (const [name, value] of Object.entries(vars ?? {})) {
        if ((value as { Ref?: unknown } | null)?.Ref === id && options.bucketNamesByEnvVar[name])
          return options.bucketNamesByEnvVar[name];
      }
    }
    return undefined;
  };
}

/** Every principal's policies in every region of the assembly. */
export function extractPrincipals(options: ExtractOptions): Extraction {
  const tops: Scope[] = [];
  const bucketName = bucketNamer(options);
  for (const stack of options.stacks) {
    tops.push(
      new Scope(stack.template, {
        stackName: stack.stackName,
        region: stack.region,
        account: options.account,
        readNested: options.readNested,
        bucketName,
        siblings: () => tops,
      }),
    );
  }
  const diagnostics: string[] = [];
  const principals: PrincipalPolicy[] = [];
  for (const top of tops) {
    const located: Located[] = [];
    for (const scope of top.all()) {
      for (const [id, resource] of Object.entries(scope.template.Resources ?? {}))
        located.push({ scope, id, resource });
    }
    principals.push(...functionPrincipals(top, located, options), adServerPrincipal(top, located));
    diagnostics.push(...top.diagnostics);
  }
  return { principals, diagnostics };
}

function functionPrincipals(
  top: Scope,
  located: readonly Located[],
  options: ExtractOptions,
): PrincipalPolicy[] {
  const out: PrincipalPolicy[] = [];
  for (const fn of located.filter((l) => l.resource.Type === 'AWS::Lambda::Function')) {
    const props = fn.resource.Properties ?? {};
    const vars = (props.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables;
    const service = vars?.POWERTOOLS_SERVICE_NAME;
    const name =
      service !== undefined ? fn.scope.resolveString(service) : fn.scope.nameOf(fn.id, 'FunctionName');
    if (!options.functionNames.includes(name)) continue;
    const roleName = roleNameOf(fn.scope.resolveString(props.Role));
    const role = located.find(
      (l) => l.resource.Type === 'AWS::IAM::Role' && l.scope.nameOf(l.id, 'RoleName') === roleName,
    );
    if (!role)
      throw new Error(`${fn.scope.path}/${fn.id} (${name}): its role ${roleName} is not in the template`);
    const functionName = fn.scope.nameOf(fn.id, 'FunctionName');
    const boundaryArn = role.resource.Properties?.PermissionsBoundary;
    out.push({
      id: principalId(top.region, name),
      region: top.region,
      kind: 'function',
      name,
      arn: `arn:aws:sts::${top.account}:assumed-role/${roleName}/${functionName}`,
      policies: rolePolicies(role, roleName, located),
      ...(boundaryArn === undefined
        ? {}
        : {
            boundary: managedPolicy(role.scope.resolveString(boundaryArn), located, `${roleName} boundary`),
          }),
    });
  }
  return out;
}

/** Everything attached to a role. */
function rolePolicies(role: Located, roleName: string, located: readonly Located[]): AttachedPolicy[] {
  const out: AttachedPolicy[] = [];
  const props = role.resource.Properties ?? {};
  for (const inline of asList(role.scope.resolve(props.Policies))) {
    const p = inline as { PolicyName?: string; PolicyDocument?: unknown };
    const source = `${role.scope.path}/${role.id}#${p.PolicyName ?? 'inline'}`;
    out.push({ source, statements: statementsOf(p.PolicyDocument, source) });
  }
  for (const arn of asList(role.scope.resolve(props.ManagedPolicyArns)))
    out.push(managedPolicy(String(arn), located, roleName));
  for (const l of located) {
    const t = l.resource.Type;
    const p = l.resource.Properties ?? {};
    const attached =
      (t === 'AWS::IAM::Policy' || t === 'AWS::IAM::ManagedPolicy') &&
      asList(l.scope.resolve(p.Roles)).some((r) => roleNameOf(String(r)) === roleName);
    const rolePolicy =
      t === 'AWS::IAM::RolePolicy' && roleNameOf(l.scope.resolveString(p.RoleName)) === roleName;
    if (!attached && !rolePolicy) continue;
    const source = `${l.scope.path}/${l.id}`;
    out.push({ source, statements: statementsOf(l.scope.resolve(p.PolicyDocument), source) });
  }
  return out;
}

/** A managed policy by ARN: one of the assembly's, or a known AWS managed policy. */
function managedPolicy(arn: string, located: readonly Located[], usedBy: string): AttachedPolicy {
  const aws = /^arn:aws[\w-]*:iam::aws:policy\/(.+)$/.exec(arn);
  if (aws) {
    const statements = AWS_MANAGED_POLICIES[aws[1] as string];
    if (!statements)
      throw new Error(
        `${usedBy}: AWS managed policy ${arn} is not known to the local IAM layer; add its document to AWS_MANAGED_POLICIES in local/iam/template.ts`,
      );
    return { source: arn, statements };
  }
  const own = located.find(
    (l) => l.resource.Type === 'AWS::IAM::ManagedPolicy' && l.scope.managedPolicyArn(l.id) === arn,
  );
  if (!own) throw new Error(`${usedBy}: managed policy ${arn} is neither in the assembly nor AWS managed`);
  const source = `${own.scope.path}/${own.id}`;
  return {
    source,
    statements: statementsOf(own.scope.resolve(own.resource.Properties?.PolicyDocument), source),
  };
}

function adServerPrincipal(top: Scope, located: readonly Located[]): PrincipalPolicy {
  const candidates = located.filter((l) => {
    if (l.resource.Type !== 'AWS::IAM::ManagedPolicy') return false;
    const path = String(l.resource.Metadata?.['aws:cdk:path'] ?? '');
    const name = l.resource.Properties?.ManagedPolicyName;
    return (
      path.includes('/AdServerAccess/') ||
      (name !== undefined && l.scope.resolveString(name).includes('ad-server'))
    );
  });
  if (candidates.length !== 1)
    throw new Error(
      `${top.path}: expected one ad-server access managed policy (construct path …/AdServerAccess/… or a name with "ad-server"), found ${candidates.length}`,
    );
  const policy = candidates[0] as Located;
  const source = `${policy.scope.path}/${policy.id}`;
  return {
    id: principalId(top.region, AD_SERVER_PRINCIPAL),
    region: top.region,
    kind: 'ad-server',
    name: AD_SERVER_PRINCIPAL,
    arn: `arn:aws:sts::${top.account}:assumed-role/paceline-ad-server-fleet/${AD_SERVER_PRINCIPAL}`,
    policies: [
      {
        source,
        statements: statementsOf(policy.scope.resolve(policy.resource.Properties?.PolicyDocument), source),
      },
    ],
  };
}
