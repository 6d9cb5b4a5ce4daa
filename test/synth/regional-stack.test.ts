import { readFileSync } from 'node:fs';
import { App, Stack, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../cdk/app.js';
import type { RegionalStack } from '../../cdk/regional-stack.js';
import {
  type FunctionSpec,
  physicalName,
  regionResources,
  SPEND_CONVERGENCE_SECONDS,
} from '../../shared/region/resources.js';
import { tempDir } from '../support/tmp.js';

const cdkJson = JSON.parse(readFileSync(new URL('../../cdk.json', import.meta.url), 'utf8')) as {
  context: Record<string, unknown>;
};

/** Builds and synthesizes the real app once (esbuild bundling costs seconds per function). */
let stacks: RegionalStack[];
let templates: Template[];
beforeAll(() => {
  const app = new App({ context: cdkJson.context, outdir: tempDir('paceline-synth-') });
  ({ stacks } = buildApp(app));
  // Runs the cdk-nag validation plugin: throws if any unacknowledged AwsSolutions finding exists.
  app.synth();
  templates = stacks.map((s) => Template.fromStack(s));
});

describe('regional stacks', () => {
  it('synthesizes one stack per configured region, offline, with cdk-nag passing', () => {
    expect(stacks.map((s) => s.region)).toEqual(cdkJson.context['paceline:regions']);
  });

  it('creates every table of the region description, encrypted, with PITR', () => {
    for (const t of templates) {
      for (const spec of Object.values(regionResources.tables)) {
        t.hasResourceProperties('AWS::DynamoDB::Table', {
          TableName: physicalName(spec.suffix),
          PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
          SSESpecification: Match.objectLike({ SSEEnabled: true, SSEType: 'KMS' }),
          KeySchema: [
            { AttributeName: spec.partitionKey.name, KeyType: 'HASH' },
            { AttributeName: spec.sortKey.name, KeyType: 'RANGE' },
          ],
        });
      }
      t.resourceCountIs('AWS::DynamoDB::Table', Object.keys(regionResources.tables).length);
    }
  });

  it('creates every stream with the described shard count and KMS encryption', () => {
    for (const t of templates) {
      for (const spec of Object.values(regionResources.streams)) {
        t.hasResourceProperties('AWS::Kinesis::Stream', {
          Name: physicalName(spec.suffix),
          ShardCount: spec.shardCount,
          StreamEncryption: Match.objectLike({ EncryptionType: 'KMS' }),
        });
      }
    }
  });

  it('maps every Kinesis source with the safe defaults of the description', () => {
    for (const t of templates) {
      for (const spec of Object.values(regionResources.functions) as FunctionSpec[]) {
        const s = spec.source;
        if (!s) continue;
        t.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
          BatchSize: s.batchSize,
          MaximumBatchingWindowInSeconds: s.maxBatchingWindowSeconds,
          BisectBatchOnFunctionError: true,
          MaximumRetryAttempts: s.retryAttempts,
          MaximumRecordAgeInSeconds: s.maxRecordAgeSeconds,
          FunctionResponseTypes: ['ReportBatchItemFailures'],
          StartingPosition: s.startingPosition,
          DestinationConfig: { OnFailure: { Destination: Match.anyValue() } },
        });
      }
    }
  });

  it('runs functions on a current Node runtime inside the VPC with env derived from the description', () => {
    for (const t of templates) {
      for (const spec of Object.values(regionResources.functions)) {
        t.hasResourceProperties('AWS::Lambda::Function', {
          FunctionName: `paceline-${spec.name}`,
          Runtime: 'nodejs24.x',
          VpcConfig: Match.objectLike({ SubnetIds: Match.anyValue() }),
          Environment: {
            Variables: Match.objectLike({
              POWERTOOLS_SERVICE_NAME: spec.name,
              REDIS_MODE: 'cluster',
              REDIS_TLS: 'true',
            }),
          },
        });
      }
    }
  });

  it('has no public network path and an encrypted, TLS-only cache', () => {
    for (const t of templates) {
      t.resourceCountIs('AWS::EC2::InternetGateway', 0);
      t.resourceCountIs('AWS::EC2::NatGateway', 0);
      t.hasResourceProperties('AWS::ElastiCache::ReplicationGroup', {
        Engine: 'valkey',
        ClusterMode: 'enabled',
        TransitEncryptionEnabled: true,
        TransitEncryptionMode: 'required',
        AtRestEncryptionEnabled: true,
      });
    }
  });

  it('keeps oversized dead-letter payloads in an encrypted, TLS-only, private bucket the stream functions can write', () => {
    for (const t of templates) {
      t.resourceCountIs('AWS::S3::Bucket', Object.keys(regionResources.buckets).length);
      t.hasResourceProperties('AWS::S3::Bucket', {
        BucketEncryption: {
          ServerSideEncryptionConfiguration: [
            Match.objectLike({
              ServerSideEncryptionByDefault: Match.objectLike({ SSEAlgorithm: 'aws:kms' }),
            }),
          ],
        },
        PublicAccessBlockConfiguration: {
          BlockPublicAcls: true,
          BlockPublicPolicy: true,
          IgnorePublicAcls: true,
          RestrictPublicBuckets: true,
        },
      });
      t.hasResourceProperties('AWS::S3::BucketPolicy', {
        PolicyDocument: Match.objectLike({
          Statement: Match.arrayWith([
            Match.objectLike({
              Effect: 'Deny',
              Condition: { Bool: { 'aws:SecureTransport': 'false' } },
            }),
          ]),
        }),
      });
    }
    // The functions that quarantine get the bucket's name from the description's variable.
    for (const fn of Object.values(regionResources.functions) as FunctionSpec[]) {
      if (!fn.buckets?.deadLetterPayloads) continue;
      templates[0]?.hasResourceProperties('AWS::Lambda::Function', {
        FunctionName: `paceline-${fn.name}`,
        Environment: { Variables: Match.objectLike({ DEAD_LETTER_BUCKET: Match.anyValue() }) },
      });
    }
  });

  it('never evicts silently: a noeviction parameter group on the cache, and memory and eviction alarms', () => {
    for (const t of templates) {
      t.hasResourceProperties('AWS::ElastiCache::ParameterGroup', {
        CacheParameterGroupFamily: 'valkey8',
        Properties: { 'cluster-enabled': 'yes', 'maxmemory-policy': 'noeviction' },
      });
      t.hasResourceProperties('AWS::ElastiCache::ReplicationGroup', {
        CacheParameterGroupName: Match.objectLike({ Ref: Match.anyValue() }),
      });
      const alarms = Object.values(t.findResources('AWS::CloudWatch::Alarm')).map(
        (a) =>
          a.Properties as {
            Metrics?: { Expression?: string; MetricStat?: { Metric: { MetricName: string } } }[];
          },
      );
      const mathOver = (metricName: string) =>
        alarms.filter((a) => a.Metrics?.some((m) => m.MetricStat?.Metric.MetricName === metricName));
      expect(mathOver('DatabaseMemoryUsagePercentage')).toHaveLength(1);
      expect(mathOver('Evictions')).toHaveLength(1);
      // One metric per node: 3 shards × (1 primary + 1 replica).
      expect(mathOver('DatabaseMemoryUsagePercentage')[0]?.Metrics?.filter((m) => m.MetricStat)).toHaveLength(
        6,
      );
    }
  });

  it('runs the spend sweeper every minute and alarms when a win stays out of the live counters too long', () => {
    for (const t of templates) {
      t.hasResourceProperties('AWS::Events::Rule', {
        ScheduleExpression: 'rate(1 minute)',
        Targets: [
          Match.objectLike({
            Arn: Match.anyValue(),
            RetryPolicy: Match.objectLike({ MaximumRetryAttempts: 0 }),
          }),
        ],
      });
      t.hasResourceProperties('AWS::CloudWatch::Alarm', {
        MetricName: 'SpendOutboxOldestAgeSeconds',
        Namespace: 'Paceline',
        Dimensions: [{ Name: 'service', Value: 'sweep-spend' }],
        Statistic: 'Maximum',
        Threshold: SPEND_CONVERGENCE_SECONDS,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        TreatMissingData: 'breaching',
      });
    }
  });

  it('alarms on iterator age, on-failure messages, dead letters and errors for every stream function', () => {
    for (const t of templates) {
      const alarms = Object.values(t.findResources('AWS::CloudWatch::Alarm'));
      const metrics = alarms.map((a) => (a.Properties as { MetricName?: string }).MetricName);
      const streamFunctions = (Object.values(regionResources.functions) as FunctionSpec[]).filter(
        (f) => f.source,
      ).length;
      expect(metrics.filter((m) => m === 'IteratorAge')).toHaveLength(streamFunctions);
      expect(metrics.filter((m) => m === 'RecordsQuarantined')).toHaveLength(streamFunctions);
      expect(metrics.filter((m) => m === 'ApproximateNumberOfMessagesVisible')).toHaveLength(streamFunctions);
      expect(metrics.filter((m) => m === 'Errors')).toHaveLength(
        Object.keys(regionResources.functions).length,
      );
    }
  });

  it('grants each function only the tables its description lists', () => {
    const stack = stacks[0] as RegionalStack;
    const t = templates[0] as Template;
    const policies = t.findResources('AWS::IAM::Policy');
    for (const [fnKey, fn] of Object.entries(stack.functions)) {
      const spec = regionResources.functions[fnKey as keyof typeof regionResources.functions];
      const roleLogicalId = stack.getLogicalId(fn.function.role?.node.defaultChild as never);
      const docs = Object.values(policies)
        .filter((p) => JSON.stringify(p.Properties.Roles).includes(roleLogicalId))
        .map((p) => JSON.stringify(p.Properties.PolicyDocument));
      const text = docs.join('\n');
      for (const tableKey of Object.keys(regionResources.tables)) {
        const logicalId = stack.getLogicalId(stack.tables[tableKey as 'budgets'].node.defaultChild as never);
        expect(text.includes(logicalId), `${fnKey} access to ${tableKey}`).toBe(tableKey in spec.tables);
      }
    }
  });
});

