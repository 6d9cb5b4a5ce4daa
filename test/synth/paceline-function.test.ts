import { fileURLToPath } from 'node:url';
import { App, Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as kinesis from 'aws-cdk-lib/aws-kinesis';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as sns from 'aws-cdk-lib/aws-sns';
import { beforeAll, describe, expect, it } from 'vitest';
import { PacelineFunction } from '../../cdk/constructs/paceline-function.js';
import type { AccessStatement } from '../../shared/region/access.js';
import { stageNames } from '../../shared/region/names.js';
import { type FunctionSpec, safeKinesisDefaults } from '../../shared/region/resources.js';
import { tempDir } from '../support/tmp.js';

const root = fileURLToPath(new URL('../..', import.meta.url)).replace(/\/$/, '');

/** A stream function on a stage, with a resource statement and one on `*`. */
const spec: FunctionSpec = {
  name: 'fn-test',
  entry: 'test/fixtures/cdk/scheduled-handler.ts',
  memoryMb: 512,
  timeoutSeconds: 70,
  source: { ...safeKinesisDefaults, stream: 'actions', parallelizationFactor: 4 },
  tables: {},
  writesStreams: [],
  usesRedis: false,
  settings: {},
  readsParameters: false,
  reservedConcurrency: 7,
  purpose: 'test',
};
const access: AccessStatement[] = [
  {
    sid: 'Some',
    actions: ['dynamodb:GetItem'],
    resources: ['arn:aws:dynamodb:us-east-1:123456789012:table/t'],
  },
  { sid: 'Wild', actions: ['xray:PutTraceSegments'], resources: ['*'] },
];

let t: Template;
let fn: PacelineFunction;
beforeAll(() => {
  const app = new App({ outdir: tempDir('paceline-fn-') });
  const stack = new Stack(app, 'S', { env: { account: '123456789012', region: 'us-east-1' } });
  const vpc = new ec2.Vpc(stack, 'Vpc', {
    availabilityZones: ['us-east-1a', 'us-east-1b'],
    natGateways: 0,
    subnetConfiguration: [{ name: 'i', subnetType: ec2.SubnetType.PRIVATE_ISOLATED }],
  });
  fn = new PacelineFunction(stack, 'Fn', {
    spec,
    names: stageNames('qa'),
    entry: `${root}/${spec.entry}`,
    projectRoot: root,
    environment: {},
    vpc,
    securityGroup: new ec2.SecurityGroup(stack, 'Sg', { vpc }),
    key: new kms.Key(stack, 'Key'),
    alarmTopic: new sns.Topic(stack, 'Topic'),
    access,
    stream: new kinesis.Stream(stack, 'Stream'),
  });
  t = Template.fromStack(stack);
});

describe('PacelineFunction', () => {
  it('runs as its own role holding exactly the given statements: resource ones in Access, `*` ones apart, no managed policy', () => {
    const roles = Object.values(t.findResources('AWS::IAM::Role'));
    expect(roles).toHaveLength(1);
    expect(roles[0]?.Properties.ManagedPolicyArns).toBeUndefined();
    const policies = Object.values(t.findResources('AWS::IAM::Policy')).map(
      (p) => p.Properties.PolicyDocument.Statement as { Sid: string; Resource: unknown }[],
    );
    expect(policies.map((statements) => statements.map((s) => s.Sid)).sort()).toEqual([['Some'], ['Wild']]);
    expect(policies.find((p) => p[0]?.Sid === 'Wild')?.[0]?.Resource).toBe('*');
    // The function waits for both policies (Lambda checks the role when it creates it in a VPC).
    const fnResource = Object.values(t.findResources('AWS::Lambda::Function'))[0];
    expect(fnResource?.DependsOn).toEqual(
      expect.arrayContaining(Object.keys(t.findResources('AWS::IAM::Policy'))),
    );
  });

  it('is named by the stage, logs to its own year-long log group, traces actively, keeps its reserved concurrency', () => {
    t.hasResourceProperties('AWS::Lambda::Function', {
      FunctionName: 'qa-paceline-fn-test',
      TracingConfig: { Mode: 'Active' },
      ReservedConcurrentExecutions: 7,
      LoggingConfig: { LogGroup: { Ref: Match.anyValue() } },
    });
    t.hasResourceProperties('AWS::Logs::LogGroup', {
      LogGroupName: '/aws/lambda/qa-paceline-fn-test',
      RetentionInDays: 365,
    });
    expect(fn.logGroup).toBeDefined();
  });

  it("turns Lambda's own asynchronous retries off", () => {
    t.hasResourceProperties('AWS::Lambda::EventInvokeConfig', {
      MaximumRetryAttempts: 0,
      MaximumEventAgeInSeconds: 60,
      Qualifier: '$LATEST',
    });
  });

  it('maps its stream with the described settings and an on-failure queue named by the stage, without grants of its own', () => {
    t.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      BatchSize: safeKinesisDefaults.batchSize,
      MaximumBatchingWindowInSeconds: safeKinesisDefaults.maxBatchingWindowSeconds,
      BisectBatchOnFunctionError: true,
      MaximumRetryAttempts: safeKinesisDefaults.retryAttempts,
      MaximumRecordAgeInSeconds: safeKinesisDefaults.maxRecordAgeSeconds,
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      ParallelizationFactor: 4,
      StartingPosition: 'TRIM_HORIZON',
      DestinationConfig: { OnFailure: { Destination: Match.anyValue() } },
    });
    t.hasResourceProperties('AWS::SQS::Queue', { QueueName: 'qa-paceline-fn-test-on-failure' });
    // The mapping waits for the Access policy (Lambda checks the role can read the stream).
    const mapping = Object.values(t.findResources('AWS::Lambda::EventSourceMapping'))[0];
    expect(mapping?.DependsOn?.length).toBeGreaterThan(0);
    // The queue's acknowledgements are on the queue, for cdk-nag and for the guard rules.
    const queue = Object.values(t.findResources('AWS::SQS::Queue'))[0];
    expect(queue?.Metadata?.guard?.SuppressedRules).toEqual(['sqs_dlq_check']);
  });
});
