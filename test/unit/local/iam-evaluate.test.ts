/**
 * IAM evaluation of identity policies as AWS does it: explicit Deny over Allow over the implicit
 * deny, action and resource wildcards (ARN segments), NotAction / NotResource, conditions with
 * the local request context (absent keys, IfExists, negated operators, set operators), a
 * permissions boundary, and fail-closed handling of what cannot be evaluated locally.
 */
import { describe, expect, it } from 'vitest';
import { type AccessRequest, actionMatches, evaluate, resourceMatches } from '../../../local/iam/evaluate.js';
import type { PrincipalPolicy, Statement } from '../../../local/iam/policy.js';

const table = 'arn:aws:dynamodb:us-east-1:000000000000:table/paceline-budgets';

function principal(statements: Statement[], boundary?: Statement[]): PrincipalPolicy {
  return {
    id: 'us-east-1/probe',
    region: 'us-east-1',
    kind: 'function',
    name: 'probe',
    arn: 'arn:aws:sts::000000000000:assumed-role/r/probe',
    policies: [{ source: 'policy-a', statements }],
    ...(boundary ? { boundary: { source: 'boundary', statements: boundary } } : {}),
  };
}

const request = (
  action: string,
  resource: string,
  context: AccessRequest['context'] = {},
): AccessRequest => ({
  action,
  resource,
  context: { 'aws:RequestedRegion': 'us-east-1', 'aws:SecureTransport': 'true', ...context },
});

const allow = (actions: string[], resources: string[], extra: Partial<Statement> = {}): Statement => ({
  effect: 'Allow',
  actions,
  resources,
  ...extra,
});

describe('actions and resources', () => {
  it('matches actions case-insensitively with * and ?', () => {
    expect(actionMatches('dynamodb:GetItem', 'DynamoDB:getitem')).toBe(true);
    expect(actionMatches('dynamodb:Get*', 'dynamodb:GetItem')).toBe(true);
    expect(actionMatches('dynamodb:Get*', 'dynamodb:BatchGetItem')).toBe(false);
    expect(actionMatches('dynamodb:?etItem', 'dynamodb:GetItem')).toBe(true);
    expect(actionMatches('*', 'kinesis:PutRecords')).toBe(true);
    expect(actionMatches('kinesis:*', 'dynamodb:PutItem')).toBe(false);
  });

  it('matches ARNs per segment; a last segment ending in * spans the rest', () => {
    expect(resourceMatches(table, table)).toBe(true);
    expect(resourceMatches(table, `${table}/index/by-pacer-shard`)).toBe(false);
    expect(resourceMatches(`${table}/index/*`, `${table}/index/by-pacer-shard`)).toBe(true);
    expect(resourceMatches('arn:aws:dynamodb:*:*:table/paceline-*', table)).toBe(true);
    expect(resourceMatches('arn:aws:dynamodb:us-west-2:*:table/*', table)).toBe(false);
    // A wildcard in the region segment does not reach into the account segment.
    expect(resourceMatches('arn:aws:dynamodb:us-*:table/paceline-budgets', table)).toBe(false);
    expect(resourceMatches('arn:aws:dynamodb:*', table)).toBe(true);
    expect(resourceMatches('arn:aws:s3:::bucket/fn/*', 'arn:aws:s3:::bucket/fn/a/b')).toBe(true);
    expect(resourceMatches('arn:aws:s3:::bucket/fn/*', 'arn:aws:s3:::bucket/other/a')).toBe(false);
    expect(
      resourceMatches(
        'arn:aws:elasticache:*:*:replicationgroup:paceline',
        'arn:aws:elasticache:us-east-1:000000000000:replicationgroup:paceline-cache',
      ),
    ).toBe(false);
    // Resource ARNs are case-sensitive.
    expect(resourceMatches(table, table.toUpperCase())).toBe(false);
    expect(resourceMatches('*', 'anything')).toBe(true);
  });
});

