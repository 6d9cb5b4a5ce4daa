/**
 * The policies the local IAM layer extracts from the real synthesized stacks (two regions), held
 * to the region description: every function may do exactly what its spec says it uses — its
 * tables at their access level (and their indexes for reads), its event source, its bucket
 * prefix, its parameters, its peers' switches and caches — and nothing a spec does not give it;
 * the ad-server principal may put events and read budgets, and not write them. Expectations come
 * from the description, evaluated through the same evaluator the gate uses. Also: intrinsics
 * resolved across a nested stack, and the synthesis context of local regions.
 */

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { App, NestedStack, Stack } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import { evaluate } from '../../local/iam/evaluate.js';
import type { CfnTemplate } from '../../local/iam/intrinsics.js';
import { type LocalPolicySet, type PrincipalPolicy, principalId } from '../../local/iam/policy.js';
import { cdkJsonContext, localSynthContext, synthesizeLocalPolicies } from '../../local/iam/synth.js';
import { extractPrincipals } from '../../local/iam/template.js';
import {
  cacheReplicationGroupId,
  type FunctionSpec,
  parameterPrefix,
  physicalName,
  regionDescription,
  type StreamKey,
  type TableAccess,
  type TableKey,
  type TableSpec,
} from '../../shared/region/resources.js';
import { tempDir } from '../support/tmp.js';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const regions = ['us-east-1', 'us-west-2'];
const pacer = { shards: 4, instancesPerShard: 3 };
const description = regionDescription({ pacer });
const account = '000000000000';
let set: LocalPolicySet;

beforeAll(() => {
  set = synthesizeLocalPolicies(repoRoot, { regions, pacer }, 'test');
});

const arn = (region: string, service: string, resource: string) =>
  `arn:aws:${service}:${region}:${account}:${resource}`;
const tableArn = (region: string, key: TableKey) =>
  arn(region, 'dynamodb', `table/${physicalName(description.tables[key].suffix)}`);

function allowed(p: PrincipalPolicy, action: string, resource: string, region = p.region): boolean {
  return evaluate(p, { action, resource, context: { 'aws:RequestedRegion': region } }).allowed;
}

function principal(region: string, name: string): PrincipalPolicy {
  const p = set.principals.find((x) => x.id === principalId(region, name));
  if (!p) throw new Error(`no principal ${region}/${name}`);
  return p;
}

const reads = ['dynamodb:GetItem', 'dynamodb:Query', 'dynamodb:BatchGetItem'];
const writes = ['dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem', 'dynamodb:BatchWriteItem'];

