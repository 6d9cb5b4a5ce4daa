import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import type * as kinesis from 'aws-cdk-lib/aws-kinesis';
import type * as kms from 'aws-cdk-lib/aws-kms';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sources from 'aws-cdk-lib/aws-lambda-event-sources';
import * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as sns from 'aws-cdk-lib/aws-sns';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import {
  type FunctionSpec,
  type KinesisSourceSpec,
  onFailureQueueName,
} from '../../shared/region/resources.js';

/** Props of {@link PacelineFunction}. */
export interface PacelineFunctionProps {
  /** The function's entry in the region description. */
  readonly spec: FunctionSpec;
  /** Absolute path of the handler module. */
  readonly entry: string;
  /** Repository root (where package-lock.json is). */
  readonly projectRoot: string;
  readonly environment: Record<string, string>;
  readonly vpc: ec2.IVpc;
  readonly securityGroup: ec2.ISecurityGroup;
  readonly key: kms.IKey;
  /** Where alarms notify. */
  readonly alarmTopic: sns.ITopic;
  /** The stream of `spec.source`, when the function is stream-triggered. */
  readonly stream?: kinesis.IStream;
  /** Alarm when the oldest unprocessed record is older than this. @default 60 s */
  readonly iteratorAgeAlarmThreshold?: Duration;
}

/**
 * A Paceline Lambda function in the VPC, bundled with esbuild (no Docker); when the spec has a
 * schedule, one EventBridge rule per instance; when it has a Kinesis source, its event-source mapping with the safe defaults from the spec (bisect,
 * bounded retries, max record age, partial batch responses), an encrypted on-failure queue, and
 * alarms on iterator age, on-failure messages, quarantined records and errors.
 */
export class PacelineFunction extends Construct {
  readonly function: nodejs.NodejsFunction;
  /** On-failure destination of the event source (batch metadata of exhausted batches). */
  readonly onFailureQueue?: sqs.Queue;