describe('pacer in the stack (derived from the region description)', () => {
  const pacer = regionResources.functions.pacer;
  const settings = regionResources.settings.pacer;

  it('has one EventBridge rule per (shard, instance), each with its {shard, instance} input', () => {
    for (const t of templates) {
      const rules = Object.values(t.findResources('AWS::Events::Rule'));
      const inputs = rules.flatMap((r) =>
        ((r.Properties as { Targets: { Input?: string }[] }).Targets ?? []).map((x) => x.Input),
      );
      expect(rules).toHaveLength(settings.shards * settings.instancesPerShard);
      expect(new Set(inputs)).toEqual(new Set(pacer.schedule.instances.map((i) => JSON.stringify(i.input))));
      for (const r of rules)
        expect((r.Properties as { ScheduleExpression: string }).ScheduleExpression).toBe('rate(1 minute)');
    }
  });

  it('creates a leader-override parameter per shard (auto) and the shard count for writers', () => {
    const t = templates[0] as Template;
    const params = Object.values(t.findResources('AWS::SSM::Parameter')).map(
      (p) => p.Properties as { Name: string; Value: string },
    );
    const overrides = params.filter((p) => p.Name.includes('/pacer/leader-override/'));
    expect(overrides).toHaveLength(settings.shards);
    expect(overrides.every((p) => p.Value === 'auto')).toBe(true);
    expect(params.find((p) => p.Name.endsWith('/pacer/shards'))?.Value).toBe(String(settings.shards));
  });

  it('gives the pacer its settings, the leases and budgets tables, and the budgets shard index', () => {
    const t = templates[0] as Template;
    t.hasResourceProperties('AWS::Lambda::Function', {
      FunctionName: 'paceline-pacer',
      Environment: {
        Variables: Match.objectLike({
          PACER_SHARDS: '24',
          PACER_INSTANCES_PER_SHARD: '3',
          PACER_TICK_MS: '10000',
          PACER_LEASE_TTL_MS: String(settings.leaseTtlMs),
          PARAMETER_PREFIX: '/paceline/us-east-1/',
        }),
      },
    });
    t.hasResourceProperties('AWS::DynamoDB::Table', {
      TableName: 'paceline-budgets',
      GlobalSecondaryIndexes: [
        Match.objectLike({
          IndexName: 'by-pacer-shard',
          KeySchema: [
            { AttributeName: 'pacerShard', KeyType: 'HASH' },
            { AttributeName: 'updatedAt', KeyType: 'RANGE' },
          ],
        }),
      ],
    });
  });

  it('alarms per shard on 0 leaders, several leaders and stale parameters, and on tick overruns', () => {
    for (const t of templates) {
      const alarms = Object.values(t.findResources('AWS::CloudWatch::Alarm')).map(
        (a) =>
          a.Properties as {
            MetricName?: string;
            ComparisonOperator: string;
            Threshold: number;
            TreatMissingData: string;
            Dimensions?: { Name: string; Value: string }[];
            AlarmActions?: unknown[];
          },
      );
      const shardOf = (a: (typeof alarms)[number]) => a.Dimensions?.find((d) => d.Name === 'shard')?.Value;
      const noLeader = alarms.filter(
        (a) => a.MetricName === 'IsLeader' && a.ComparisonOperator === 'LessThanThreshold',
      );
      const many = alarms.filter(
        (a) => a.MetricName === 'IsLeader' && a.ComparisonOperator === 'GreaterThanThreshold',
      );
      const stale = alarms.filter((a) => a.MetricName === 'ParamsAgeMs');
      for (const group of [noLeader, many, stale]) {
        expect(new Set(group.map(shardOf))).toEqual(
          new Set(Array.from({ length: settings.shards }, (_, s) => String(s))),
        );
        expect(group.every((a) => (a.AlarmActions ?? []).length === 1)).toBe(true);
      }
      expect(noLeader.every((a) => a.Threshold === 1 && a.TreatMissingData === 'breaching')).toBe(true);
      expect(many.every((a) => a.Threshold === 60_000 / settings.tickMs)).toBe(true);
      expect(
        stale.every((a) => a.Threshold === 3 * settings.tickMs && a.TreatMissingData === 'breaching'),
      ).toBe(true);
      expect(alarms.filter((a) => a.MetricName === 'TickOverruns')).toHaveLength(1);
    }
  });
});

describe('cdk-nag', () => {
  it('fails synthesis on an unacknowledged finding (the check is live)', () => {
    const app = new App({ outdir: tempDir('paceline-nag-') });
    const stack = new Stack(app, 'Bad');
    new sqs.Queue(stack, 'Unencrypted', { encryption: sqs.QueueEncryption.UNENCRYPTED });
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    expect(() => app.synth()).toThrow();
  });
});