describe('policies extracted from the synthesized stacks', () => {
  it('has every described function and the ad server in every region, and nothing else', () => {
    const names = [...Object.values(description.functions).map((f: FunctionSpec) => f.name), 'ad-server'];
    expect(set.principals.map((p) => p.id).sort()).toEqual(
      regions.flatMap((r) => names.map((n) => principalId(r, n))).sort(),
    );
    expect(set.synthesis).toMatchObject({ regions, primaryRegion: 'us-east-1', pacer });
    expect(set.synthesis.synthMs).toBeGreaterThan(0);
  });

  it('gives each function exactly its described table access', () => {
    for (const region of regions) {
      for (const spec of Object.values(description.functions) as FunctionSpec[]) {
        const p = principal(region, spec.name);
        for (const key of Object.keys(description.tables) as TableKey[]) {
          const access = spec.tables[key] as TableAccess | undefined;
          const table = tableArn(region, key);
          const where = `${region}/${spec.name} on ${key}`;
          for (const a of reads)
            expect(allowed(p, a, table), `${where}: ${a}`).toBe(access === 'read' || access === 'readwrite');
          for (const a of writes)
            expect(allowed(p, a, table), `${where}: ${a}`).toBe(access === 'write' || access === 'readwrite');
          for (const index of (description.tables[key] as TableSpec).indexes ?? [])
            expect(allowed(p, 'dynamodb:Query', `${table}/index/${index.name}`), `${where} index`).toBe(
              access === 'read' || access === 'readwrite',
            );
          // Another region's table is never granted by ARN.
          const other = regions.find((r) => r !== region) as string;
          expect(allowed(p, 'dynamodb:GetItem', tableArn(other, key), other), `${where} (other region)`).toBe(
            false,
          );
        }
      }
    }
  });

  it('lets each stream function read its own stream (the event source) and no other', () => {
    const poll = [
      'kinesis:DescribeStreamSummary',
      'kinesis:ListShards',
      'kinesis:GetShardIterator',
      'kinesis:GetRecords',
    ];
    for (const region of regions) {
      for (const spec of Object.values(description.functions) as FunctionSpec[]) {
        const p = principal(region, spec.name);
        for (const key of Object.keys(description.streams) as StreamKey[]) {
          const stream = arn(region, 'kinesis', `stream/${physicalName(description.streams[key].suffix)}`);
          for (const a of poll)
            expect(allowed(p, a, stream), `${spec.name} ${a} ${key}`).toBe(spec.source?.stream === key);
          expect(allowed(p, 'kinesis:PutRecords', stream), `${spec.name} puts on ${key}`).toBe(
            spec.writesStreams.includes(key),
          );
        }
      }
    }
  });

  it('holds bucket access to the function’s own prefix', () => {
    for (const spec of Object.values(description.functions) as FunctionSpec[]) {
      const p = principal('us-east-1', spec.name);
      for (const [key, b] of Object.entries(description.buckets)) {
        const access = spec.buckets?.[key as keyof typeof description.buckets];
        const own = `arn:aws:s3:::${physicalName(b.suffix)}/${spec.name}/x`;
        const other = `arn:aws:s3:::${physicalName(b.suffix)}/someone-else/x`;
        expect(allowed(p, 's3:PutObject', own)).toBe(access === 'write' || access === 'readwrite');
        expect(allowed(p, 's3:GetObject', own)).toBe(access === 'read' || access === 'readwrite');
        expect(allowed(p, 's3:PutObject', other)).toBe(false);
      }
    }
  });

  it('lets parameter readers read every described parameter and their peers’ switches, nothing more', () => {
    for (const region of regions) {
      const peer = regions.find((r) => r !== region) as string;
      for (const spec of Object.values(description.functions) as FunctionSpec[]) {
        const p = principal(region, spec.name);
        const param = (r: string, path: string) => arn(r, 'ssm', `parameter${parameterPrefix(r)}${path}`);
        for (const parameter of Object.values(description.parameters))
          expect(
            allowed(p, 'ssm:GetParameter', param(region, parameter.path)),
            `${spec.name} ${parameter.path}`,
          ).toBe(spec.readsParameters);
        expect(
          allowed(p, 'ssm:GetParameter', param(peer, description.parameters.publisherRegion.path), peer),
        ).toBe(spec.readsParameters);
        expect(allowed(p, 'ssm:GetParameter', param(peer, 'pacer/shards'), peer)).toBe(false);
        expect(allowed(p, 'ssm:GetParametersByPath', param(region, '').replace(/\/$/, ''))).toBe(false);
        // Cache discovery: the replication group id the pacer asks for, here and at the peer.
        for (const r of regions)
          expect(
            allowed(
              p,
              'elasticache:DescribeReplicationGroups',
              arn(r, 'elasticache', `replicationgroup:${cacheReplicationGroupId}`),
              r,
            ),
          ).toBe(spec.readsParameters);
      }
    }
  });

  it('lets the ad server put events and read budgets, and write no budget', () => {
    for (const region of regions) {
      const p = principal(region, 'ad-server');
      for (const s of Object.values(description.streams)) {
        const stream = arn(region, 'kinesis', `stream/${physicalName(s.suffix)}`);
        expect(allowed(p, 'kinesis:PutRecords', stream)).toBe(true);
        expect(allowed(p, 'kinesis:GetRecords', stream)).toBe(false);
      }
      expect(allowed(p, 'dynamodb:GetItem', tableArn(region, 'budgets'))).toBe(true);
      expect(allowed(p, 'dynamodb:Query', tableArn(region, 'budgets'))).toBe(true);
      expect(allowed(p, 'dynamodb:PutItem', tableArn(region, 'budgets'))).toBe(false);
      expect(allowed(p, 'dynamodb:Query', tableArn(region, 'spendLedger'))).toBe(true);
      expect(allowed(p, 'dynamodb:PutItem', tableArn(region, 'spendLedger'))).toBe(true);
      expect(allowed(p, 'dynamodb:PutItem', tableArn(region, 'leases'))).toBe(false);
    }
  });
});