  constructor(scope: Construct, id: string, props: PacelineFunctionProps) {
    super(scope, id);
    const { spec } = props;
    const logGroup = new logs.LogGroup(this, 'Logs', {
      retention: logs.RetentionDays.ONE_MONTH,
      encryptionKey: props.key,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    this.function = new nodejs.NodejsFunction(this, 'Function', {
      functionName: `paceline-${spec.name}`,
      description: spec.purpose,
      entry: props.entry,
      handler: 'handler',
      projectRoot: props.projectRoot,
      depsLockFilePath: `${props.projectRoot}/package-lock.json`,
      runtime: lambda.Runtime.NODEJS_24_X,
      architecture: lambda.Architecture.ARM_64,
      memorySize: spec.memoryMb,
      timeout: Duration.seconds(spec.timeoutSeconds),
      environment: { ...props.environment, NODE_OPTIONS: '--enable-source-maps' },
      environmentEncryption: props.key,
      vpc: props.vpc,
      vpcSubnets: { subnetType: ec2.SubnetType.PRIVATE_ISOLATED },
      securityGroups: [props.securityGroup],
      logGroup,
      tracing: lambda.Tracing.ACTIVE,
      bundling: {
        format: nodejs.OutputFormat.ESM,
        minify: true,
        sourceMap: true,
        target: 'node22',
        // ioredis and friends are CommonJS: give the ESM bundle a `require`.
        banner: "import { createRequire } from 'node:module';const require = createRequire(import.meta.url);",
        externalModules: ['@aws-sdk/*'],
      },
    });
    const notify = (a: cloudwatch.Alarm) => {
      a.addAlarmAction(new actions.SnsAction(props.alarmTopic));
      return a;
    };
    notify(
      new cloudwatch.Alarm(this, 'ErrorsAlarm', {
        alarmDescription: `${spec.name}: invocation errors (whole batches failing)`,
        metric: this.function.metricErrors({ period: Duration.minutes(1) }),
        threshold: 1,
        evaluationPeriods: 5,
        datapointsToAlarm: 3,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );
    for (const alarm of spec.alarms ?? []) {
      notify(
        new cloudwatch.Alarm(this, `${alarm.id}Alarm`, {
          alarmDescription: alarm.description,
          metric: new cloudwatch.Metric({
            namespace: 'Paceline',
            metricName: alarm.metricName,
            dimensionsMap: { service: spec.name },
            statistic: alarm.statistic,
            period: Duration.seconds(alarm.periodSeconds),
          }),
          threshold: alarm.threshold,
          evaluationPeriods: alarm.evaluationPeriods,
          comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
          treatMissingData: alarm.missingIsBreaching
            ? cloudwatch.TreatMissingData.BREACHING
            : cloudwatch.TreatMissingData.NOT_BREACHING,
        }),
      );
    }
    if (spec.schedule && spec.schedule.instances.length === 0) {
      // One rule without input: the function receives EventBridge's Scheduled Event.
      new events.Rule(this, 'Schedule', {
        description: `${spec.name} every ${spec.schedule.rateMinutes} minute(s)`,
        schedule: events.Schedule.rate(Duration.minutes(spec.schedule.rateMinutes)),
        targets: [
          new targets.LambdaFunction(this.function, { retryAttempts: 0, maxEventAge: Duration.minutes(1) }),
        ],
      });
    }
    if (spec.schedule) {
      // One rule per instance (e.g. shard × replica), each with its constant input. EventBridge
      // fires at most once a minute; the handler runs the sub-minute ticks itself. A late
      // scheduled run is worthless (the next minute's run supersedes it), so no retries.
      for (const instance of spec.schedule.instances) {
        new events.Rule(this, `Schedule-${instance.id}`, {
          description: `${spec.name} instance ${instance.id}`,
          schedule: events.Schedule.rate(Duration.minutes(spec.schedule.rateMinutes)),
          targets: [
            new targets.LambdaFunction(this.function, {
              event: events.RuleTargetInput.fromObject(instance.input),
              retryAttempts: 0,
              maxEventAge: Duration.minutes(1),
            }),
          ],
        });
      }
    }
    if (!spec.source) return;
    if (!props.stream) throw new Error(`${spec.name} has a Kinesis source but no stream was given`);
    this.onFailureQueue = new sqs.Queue(this, 'OnFailure', {
      // A known name: `dead-letters redrive` finds the queue of a function by it.
      queueName: onFailureQueueName(spec.name),
      retentionPeriod: Duration.days(14),
      encryption: sqs.QueueEncryption.KMS,
      encryptionMasterKey: props.key,
      enforceSSL: true,
    });
    this.function.addEventSource(
      new sources.KinesisEventSource(props.stream, {
        ...eventSourceProps(spec.source),
        onFailure: new sources.SqsDlq(this.onFailureQueue),
      }),
    );
    notify(
      new cloudwatch.Alarm(this, 'IteratorAgeAlarm', {
        alarmDescription: `${spec.name}: falling behind its stream`,
        metric: this.function.metric('IteratorAge', { statistic: 'Maximum', period: Duration.minutes(1) }),
        threshold: (props.iteratorAgeAlarmThreshold ?? Duration.seconds(60)).toMilliseconds(),
        evaluationPeriods: 3,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );
    notify(
      new cloudwatch.Alarm(this, 'OnFailureAlarm', {
        alarmDescription: `${spec.name}: batches gave up after retries / max age (see the on-failure queue)`,
        metric: this.onFailureQueue.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1) }),
        threshold: 1,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );
    notify(
      new cloudwatch.Alarm(this, 'DeadLettersAlarm', {
        alarmDescription: `${spec.name}: records quarantined in the dead-letter table`,
        metric: new cloudwatch.Metric({
          namespace: 'Paceline',
          metricName: 'RecordsQuarantined',
          dimensionsMap: { service: spec.name },
          statistic: 'Sum',
          period: Duration.minutes(5),
        }),
        threshold: 1,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );
  }
}

/** Maps the description's event-source settings onto CDK's props (no defaults of CDK's own). */
export function eventSourceProps(source: KinesisSourceSpec): sources.KinesisEventSourceProps {
  return {
    batchSize: source.batchSize,
    maxBatchingWindow: Duration.seconds(source.maxBatchingWindowSeconds),
    bisectBatchOnError: source.bisectBatchOnFunctionError,
    retryAttempts: source.retryAttempts,
    maxRecordAge: Duration.seconds(source.maxRecordAgeSeconds),
    reportBatchItemFailures: source.reportBatchItemFailures,
    parallelizationFactor: 1,
    startingPosition:
      source.startingPosition === 'LATEST'
        ? lambda.StartingPosition.LATEST
        : lambda.StartingPosition.TRIM_HORIZON,
  };
}
