import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { App, Stack, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { Peer } from 'aws-cdk-lib/aws-ec2';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../cdk/app.js';
import type { RegionalStack } from '../../cdk/regional-stack.js';
import { pacerAlarmSpecs } from '../../shared/pacing/alarms.js';
import {
  adServerAccess,
  ENDPOINT_SERVICE_NAME,
  functionAccess,
  regionEndpoints,
} from '../../shared/region/access.js';
import { deploymentSettings } from '../../shared/region/deployment.js';
import {
  type FunctionKey,
  type FunctionSpec,
  isGlobal,
  physicalName,
  regionResources,
  SPEND_CONVERGENCE_SECONDS,
  type TableSpec,
} from '../../shared/region/resources.js';
import { tempDir } from '../support/tmp.js';
import {
  cdkJson,
  expectedStatements,
  regionTemplates,
  roleStatements,
  scheduledTargets,
  statementKeys,
} from './support.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** Builds and synthesizes the real app once (esbuild bundling costs seconds per function). */
let stacks: RegionalStack[];
let templates: Template[];
/** Per region: its stack's template, then its nested pacer-shard stacks'. */
let regions: Template[][];
let outdir: string;
beforeAll(() => {
  outdir = tempDir('paceline-synth-');
  const app = new App({ context: cdkJson.context, outdir });
  ({ stacks } = buildApp(app));
  // Runs both validation plugins (cdk-nag, Control Tower guard rules): throws on any
  // unacknowledged finding.
  app.synth();
  templates = stacks.map((s) => Template.fromStack(s));
  regions = stacks.map((s) => regionTemplates(s));
});

/** The deployment as cdk.json gives it: what the expectations derive from. */
const deployment = deploymentSettings((k) => cdkJson.context[k]);

describe('regional stacks', () => {
  it('synthesizes one stack per configured region, offline, with cdk-nag passing', () => {
    expect(stacks.map((s) => s.region)).toEqual(Object.keys(cdkJson.context['paceline:regions'] as object));
    expect(stacks.length).toBeGreaterThanOrEqual(2);
  });

  it('creates every regional table in each region, and the global tables once, in the primary region, with a replica per region', () => {
    // Expected sets come from the description's one replication field and the deployment's
    // regions, nothing else.
    const regional = Object.values(regionResources.tables).filter((t: TableSpec) => !isGlobal(t));
    const global = Object.values(regionResources.tables).filter((t: TableSpec) => isGlobal(t));
    const replicaRegions = deployment.regions.map((r) => r.region).sort();
    expect(global.length).toBeGreaterThan(0);
    for (const t of templates) {
      for (const spec of regional) {
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
      t.resourceCountIs('AWS::DynamoDB::Table', regional.length);
    }
    const primaryIndex = deployment.regions.findIndex((r) => r.region === deployment.primaryRegion);
    const primary = templates[primaryIndex] as Template;
    const other = templates[primaryIndex === 0 ? 1 : 0] as Template;
    primary.resourceCountIs('AWS::DynamoDB::GlobalTable', global.length);
    for (const [i, t] of templates.entries())
      if (i !== primaryIndex) t.resourceCountIs('AWS::DynamoDB::GlobalTable', 0);
    for (const spec of global) {
      const table = Object.values(primary.findResources('AWS::DynamoDB::GlobalTable')).find(
        (r) => (r.Properties as { TableName: string }).TableName === physicalName(spec.suffix),
      );
      const props = table?.Properties as {
        Replicas: {
          Region: string;
          PointInTimeRecoverySpecification: unknown;
          SSESpecification?: { KMSMasterKeyId: unknown };
        }[];
        SSESpecification: { SSEEnabled: boolean; SSEType: string };
      };
      expect(props.Replicas.map((r) => r.Region).sort()).toEqual(replicaRegions);
      expect(props.SSESpecification).toEqual({ SSEEnabled: true, SSEType: 'KMS' });
      for (const replica of props.Replicas) {
        expect(replica.PointInTimeRecoverySpecification).toEqual({ PointInTimeRecoveryEnabled: true });
        expect(replica.SSESpecification?.KMSMasterKeyId).toBeDefined();
      }
      // The peer's replica is encrypted with that region's Paceline key, named by its alias.
      expect(JSON.stringify(props.Replicas.find((r) => r.Region === 'us-west-2'))).toContain(
        ':kms:us-west-2:123456789012:alias/paceline',
      );
    }
    // The other region's functions use the local replica by name (and the key by its alias).
    other.hasResourceProperties('AWS::Lambda::Function', {
      FunctionName: 'paceline-track-spend',
      Environment: {
        Variables: Match.objectLike({
          BUDGETS_TABLE: 'paceline-budgets',
          SPEND_LEDGER_TABLE: 'paceline-spend-ledger',
        }),
      },
    });
    other.hasResourceProperties('AWS::KMS::Alias', { AliasName: 'alias/paceline' });
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
          ParallelizationFactor: s.parallelizationFactor,
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
              // The bundle's source maps, then the flags the description gives the function.
              NODE_OPTIONS: ['--enable-source-maps', ...((spec as FunctionSpec).nodeOptions ?? [])].join(' '),
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

  it('gives each function its own role holding exactly the statements derived from the description, and no managed policy', () => {
    for (const [i, t] of templates.entries()) {
      const stack = stacks[i] as RegionalStack;
      const roleIds = new Set<string>();
      for (const [fnKey, fn] of Object.entries(stack.functions) as [
        FunctionKey,
        RegionalStack['functions'][FunctionKey],
      ][]) {
        const roleId = stack.getLogicalId(fn.role.node.defaultChild as never);
        roleIds.add(roleId);
        expect(t.toJSON().Resources[roleId].Properties.ManagedPolicyArns, fnKey).toBeUndefined();
        const derived = functionAccess(stack.description, fnKey, stack.accessContext);
        expect(statementKeys(roleStatements(t, roleId)), fnKey).toEqual(expectedStatements(stack, derived));
        // Each function's table access is what its description lists (and only the tables it lists).
        const tables = derived.filter((s) => s.sid.startsWith('Table')).map((s) => s.sid);
        expect(tables.sort(), fnKey).toEqual(
          Object.keys(stack.description.functions[fnKey].tables)
            .map((k) => `Table${k.charAt(0).toUpperCase()}${k.slice(1)}`)
            .sort(),
        );
      }
      // No role of a function is shared, and no other principal holds a function's policies.
      expect(roleIds.size).toBe(Object.keys(stack.functions).length);
      // Logs only on the function's own log group (no AWSLambdaBasicExecutionRole's Resource *).
      for (const [fnKey, fn] of Object.entries(stack.functions)) {
        const logs = roleStatements(t, stack.getLogicalId(fn.role.node.defaultChild as never)).filter((s) =>
          [s.Action].flat().some((a) => String(a).startsWith('logs:')),
        );
        expect(logs, fnKey).toHaveLength(1);
        expect(JSON.stringify(logs[0]?.Resource)).toContain(
          `log-group:/aws/lambda/paceline-${regionResources.functions[fnKey as FunctionKey].name}:*`,
        );
      }
    }
  });

  it('bundles the Lua scripts into every function that uses Redis, as text (nothing read from disk)', () => {
    const scripts = readdirSync(join(root, 'shared/redis/scripts')).filter((f) => f.endsWith('.lua'));
    const template = templates[0] as Template;
    const fns = Object.values(template.findResources('AWS::Lambda::Function'));
    const users = Object.values(regionResources.functions).filter((spec) => spec.usesRedis);
    expect(users.length).toBeGreaterThan(0);
    for (const spec of users) {
      const fn = fns.find((r) => r.Properties.FunctionName === `paceline-${spec.name}`);
      const key = fn?.Properties.Code.S3Key as string;
      const code = readFileSync(join(outdir, `asset.${key.replace(/\.zip$/, '')}`, 'index.mjs'), 'utf8');
      // A line of each file that esbuild writes unescaped (the bundle holds each file as one string).
      for (const file of scripts) {
        const line = readFileSync(join(root, 'shared/redis/scripts', file), 'utf8')
          .split('\n')
          .find((l) => /^[ -~]{20,}$/.test(l) && !/['"`\\$]/.test(l)) as string;
        expect(code.includes(line), `${spec.name}'s bundle holds ${file}`).toBe(true);
      }
      expect(code.includes('cannot be read ('), `${spec.name}'s bundle reads .lua files from disk`).toBe(
        false,
      );
    }
  });

  it("turns Lambda's own asynchronous retries off for every function", () => {
    for (const [i, t] of templates.entries()) {
      const configs = Object.values(t.findResources('AWS::Lambda::EventInvokeConfig')).map(
        (r) => r.Properties,
      );
      expect(configs).toHaveLength(Object.keys(regionResources.functions).length);
      const functions = Object.values((stacks[i] as RegionalStack).functions).map((f) =>
        (stacks[i] as RegionalStack).resolve(f.function.functionName),
      );
      expect(configs.map((c) => c.FunctionName)).toEqual(expect.arrayContaining(functions));
      expect(configs.every((c) => c.MaximumRetryAttempts === 0 && c.MaximumEventAgeInSeconds === 60)).toBe(
        true,
      );
    }
  });

  it('routes every call: S3 and DynamoDB gateway endpoints, an interface endpoint for every other service a function calls', () => {
    for (const [i, t] of templates.entries()) {
      const stack = stacks[i] as RegionalStack;
      const expected = regionEndpoints(stack.description);
      const endpoints = Object.values(t.findResources('AWS::EC2::VPCEndpoint')).map((r) => ({
        type: r.Properties.VpcEndpointType ?? 'Gateway',
        // `com.amazonaws.<region>.<service>`, literal or joined with the region's Ref.
        service: [...JSON.stringify(stack.resolve(r.Properties.ServiceName)).matchAll(/\.([a-z0-9-]+)"/g)].at(
          -1,
        )?.[1],
        privateDns: r.Properties.PrivateDnsEnabled,
      }));
      const of = (type: string) =>
        endpoints
          .filter((e) => e.type === type)
          .map((e) => e.service)
          .sort();
      expect(of('Gateway')).toEqual(expected.gateway.map((s) => ENDPOINT_SERVICE_NAME[s]).sort());
      expect(of('Interface')).toEqual(expected.interface.map((s) => ENDPOINT_SERVICE_NAME[s]).sort());
      expect(expected.gateway.sort()).toEqual(['dynamodb', 's3']);
      // What the description makes the functions call today: the pacer's SSM and ElastiCache API
      // (parameters, peer discovery) and X-Ray for every function's active tracing.
      expect(expected.interface).toEqual(expect.arrayContaining(['elasticache', 'ssm', 'xray']));
      expect(endpoints.filter((e) => e.type === 'Interface').every((e) => e.privateDns === true)).toBe(true);
    }
  });
});

describe('pacer in the stack (derived from the region description)', () => {
  const pacer = regionResources.functions.pacer;
  const settings = regionResources.settings.pacer;

  it('schedules every (shard, instance) exactly once, every minute, with its {shard, instance} input and no retries', () => {
    for (const [i, region] of regions.entries()) {
      const stack = stacks[i] as RegionalStack;
      const targets = scheduledTargets(region);
      // Expected from the description's schedule instances alone.
      expect(targets.map((x) => x.input).sort()).toEqual(
        pacer.schedule.instances.map((x) => JSON.stringify(x.input)).sort(),
      );
      for (const target of targets) {
        expect(target.schedule).toBe('rate(1 minute)');
        // Retries off; the event age at EventBridge's minimum (60 s: the API refuses less).
        expect(target.retries).toBe(0);
        expect(target.maxAge).toBeLessThanOrEqual(60);
        expect(target.rule.startsWith(`${stack.names.base}-pacer.`)).toBe(true);
      }
      // At most five targets a rule, and a shard's instances in different rules (different seconds).
      const byRule = new Map<string, typeof targets>();
      for (const x of targets) byRule.set(x.rule, [...(byRule.get(x.rule) ?? []), x]);
      expect(Math.max(...[...byRule.values()].map((v) => v.length))).toBeLessThanOrEqual(5);
      for (const v of byRule.values())
        expect(new Set(v.map((x) => JSON.parse(x.input).shard)).size).toBe(v.length);
      // The per-instance rules live in the nested shard stacks, not in the region's stack.
      expect(scheduledTargets([region[0] as Template])).toHaveLength(0);
    }
  });

  it('lets every pacer rule of the deployment invoke the pacer through one permission, by rule-name pattern', () => {
    for (const [i, t] of templates.entries()) {
      const stack = stacks[i] as RegionalStack;
      const pacerArn = stack.resolve(stack.functions.pacer.function.functionArn);
      const permissions = Object.values(t.findResources('AWS::Lambda::Permission')).filter(
        (p) => JSON.stringify(p.Properties.FunctionName) === JSON.stringify(pacerArn),
      );
      expect(permissions).toHaveLength(1);
      expect(permissions[0]?.Properties).toMatchObject({
        Action: 'lambda:InvokeFunction',
        Principal: 'events.amazonaws.com',
        SourceAccount: '123456789012',
        SourceArn: `arn:aws:events:${stack.region}:123456789012:rule/paceline-pacer.*`,
      });
      // No permission in the shard stacks.
      for (const nested of (regions[i] as Template[]).slice(1))
        nested.resourceCountIs('AWS::Lambda::Permission', 0);
    }
  });

  it('creates a leader-override parameter per shard (auto) and the shard count for writers', () => {
    const region = regions[0] as Template[];
    const params = region.flatMap((t) =>
      Object.values(t.findResources('AWS::SSM::Parameter')).map(
        (p) => p.Properties as { Name: string; Value: string },
      ),
    );
    const overrides = params.filter((p) => p.Name.includes('/pacer/leader-override/'));
    expect(overrides.map((p) => p.Name).sort()).toEqual(
      Array.from(
        { length: settings.shards },
        (_, s) => `/paceline/us-east-1/pacer/leader-override/${s}`,
      ).sort(),
    );
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
          PARAMETER_ROOT: '/paceline/',
          REDIS_CACHE_NAME: 'paceline',
        }),
      },
    });
    // Several regions: every pacer knows them all, in the deployment's order (its peers; the
    // first is every plan's allocation home), and paces in strict allocations.
    expect(deployment.regions.length).toBeGreaterThan(1);
    for (const [i, stack] of stacks.entries()) {
      expect(stack.deploymentRegions).toEqual(deployment.regions.map((r) => r.region));
      (templates[i] as Template).hasResourceProperties('AWS::Lambda::Function', {
        FunctionName: 'paceline-pacer',
        Environment: {
          Variables: Match.objectLike({
            PACELINE_REGIONS: deployment.regions.map((r) => r.region).join(','),
          }),
        },
      });
    }
    t.hasResourceProperties('AWS::DynamoDB::GlobalTable', {
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
    for (const region of regions) {
      const alarms = region
        .flatMap((t) => Object.values(t.findResources('AWS::CloudWatch::Alarm')))
        .map(
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

describe('cache IAM authentication', () => {
  it('puts the replication group behind a user group whose only enabled user authenticates with IAM', () => {
    for (const t of templates) {
      t.hasResourceProperties('AWS::ElastiCache::ReplicationGroup', {
        ReplicationGroupId: 'paceline',
        UserGroupIds: [Match.objectLike({ Ref: Match.anyValue() })],
      });
      expect(
        t.findResources('AWS::ElastiCache::ReplicationGroup', {
          Properties: { AuthToken: Match.anyValue() },
        }),
      ).toEqual({});
      t.hasResourceProperties('AWS::ElastiCache::User', {
        UserId: 'paceline-app',
        UserName: 'paceline-app',
        AuthenticationMode: { Type: 'iam' },
      });
      // The `default` user a group must contain is disabled.
      t.hasResourceProperties('AWS::ElastiCache::User', { UserName: 'default', AccessString: 'off -@all' });
      t.hasResourceProperties('AWS::ElastiCache::UserGroup', {
        UserIds: Match.arrayWith(['paceline-app']),
      });
    }
  });

  it('gives every Redis function its IAM user and cache name, and elasticache:Connect on exactly them', () => {
    const stack = stacks[0] as RegionalStack;
    const t = templates[0] as Template;
    for (const [fnKey, fn] of Object.entries(stack.functions)) {
      const spec = regionResources.functions[fnKey as keyof typeof regionResources.functions];
      if (!spec.usesRedis) continue;
      t.hasResourceProperties('AWS::Lambda::Function', {
        FunctionName: `paceline-${spec.name}`,
        Environment: {
          Variables: Match.objectLike({ REDIS_IAM_USER: 'paceline-app', REDIS_CACHE_NAME: 'paceline' }),
        },
      });
      const role = stack.getLogicalId(fn.function.role?.node.defaultChild as never);
      const statements = Object.values(t.findResources('AWS::IAM::Policy'))
        .filter((p) => JSON.stringify(p.Properties.Roles).includes(role))
        .flatMap(
          (p) => p.Properties.PolicyDocument.Statement as { Action: string | string[]; Resource: unknown }[],
        );
      const connect = statements.filter((x) => x.Action === 'elasticache:Connect');
      expect(connect, fnKey).toHaveLength(1);
      const resources = JSON.stringify(connect[0]?.Resource);
      expect(resources).toContain(':elasticache:us-east-1:');
      expect(resources).toContain('replicationgroup:paceline');
      expect(resources).toContain('user:paceline-app');
      // Only the pacer (a failover publisher) may connect to the peer region's cache.
      expect(resources.includes(':elasticache:us-west-2:'), fnKey).toBe(fnKey === 'pacer');
    }
  });
});

describe('PacelineAdServerAccess', () => {
  it('is one managed policy with exactly the statements derived from what the client does', () => {
    for (const [i, t] of templates.entries()) {
      const stack = stacks[i] as RegionalStack;
      const policies = Object.values(t.findResources('AWS::IAM::ManagedPolicy'));
      expect(policies).toHaveLength(1);
      expect(policies[0]?.Properties.ManagedPolicyName).toBe(`paceline-ad-server-${stack.region}`);
      const doc = policies[0]?.Properties.PolicyDocument as {
        Statement: {
          Sid: string;
          Effect: string;
          Action: string | string[];
          Resource: unknown;
          Condition?: unknown;
        }[];
      };
      expect(statementKeys(doc.Statement)).toEqual(
        expectedStatements(stack, adServerAccess(stack.description, stack.accessContext)),
      );
      const bySid = Object.fromEntries(doc.Statement.map((x) => [x.Sid, x]));
      // What the client library does, as the description says: read budgets, the guard's ledger
      // rebuild and marker, events on both streams, the shard count from SSM (unless PACER_SHARDS
      // is set), the key via DynamoDB and Kinesis, IAM auth to the cache.
      expect(Object.keys(bySid).sort()).toEqual([
        'CacheConnect',
        'Key',
        'PacerShards',
        'PutEvents',
        'TableBudgets',
        'TableSpendLedger',
      ]);
      expect(bySid.PacerShards?.Action).toBe('ssm:GetParameter');
      expect(bySid.PacerShards?.Resource).toBe(
        `arn:aws:ssm:${stack.region}:123456789012:parameter/paceline/${stack.region}/pacer/shards`,
      );
      expect(JSON.stringify(bySid.Key?.Condition)).toContain('kms:ViaService');
      expect([bySid.TableSpendLedger?.Action].flat().sort()).toEqual(['dynamodb:PutItem', 'dynamodb:Query']);
      // No wildcard anywhere: not in an action, not in a resource.
      expect(JSON.stringify(doc)).not.toContain('*');
    }
  });

  it('admits a fleet to the cache port with allowFrom', () => {
    // No asset bundling for this second app (`aws:cdk:bundling-stacks` empty): only IAM/EC2 matter.
    const app = new App({
      context: { ...cdkJson.context, 'aws:cdk:bundling-stacks': [] },
      outdir: tempDir('paceline-access-'),
    });
    const { stacks: built } = buildApp(app);
    const stack = built[0] as RegionalStack;
    stack.adServerAccess.allowFrom(Peer.ipv4('10.99.0.0/16'));
    Template.fromStack(stack).hasResourceProperties('AWS::EC2::SecurityGroup', {
      SecurityGroupIngress: Match.arrayWith([
        Match.objectLike({ CidrIp: '10.99.0.0/16', FromPort: 6380, ToPort: 6380, IpProtocol: 'tcp' }),
      ]),
    });
  });
});

describe('network between regions', () => {
  it('admits the peer region CIDR to the cache and, once VPC ids are known, peers and routes', () => {
    for (const [i, t] of templates.entries()) {
      const peerCidr = i === 0 ? '10.21.0.0/16' : '10.20.0.0/16';
      t.hasResourceProperties('AWS::EC2::SecurityGroup', {
        GroupDescription: 'Paceline cache: only the functions may connect',
        SecurityGroupIngress: Match.arrayWith([
          Match.objectLike({ CidrIp: peerCidr, FromPort: 6380, ToPort: 6380, IpProtocol: 'tcp' }),
        ]),
      });
      t.resourceCountIs('AWS::EC2::VPCPeeringConnection', 0);
    }
    const context = structuredClone(cdkJson.context) as Record<
      string,
      Record<string, Record<string, unknown>>
    >;
    const regions = context['paceline:regions'] as Record<string, { network: Record<string, unknown> }>;
    (regions['us-west-2'] as { network: Record<string, unknown> }).network.vpcId = 'vpc-0123456789abcdef0';
    (regions['us-west-2'] as { network: Record<string, unknown> }).network.peering = {
      'us-east-1': 'pcx-0123456789abcdef0',
    };
    const app = new App({
      context: { ...context, 'aws:cdk:bundling-stacks': [] },
      outdir: tempDir('paceline-peering-'),
    });
    const [east, west] = buildApp(app).stacks.map((s) => Template.fromStack(s)) as [Template, Template];
    east.hasResourceProperties('AWS::EC2::VPCPeeringConnection', {
      PeerVpcId: 'vpc-0123456789abcdef0',
      PeerRegion: 'us-west-2',
    });
    east.resourcePropertiesCountIs('AWS::EC2::Route', { DestinationCidrBlock: '10.21.0.0/16' }, 3);
    west.resourcePropertiesCountIs(
      'AWS::EC2::Route',
      { DestinationCidrBlock: '10.20.0.0/16', VpcPeeringConnectionId: 'pcx-0123456789abcdef0' },
      3,
    );
  });
});

describe("private DNS for peer regions' APIs (SSM, ElastiCache) over the peering", () => {
  /** us-west-2's endpoints as its SSM parameters publish them, pasted into cdk.json. */
  const westEndpoints = {
    ssm: {
      dnsName: 'vpce-0123456789abcdef0-ab12cd34.ssm.us-west-2.vpce.amazonaws.com',
      hostedZoneId: 'Z1YSA3EXCYUU9Z',
    },
    elasticache: {
      dnsName: 'vpce-0fedcba9876543210-zz99yy88.elasticache.us-west-2.vpce.amazonaws.com',
      hostedZoneId: 'Z1YSA3EXCYUU9Z',
    },
  };
  type Regions = Record<string, { network: Record<string, unknown> }>;
  function contextWith(edit: (regions: Regions) => void): Record<string, unknown> {
    const context = structuredClone(cdkJson.context);
    edit(context['paceline:regions'] as Regions);
    return { ...context, 'aws:cdk:bundling-stacks': [] };
  }
  /** Ingress rules of the interface endpoint of `service` (its security group CDK names by path). */
  function endpointIngress(
    t: Template,
    region: string,
    service: string,
  ): { CidrIp: unknown; FromPort: number }[] {
    const groups = Object.values(
      t.findResources('AWS::EC2::SecurityGroup', {
        Properties: { GroupDescription: `Paceline-${region}/Network/Vpc/${service}/SecurityGroup` },
      }),
    );
    expect(groups).toHaveLength(1);
    return groups[0]?.Properties.SecurityGroupIngress;
  }
  const vpcRef = (t: Template) => ({ Ref: Object.keys(t.findResources('AWS::EC2::VPC'))[0] });

  it("publishes each region's SSM and ElastiCache endpoints in SSM, ready for cdk.json", () => {
    for (const [i, t] of templates.entries()) {
      for (const service of ['ssm', 'elasticache']) {
        const params = Object.values(
          t.findResources('AWS::SSM::Parameter', {
            Properties: { Name: `/paceline/${stacks[i]?.region}/network/endpoints/${service}` },
          }),
        );
        expect(params).toHaveLength(1);
        const value = JSON.stringify(params[0]?.Properties.Value);
        // {"dnsName": <2nd half of the first DnsEntries entry>, "hostedZoneId": <1st half>}
        expect(value).toContain('dnsName');
        expect(value).toContain('hostedZoneId');
        expect(value).toContain('DnsEntries');
      }
    }
  });

  it('without peer endpoints in cdk.json: no zone, no record, endpoints admit only their own VPC', () => {
    for (const [i, t] of templates.entries()) {
      t.resourceCountIs('AWS::Route53::HostedZone', 0);
      t.resourceCountIs('AWS::Route53::RecordSet', 0);
      for (const service of ['ssm', 'elasticache']) {
        const ingress = endpointIngress(t, stacks[i]?.region as string, service);
        expect(ingress).toHaveLength(1);
        expect(ingress[0]?.CidrIp).toEqual({ 'Fn::GetAtt': [vpcRef(t).Ref, 'CidrBlock'] });
      }
    }
  });

  it("with a peer's endpoints: zones on this VPC aliased to them, the peer admits this CIDR on 443, cdk-nag passes", () => {
    const app = new App({
      context: contextWith((regions) => {
        const west = (regions['us-west-2'] as { network: Record<string, unknown> }).network;
        west.vpcId = 'vpc-0123456789abcdef0';
        west.peering = { 'us-east-1': 'pcx-0123456789abcdef0' };
        west.endpoints = westEndpoints;
      }),
      outdir: tempDir('paceline-peer-dns-'),
    });
    const built = buildApp(app).stacks;
    // cdk-nag runs on synth: the zones, records and rules add no unacknowledged finding.
    app.synth();
    const [east, west] = built.map((s) => Template.fromStack(s)) as [Template, Template];

    // us-east-1 resolves us-west-2's SSM and ElastiCache APIs to us-west-2's endpoints.
    east.resourceCountIs('AWS::Route53::HostedZone', 2);
    east.resourceCountIs('AWS::Route53::RecordSet', 2);
    for (const [service, alias] of Object.entries(westEndpoints)) {
      const zoneName = `${service}.us-west-2.amazonaws.com.`;
      const zones = east.findResources('AWS::Route53::HostedZone', { Properties: { Name: zoneName } });
      expect(Object.keys(zones), zoneName).toHaveLength(1);
      // Private: associated with this region's VPC only.
      expect(Object.values(zones)[0]?.Properties.VPCs).toEqual([
        { VPCId: vpcRef(east), VPCRegion: 'us-east-1' },
      ]);
      east.hasResourceProperties('AWS::Route53::RecordSet', {
        Name: zoneName,
        Type: 'A',
        HostedZoneId: { Ref: Object.keys(zones)[0] },
        AliasTarget: { DNSName: alias.dnsName, HostedZoneId: alias.hostedZoneId },
      });
    }
    // us-west-2's endpoints admit us-east-1's pacers on 443; us-east-1's own endpoints (not
    // published in cdk.json) admit only their VPC, and us-west-2 has no zone for them.
    for (const service of ['ssm', 'elasticache']) {
      expect(endpointIngress(west, 'us-west-2', service)).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ CidrIp: '10.20.0.0/16', FromPort: 443, ToPort: 443, IpProtocol: 'tcp' }),
        ]),
      );
      expect(endpointIngress(west, 'us-west-2', service)).toHaveLength(2);
      expect(endpointIngress(east, 'us-east-1', service)).toHaveLength(1);
    }
    west.resourceCountIs('AWS::Route53::HostedZone', 0);
    // The same path as the cache's: the peering routes both ways.
    east.resourcePropertiesCountIs('AWS::EC2::Route', { DestinationCidrBlock: '10.21.0.0/16' }, 3);
    west.resourcePropertiesCountIs('AWS::EC2::Route', { DestinationCidrBlock: '10.20.0.0/16' }, 3);
  });

  it('one service given: only its zone', () => {
    const app = new App({
      context: contextWith((regions) => {
        (regions['us-west-2'] as { network: Record<string, unknown> }).network.endpoints = {
          elasticache: westEndpoints.elasticache,
        };
      }),
      outdir: tempDir('paceline-peer-dns-'),
    });
    const [east, west] = buildApp(app).stacks.map((s) => Template.fromStack(s)) as [Template, Template];
    east.resourceCountIs('AWS::Route53::HostedZone', 1);
    east.hasResourceProperties('AWS::Route53::HostedZone', { Name: 'elasticache.us-west-2.amazonaws.com.' });
    expect(endpointIngress(west, 'us-west-2', 'elasticache')).toHaveLength(2);
    expect(endpointIngress(west, 'us-west-2', 'ssm')).toHaveLength(1);
  });

  it('a malformed endpoint value fails the build, naming the key and where to copy it from', () => {
    const app = new App({
      context: contextWith((regions) => {
        (regions['us-west-2'] as { network: Record<string, unknown> }).network.endpoints = {
          ssm: { ...westEndpoints.ssm, dnsName: 'ssm.us-west-2.amazonaws.com' },
        };
      }),
      outdir: tempDir('paceline-peer-dns-'),
    });
    expect(() => buildApp(app)).toThrow(
      /^cdk\.json context paceline:regions\.us-west-2\.network\.endpoints\.ssm\.dnsName: .*SSM \/paceline\/us-west-2\/network\/endpoints\/ssm/,
    );
  });
});

describe('dashboard and alarms', () => {
  it('has one dashboard per region with leaders, tick duration, parameter age, iterator age, dead letters, spend vs target and delivery bands', () => {
    for (const [i, t] of templates.entries()) {
      const dashboards = Object.values(t.findResources('AWS::CloudWatch::Dashboard'));
      expect(dashboards).toHaveLength(1);
      const body = JSON.stringify(stacks[i]?.resolve(dashboards[0]?.Properties.DashboardBody));
      for (const needle of [
        'Leaders per shard',
        'IsLeader',
        'TickDurationMs',
        'ParamsAgeMs',
        'IteratorAge',
        'RecordsQuarantined',
        'ApproximateNumberOfMessagesVisible',
        'CampaignSpendMicros',
        'CampaignTargetMicros',
        'PlansBehindByReason',
        'lost-auctions',
        'PlansAhead',
      ])
        expect(body, needle).toContain(needle);
      expect(dashboards[0]?.Properties.DashboardName).toBe(`paceline-${stacks[i]?.region}`);
    }
  });

  it('creates every alarm: the pacer specs, per-function, stream, convergence and cache alarms, all notifying', () => {
    const settings = regionResources.settings.pacer;
    const specs = pacerAlarmSpecs(settings, regionResources.functions.pacer.name);
    const fns = Object.values(regionResources.functions) as FunctionSpec[];
    const streamFns = fns.filter((f) => f.source).length;
    const described = fns.flatMap((f) => f.alarms ?? []).length;
    for (const region of regions) {
      const alarms = region
        .flatMap((t) => Object.values(t.findResources('AWS::CloudWatch::Alarm')))
        .map((a) => a.Properties as { AlarmDescription: string; AlarmActions?: unknown[] });
      const descriptions = alarms.map((a) => a.AlarmDescription);
      for (const spec of specs) expect(descriptions).toContain(spec.description);
      // pacer specs + errors per function + 3 per stream function + described + 2 cache alarms
      expect(alarms).toHaveLength(specs.length + fns.length + 3 * streamFns + described + 2);
      expect(alarms.every((a) => (a.AlarmActions ?? []).length === 1)).toBe(true);
    }
  });
});

describe('acknowledged findings (cdk-nag, Control Tower guard rules)', () => {
  /** Every acknowledgement of cdk-nag or guard findings: where it is and what it acknowledges. */
  function acknowledgements(stack: Stack): { path: string; id: string; reason: string; onStack: boolean }[] {
    return ours(
      stack.node.findAll().flatMap((c) =>
        c.node.metadata
          .filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
          .flatMap((m) =>
            Object.entries(m.data as Record<string, string>).map(([id, reason]) => ({
              path: c.node.path,
              id,
              reason,
              onStack: Stack.isStack(c),
            })),
          ),
      ),
    );
  }
  /** Ours: cdk-nag's and the guard rules' (CDK acknowledges its own built-in template checks). */
  const ours = <T extends { id: string }>(acks: T[]) =>
    acks.filter((a) => a.id.includes('AwsSolutions-') || a.id.startsWith('cdk-validator-cfnguard::'));

  it('acknowledges nothing on a stack: every acknowledgement sits on the resource it is about, with a reason', () => {
    for (const stack of stacks) {
      const acks = acknowledgements(stack);
      expect(acks.length).toBeGreaterThan(0);
      expect(acks.filter((a) => a.onStack)).toEqual([]);
      expect(acks.every((a) => a.reason.length > 40)).toBe(true);
      // `Resource::*` only on the functions' NoResourceLevel policies (VPC network interfaces, X-Ray).
      const wildcard = acks.filter((a) => a.id.includes('IAM5[Resource::*]'));
      expect(wildcard.map((a) => a.path).sort()).toEqual(
        Object.values(stack.functions)
          .map((f) => f.noResourceLevelPolicy.node.path)
          .sort(),
      );
      // No AWS-managed policy on a Paceline role, hence no IAM4 but on CDK's own provider.
      expect(acks.filter((a) => a.id.includes('IAM4')).every((a) => a.path.includes('Custom::'))).toBe(true);
    }
  });

  it('runs the Control Tower guard rules: each acknowledged finding matches an acknowledgement on its resource, and none is left', () => {
    const report = JSON.parse(readFileSync(join(outdir, 'validation-report.json'), 'utf8')) as {
      pluginReports: {
        pluginName: string;
        conclusion: string;
        violations: unknown[];
        suppressedViolations: { ruleName: string; violatingConstructs: { constructPath: string }[] }[];
      }[];
    };
    const guard = report.pluginReports.find((r) => r.pluginName === 'cdk-validator-cfnguard');
    expect(guard?.conclusion).toBe('success');
    expect(guard?.violations).toEqual([]);
    const suppressed = (guard?.suppressedViolations ?? []).flatMap((v) =>
      v.violatingConstructs.map((c) => `${c.constructPath} ${v.ruleName}`),
    );
    // Every guard acknowledgement in the app was needed (a finding on that very resource).
    const acks = stacks
      .flatMap((s) => acknowledgements(s))
      .filter((a) => a.id.startsWith('cdk-validator-cfnguard::'))
      .map((a) => `${a.path} ${a.id.slice('cdk-validator-cfnguard::'.length)}`);
    expect(suppressed.sort()).toEqual(acks.sort());
    // Fixed, not acknowledged: log retention, noncurrent versions, the key's grant condition.
    expect(suppressed.join('\n')).not.toMatch(/retention|version_lifecycle|lifecycle_policy|create_grant/);
  });

  it('fails synthesis on an unacknowledged finding (the check is live)', () => {
    const app = new App({ outdir: tempDir('paceline-nag-') });
    const stack = new Stack(app, 'Bad');
    new sqs.Queue(stack, 'Unencrypted', { encryption: sqs.QueueEncryption.UNENCRYPTED });
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    expect(() => app.synth()).toThrow();
  });
});
