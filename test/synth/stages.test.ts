import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../cdk/app.js';
import type { RegionalStack } from '../../cdk/regional-stack.js';
import { tempDir } from '../support/tmp.js';
import { cdkJson, regionTemplates } from './support.js';

/**
 * Every physical name a template gives, by the property CloudFormation takes it from. ElastiCache
 * users are identified by UserId (their UserName need not be unique: every user group holds a
 * disabled user named `default`).
 */
const NAME_PROPERTIES: Record<string, readonly string[]> = {
  'AWS::DynamoDB::Table': ['TableName'],
  'AWS::DynamoDB::GlobalTable': ['TableName'],
  'AWS::Kinesis::Stream': ['Name'],
  'AWS::Lambda::Function': ['FunctionName'],
  'AWS::SQS::Queue': ['QueueName'],
  'AWS::KMS::Alias': ['AliasName'],
  'AWS::SSM::Parameter': ['Name'],
  'AWS::ElastiCache::ReplicationGroup': ['ReplicationGroupId'],
  'AWS::ElastiCache::User': ['UserId'],
  'AWS::ElastiCache::UserGroup': ['UserGroupId'],
  'AWS::IAM::ManagedPolicy': ['ManagedPolicyName'],
  'AWS::CloudWatch::Dashboard': ['DashboardName'],
  'AWS::Events::Rule': ['Name'],
  'AWS::Logs::LogGroup': ['LogGroupName'],
};

/** The physical names of one region's stack: its name and every named resource. */
function physicalNames(stack: RegionalStack): string[] {
  const out: string[] = [stack.stackName];
  for (const t of regionTemplates(stack)) {
    for (const r of Object.values(
      t.toJSON().Resources as Record<string, { Type: string; Properties?: Record<string, unknown> }>,
    )) {
      for (const prop of NAME_PROPERTIES[r.Type] ?? []) {
        const name = r.Properties?.[prop];
        if (name !== undefined) out.push(JSON.stringify(stack.resolve(name)));
      }
    }
  }
  return out;
}

function build(stage: string | undefined): RegionalStack[] {
  const app = new App({
    context: {
      ...cdkJson.context,
      ...(stage ? { 'paceline:stage': stage } : {}),
      'aws:cdk:bundling-stacks': [],
    },
    outdir: tempDir('paceline-stage-'),
  });
  return buildApp(app).stacks;
}

let production: RegionalStack[];
let staging: RegionalStack[];
beforeAll(() => {
  production = build(undefined);
  staging = build('staging');
});

describe('stages: two deployments in one account and region', () => {
  it('keep the default names without a stage (what the local runner, the CLI and the client use)', () => {
    expect(production.map((s) => s.stackName)).toEqual(['Paceline-us-east-1', 'Paceline-us-west-2']);
    const t = Template.fromStack(production[0] as RegionalStack);
    t.hasResourceProperties('AWS::DynamoDB::Table', { TableName: 'paceline-leases' });
    t.hasResourceProperties('AWS::KMS::Alias', { AliasName: 'alias/paceline' });
    t.hasResourceProperties('AWS::ElastiCache::ReplicationGroup', { ReplicationGroupId: 'paceline' });
  });

  it('have no physical name in common', () => {
    for (const [i, stack] of production.entries()) {
      const a = physicalNames(stack);
      const b = physicalNames(staging[i] as RegionalStack);
      // Every kind of named resource is there (the comparison is not vacuous), each name once.
      const kinds = Object.keys(NAME_PROPERTIES).filter((type) =>
        regionTemplates(stack).some((t) => Object.keys(t.findResources(type)).length > 0),
      );
      expect(kinds.length).toBeGreaterThanOrEqual(Object.keys(NAME_PROPERTIES).length - 2);
      expect(a.length).toBeGreaterThan(50);
      expect(b.length).toBe(a.length);
      expect(new Set(a).size).toBe(a.length);
      expect(a.filter((name) => b.includes(name))).toEqual([]);
    }
  });

  it("carry the stage's names into the functions: parameter root and prefix, tables, cache group and user", () => {
    const stack = staging[0] as RegionalStack;
    expect(stack.stackName).toBe('Paceline-staging-us-east-1');
    Template.fromStack(stack).hasResourceProperties('AWS::Lambda::Function', {
      FunctionName: 'staging-paceline-pacer',
      Environment: {
        Variables: Match.objectLike({
          PARAMETER_ROOT: '/staging-paceline/',
          PARAMETER_PREFIX: '/staging-paceline/us-east-1/',
          REDIS_CACHE_NAME: 'staging-paceline',
          REDIS_IAM_USER: 'staging-paceline-app',
          LEASES_TABLE: Match.anyValue(),
        }),
      },
    });
    // The pacer's parameters and its one invoke permission are the stage's.
    const params = regionTemplates(stack).flatMap((t) =>
      Object.values(t.findResources('AWS::SSM::Parameter')).map((p) => p.Properties.Name as string),
    );
    expect(params.every((name) => name.startsWith('/staging-paceline/us-east-1/'))).toBe(true);
    Template.fromStack(stack).hasResourceProperties('AWS::Lambda::Permission', {
      SourceArn: 'arn:aws:events:us-east-1:123456789012:rule/staging-paceline-pacer.*',
    });
  });
});