describe('local synthesis context', () => {
  it('synthesizes the local regions in the local account, keeping cdk.json’s entries', () => {
    const base = cdkJsonContext(repoRoot);
    const ctx = localSynthContext(
      { ...base, 'paceline:stage': 'staging' },
      { regions: ['us-west-2', 'eu-west-1'], pacer },
    );
    const configured = base['paceline:regions'] as Record<string, unknown>;
    expect(ctx['paceline:account']).toBe(account);
    expect(ctx['paceline:regions']).toEqual({
      'us-west-2': configured['us-west-2'],
      'eu-west-1': { network: { cidr: '10.201.0.0/16' } },
    });
    // cdk.json's primary (us-east-1) is not local: the first local region owns the global tables.
    expect(ctx['paceline:primaryRegion']).toBe('us-west-2');
    expect(ctx['paceline:pacerShards']).toBe(4);
    expect(ctx['availability-zones:account=000000000000:region=eu-west-1']).toEqual([
      'eu-west-1a',
      'eu-west-1b',
      'eu-west-1c',
    ]);
    expect(ctx['aws:cdk:bundling-stacks']).toEqual([]);
    // Local resources have the default stage's names, whatever stage cdk.json deploys.
    expect('paceline:stage' in ctx).toBe(false);
  });
});

describe('intrinsics across a nested stack', () => {
  it('resolves a parent table passed into a nested stack’s function policy, and a nested output', () => {
    const app = new App({
      outdir: tempDir('paceline-iam-nested-'),
      context: { 'aws:cdk:enable-path-metadata': true, 'aws:cdk:enable-asset-metadata': true },
    });
    const stack = new Stack(app, 'Parent', { env: { account, region: 'eu-west-1' } });
    const table = new dynamodb.Table(stack, 'Table', {
      tableName: 'probe-table',
      partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING },
    });
    const nested = new NestedStack(stack, 'Nested');
    const fn = new lambda.Function(nested, 'Fn', {
      runtime: lambda.Runtime.NODEJS_22_X,
      handler: 'index.handler',
      code: lambda.Code.fromInline('exports.handler = async () => {}'),
      functionName: 'probe-fn',
      environment: { POWERTOOLS_SERVICE_NAME: 'probe' },
    });
    table.grantReadData(fn);
    // The parent's ad-server policy names the nested function: CDK passes its ARN out of the
    // nested stack as an output (`Fn::GetAtt [Nested, Outputs.…]`).
    const access = new Construct(stack, 'AdServerAccess');
    new iam.ManagedPolicy(access, 'Policy', {
      statements: [
        new iam.PolicyStatement({ actions: ['dynamodb:Query'], resources: [`${table.tableArn}/index/*`] }),
        new iam.PolicyStatement({ actions: ['lambda:InvokeFunction'], resources: [fn.functionArn] }),
      ],
    });
    const assembly = app.synth();
    const { principals, diagnostics } = extractPrincipals({
      account,
      stacks: [
        {
          stackName: 'Parent',
          region: 'eu-west-1',
          template: assembly.getStackByName('Parent').template as CfnTemplate,
        },
      ],
      readNested: (p) => JSON.parse(readFileSync(join(assembly.directory, p), 'utf8')) as CfnTemplate,
      functionNames: ['probe'],
      bucketNamesByEnvVar: {},
    });
    expect(diagnostics, diagnostics.join('\n')).toEqual([]);
    const probe = principals.find((p) => p.id === 'eu-west-1/probe') as PrincipalPolicy;
    const tableArnHere = `arn:aws:dynamodb:eu-west-1:${account}:table/probe-table`;
    expect(allowed(probe, 'dynamodb:GetItem', tableArnHere)).toBe(true);
    expect(allowed(probe, 'dynamodb:PutItem', tableArnHere)).toBe(false);
    const adServer = principals.find((p) => p.id === 'eu-west-1/ad-server') as PrincipalPolicy;
    expect(allowed(adServer, 'dynamodb:Query', `${tableArnHere}/index/by-x`)).toBe(true);
    expect(allowed(adServer, 'dynamodb:Query', tableArnHere)).toBe(false);
    expect(
      allowed(adServer, 'lambda:InvokeFunction', `arn:aws:lambda:eu-west-1:${account}:function:probe-fn`),
    ).toBe(true);
    expect(JSON.stringify(assembly.getStackByName('Parent').template)).toContain('Outputs.');
  });
});
