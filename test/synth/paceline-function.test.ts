import { fileURLToPath } from 'node:url';
import { App, Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as sns from 'aws-cdk-lib/aws-sns';
import { describe, expect, it } from 'vitest';
import { PacelineFunction } from '../../cdk/constructs/paceline-function.js';
import type { FunctionSpec } from '../../shared/region/resources.js';
import { tempDir } from '../support/tmp.js';

const root = fileURLToPath(new URL('../..', import.meta.url)).replace(/\/$/, '');

describe('PacelineFunction with a schedule (how the pacer plugs in)', () => {
  it('creates one EventBridge rule per instance with its constant input and no retries', () => {
    const app = new App({ outdir: tempDir('paceline-fn-') });
    const stack = new Stack(app, 'S', { env: { account: '123456789012', region: 'us-east-1' } });
    const vpc = new ec2.Vpc(stack, 'Vpc', {
      availabilityZones: ['us-east-1a', 'us-east-1b'],
      natGateways: 0,
      subnetConfiguration: [{ name: 'i', subnetType: ec2.SubnetType.PRIVATE_ISOLATED }],
    });
    const spec: FunctionSpec = {
      name: 'pacer-test',
      entry: 'test/fixtures/cdk/scheduled-handler.ts',
      memoryMb: 512,
      timeoutSeconds: 70,
      schedule: {
        rateMinutes: 1,
        instances: [
          { id: 's0-r0', input: { shard: 0, replica: 0 } },
          { id: 's0-r1', input: { shard: 0, replica: 1 } },
        ],
      },
      tables: {},
      writesStreams: [],
      usesRedis: false,
      settings: { TICK_SECONDS: '10' },
      readsParameters: false,
      purpose: 'test',
    };
    new PacelineFunction(stack, 'Fn', {
      spec,
      entry: `${root}/${spec.entry}`,
      projectRoot: root,
      environment: {},
      vpc,
      securityGroup: new ec2.SecurityGroup(stack, 'Sg', { vpc }),
      key: new kms.Key(stack, 'Key'),
      alarmTopic: new sns.Topic(stack, 'Topic'),
    });
    const t = Template.fromStack(stack);
    const rules = t.findResources('AWS::Events::Rule');
    expect(Object.keys(rules)).toHaveLength(2);
    for (const replica of [0, 1]) {
      t.hasResourceProperties('AWS::Events::Rule', {
        ScheduleExpression: 'rate(1 minute)',
        Targets: [
          Match.objectLike({
            Input: JSON.stringify({ shard: 0, replica }),
            RetryPolicy: { MaximumRetryAttempts: 0, MaximumEventAgeInSeconds: 60 },
          }),
        ],
      });
    }
    t.resourceCountIs('AWS::Lambda::EventSourceMapping', 0);
  });
});
