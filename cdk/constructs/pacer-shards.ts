import { NestedStack, type NestedStackProps } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import type * as sns from 'aws-cdk-lib/aws-sns';
import * as ssm from 'aws-cdk-lib/aws-ssm';
import type { Construct } from 'constructs';
import type { AlarmSpec } from '../../shared/pacing/alarms.js';
import type { PacerStackLayout } from '../../shared/region/schedule.js';
import { PacerAlarms } from './pacer-alarms.js';

/** A parameter of a shard (its leader override), as the description gives it. */
export interface ShardParameter {
  /** Construct id suffix (the description's key). */
  readonly key: string;
  /** Full parameter name (the deployment's prefix and the described path). */
  readonly name: string;
  readonly value: string;
  readonly description: string;
}

/** Props of {@link PacerShards}. */
export interface PacerShardsProps extends NestedStackProps {
  /** This stack's shards and their scheduling rules (shared/region/schedule.ts). */
  readonly layout: PacerStackLayout;
  /** Names each rule (the pacer's one invoke permission matches them all by pattern). */
  readonly ruleName: (instance: number, firstShard: number) => string;
  /** ARN of the pacer function every rule targets. */
  readonly pacerFunctionArn: string;
  /** The shards' parameters (leader overrides). */
  readonly shardParameters: readonly ShardParameter[];
  /** The shards' alarms (shared/pacing/alarms.ts). */
  readonly alarms: readonly AlarmSpec[];
  readonly alarmTopic: sns.ITopic;
}

/**
 * A nested stack holding everything per shard of up to 64 pacer shards: their scheduling rules
 * (every minute, up to five targets each, each target the pacer with its constant
 * `{shard, instance}` input, no retries, events older than 60 s dropped), their leader-override
 * parameters and their alarms. The pacer's invoke permission is one, in the parent stack, for
 * every rule by name pattern (docs/operations.md, "Scale").
 */
export class PacerShards extends NestedStack {
  /** The rules, in layout order. */
  readonly rules: events.CfnRule[] = [];

  constructor(scope: Construct, id: string, props: PacerShardsProps) {
    super(scope, id, props);
    for (const rule of props.layout.rules) {
      const shards = rule.targets.map((t) => t.input.shard);
      this.rules.push(
        new events.CfnRule(this, `Rule-i${rule.instance}-s${rule.firstShard}`, {
          name: props.ruleName(rule.instance, rule.firstShard),
          description: `pacer instance ${rule.instance} of shards ${shards.join(', ')}`,
          // EventBridge fires each rule at its own second within the minute.
          scheduleExpression: 'rate(1 minute)',
          state: 'ENABLED',
          targets: rule.targets.map((t) => ({
            id: t.id,
            arn: props.pacerFunctionArn,
            input: JSON.stringify(t.input),
            // A late scheduled run is worthless (the next minute's run supersedes it): no retries,
            // and EventBridge's minimum event age (60 s: the API refuses less).
            retryPolicy: { maximumRetryAttempts: 0, maximumEventAgeInSeconds: 60 },
          })),
        }),
      );
    }
    for (const p of props.shardParameters) {
      new ssm.StringParameter(this, `Parameter-${p.key}`, {
        parameterName: p.name,
        stringValue: p.value,
        description: p.description,
      });
    }
    new PacerAlarms(this, 'Alarms', { specs: props.alarms, alarmTopic: props.alarmTopic });
  }
}