describe('evaluate', () => {
  it('allows what a statement allows and implicitly denies the rest', () => {
    const p = principal([allow(['dynamodb:GetItem', 'dynamodb:Query'], [table])]);
    expect(evaluate(p, request('dynamodb:GetItem', table))).toEqual({ allowed: true, source: 'policy-a' });
    expect(evaluate(p, request('dynamodb:PutItem', table))).toEqual({
      allowed: false,
      reason: 'implicit-deny',
    });
    expect(evaluate(p, request('dynamodb:GetItem', `${table}-other`)).allowed).toBe(false);
  });

  it('lets an explicit Deny in any attached policy win over an Allow', () => {
    const p: PrincipalPolicy = {
      ...principal([allow(['dynamodb:*'], ['*'])]),
      policies: [
        { source: 'grants', statements: [allow(['dynamodb:*'], ['*'])] },
        {
          source: 'guard',
          statements: [{ effect: 'Deny', actions: ['dynamodb:DeleteItem'], resources: [table] }],
        },
      ],
    };
    expect(evaluate(p, request('dynamodb:DeleteItem', table))).toEqual({
      allowed: false,
      reason: 'explicit-deny',
      source: 'guard',
    });
    expect(evaluate(p, request('dynamodb:PutItem', table)).allowed).toBe(true);
  });

  it('evaluates NotAction and NotResource', () => {
    const p = principal([
      { effect: 'Allow', notActions: ['dynamodb:Delete*'], resources: [table] },
      { effect: 'Deny', actions: ['dynamodb:*'], notResources: [table, `${table}/*`] },
    ]);
    expect(evaluate(p, request('dynamodb:PutItem', table)).allowed).toBe(true);
    expect(evaluate(p, request('dynamodb:DeleteItem', table)).allowed).toBe(false);
    expect(
      evaluate(p, request('dynamodb:GetItem', 'arn:aws:dynamodb:us-east-1:000000000000:table/x')),
    ).toMatchObject({
      reason: 'explicit-deny',
    });
  });

  it('evaluates conditions on the local request context', () => {
    const p = principal([
      allow(['dynamodb:GetItem'], [table], {
        condition: { StringEquals: { 'aws:RequestedRegion': ['us-east-1'] } },
      }),
      allow(['dynamodb:Query'], [table], {
        condition: { StringEquals: { 'aws:RequestedRegion': ['eu-west-1'] } },
      }),
      allow(['dynamodb:Scan'], [table], { condition: { Bool: { 'aws:SecureTransport': ['true'] } } }),
      allow(['dynamodb:PutItem'], [table], {
        condition: { StringLike: { 'aws:PrincipalArn': ['arn:aws:iam::*:role/app-*'] } },
      }),
    ]);
    expect(evaluate(p, request('dynamodb:GetItem', table)).allowed).toBe(true);
    expect(evaluate(p, request('dynamodb:Query', table)).allowed).toBe(false);
    expect(evaluate(p, request('dynamodb:Scan', table)).allowed).toBe(true);
    expect(
      evaluate(p, request('dynamodb:PutItem', table, { 'aws:PrincipalArn': 'arn:aws:iam::1:role/app-x' }))
        .allowed,
    ).toBe(true);
    // The key is absent from the request: a positive operator does not hold.
    expect(evaluate(p, request('dynamodb:PutItem', table)).allowed).toBe(false);
  });

  it('treats absent keys as AWS does: negated operators, IfExists, Null and ForAllValues hold', () => {
    const on = (condition: Statement['condition']) =>
      evaluate(
        principal([allow(['s3:GetObject'], ['*'], { condition })]),
        request('s3:GetObject', 'arn:aws:s3:::b/k'),
      ).allowed;
    expect(on({ StringNotEquals: { 'aws:PrincipalAccount': ['111111111111'] } })).toBe(true);
    expect(on({ StringEqualsIfExists: { 'aws:PrincipalAccount': ['111111111111'] } })).toBe(true);
    expect(on({ Null: { 'aws:PrincipalAccount': ['true'] } })).toBe(true);
    expect(on({ Null: { 'aws:RequestedRegion': ['true'] } })).toBe(false);
    expect(on({ 'ForAllValues:StringEquals': { 'aws:PrincipalAccount': ['1'] } })).toBe(true);
    expect(on({ 'ForAnyValue:StringEquals': { 'aws:PrincipalAccount': ['1'] } })).toBe(false);
    expect(on({ NumericLessThan: { 'aws:EpochTime': ['100'] } })).toBe(false);
  });

  it('compares numbers and dates', () => {
    const p = principal([
      allow(['s3:GetObject'], ['*'], {
        condition: { NumericGreaterThanEquals: { 'aws:EpochTime': ['1700000000'] } },
      }),
      allow(['s3:PutObject'], ['*'], {
        condition: { DateLessThan: { 'aws:CurrentTime': ['2030-01-01T00:00:00Z'] } },
      }),
    ]);
    const context = { 'aws:EpochTime': '1800000000', 'aws:CurrentTime': '2031-06-01T00:00:00Z' };
    expect(evaluate(p, request('s3:GetObject', 'x', context)).allowed).toBe(true);
    expect(evaluate(p, request('s3:PutObject', 'x', context)).allowed).toBe(false);
  });

  it('fails closed on a condition it cannot evaluate locally, and says why', () => {
    const viaService = { StringEquals: { 'kms:ViaService': ['dynamodb.us-east-1.amazonaws.com'] } };
    const allowed = evaluate(
      principal([allow(['kms:Decrypt'], ['*'], { condition: viaService })]),
      request('kms:Decrypt', 'arn:aws:kms:us-east-1:000000000000:key/k'),
    );
    expect(allowed).toMatchObject({ allowed: false, reason: 'implicit-deny' });
    expect(allowed.allowed ? [] : allowed.unevaluable).toEqual([
      'policy-a: condition key kms:ViaService is not known to the local runtime',
    ]);
    const denied = evaluate(
      principal([
        allow(['kms:*'], ['*']),
        { effect: 'Deny', actions: ['kms:Decrypt'], resources: ['*'], condition: viaService },
      ]),
      request('kms:Decrypt', 'k'),
    );
    expect(denied).toMatchObject({ allowed: false, reason: 'explicit-deny' });
    const operator = evaluate(
      principal([
        allow(['s3:GetObject'], ['*'], { condition: { IpAddress: { 'aws:RequestedRegion': ['x'] } } }),
      ]),
      request('s3:GetObject', 'x'),
    );
    expect(operator.allowed ? [] : operator.unevaluable).toEqual([
      'policy-a: condition operator IpAddress is not supported locally',
    ]);
  });

  it('needs the permissions boundary to allow too', () => {
    const p = principal([allow(['dynamodb:*'], ['*'])], [allow(['dynamodb:GetItem'], [table])]);
    expect(evaluate(p, request('dynamodb:GetItem', table)).allowed).toBe(true);
    expect(evaluate(p, request('dynamodb:PutItem', table))).toEqual({
      allowed: false,
      reason: 'implicit-deny',
    });
  });
});
