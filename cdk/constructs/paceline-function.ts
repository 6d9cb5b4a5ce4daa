import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as kinesis from 'aws-cdk-lib/aws-kinesis';
import type * as kms from 'aws-cdk-lib/aws-kms';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as sns from 'aws-cdk-lib/aws-sns';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { LUA_BUNDLE_CONDITIONS, LUA_BUNDLE_LOADER } from '../../shared/redis/scripts/bundling.js';
import type { AccessStatement } from '../../shared/region/access.js';
import type { ResourceNames } from '../../shared/region/names.js';
import type { FunctionSpec, KinesisSourceSpec } from '../../shared/region/resources.js';
import { acknowledgeGuard, acknowledgeNag } from '../nag.js';

/** Props of {@link PacelineFunction}. */
export interface PacelineFunctionProps {
  /** The function's entry in the region description. */
  readonly spec: FunctionSpec;
  /** The deployment's names (function, log group, on-failure queue). */
  readonly names: ResourceNames;
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
  /**
   * Everything the role may do (shared/region/access.ts, resolved for this stack): statements
   * with resources go into the role's `Access` policy, those on `*` (actions without
   * resource-level permissions) into `NoResourceLevel`, acknowledged there alone.
   */
  readonly access: readonly AccessStatement[];
  /** The stream of `spec.source`, when the function is stream-triggered. */
  readonly stream?: kinesis.IStream;
  /** Alarm when the oldest unprocessed record is older than this. @default 60 s */
  readonly iteratorAgeAlarmThreshold?: Duration;
  /** Log retention (AWS's Control Tower rule asks for at least a year). @default one year */
  readonly logRetention?: logs.RetentionDays;
  /** Active X-Ray tracing (the role's `NoResourceLevel` policy must then allow X-Ray). @default true */
  readonly activeTracing?: boolean;
}

/**
 * A Paceline Lambda function in the VPC, bundled with esbuild (no Docker), with its own role
 * holding exactly its described access (no AWS-managed policies), its own log group, Lambda's
 * asynchronous retries off, and standard alarms. A spec with a schedule without instances gets
 * its EventBridge rule here (the pacer's per-instance rules are laid out by the stack,
 * cdk/constructs/pacer-shards.ts); a Kinesis source gets its event-source mapping with the safe
 * defaults from the spec (bisect, bounded retries, max record age, partial batch responses,
 * parallelization factor), an encrypted on-failure queue, and alarms on iterator age,
 * on-failure messages, quarantined records and errors.
 */
export class PacelineFunction extends Construct {
  readonly function: nodejs.NodejsFunction;
  /** The function's own role. */
  readonly role: iam.Role;
  /** The role's policy of resource-level statements. */
  readonly accessPolicy: iam.Policy;
  /** The role's policy of statements on `*` (VPC network interfaces, X-Ray). */
  readonly noResourceLevelPolicy: iam.Policy;
  readonly logGroup: logs.LogGroup;
  /** On-failure destination of the event source (batch metadata of exhausted batches). */
  readonly onFailureQueue?: sqs.Queue;

  constructor(scope: Construct, id: string, props: PacelineFunctionProps) {
    super(scope, id);
    const { spec, names } = props;
    this.logGroup = new logs.LogGroup(this, 'Logs', {
      logGroupName: names.logGroupName(spec.name),
      retention: props.logRetention ?? logs.RetentionDays.ONE_YEAR,
      encryptionKey: props.key,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    this.role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `${names.functionName(spec.name)}: exactly its described access (shared/region/access.ts)`,
    });
    const statement = (s: AccessStatement) =>
      new iam.PolicyStatement({
        sid: s.sid,
        actions: [...s.actions],
        resources: [...s.resources],
        ...(s.condition ? { conditions: s.condition as Record<string, unknown> } : {}),
      });
    this.accessPolicy = new iam.Policy(this, 'Access', {
      roles: [this.role],
      statements: props.access.filter((s) => !s.resources.includes('*')).map(statement),
    });
    this.noResourceLevelPolicy = new iam.Policy(this, 'NoResourceLevel', {
      roles: [this.role],
      statements: props.access.filter((s) => s.resources.includes('*')).map(statement),
    });
    acknowledgeNag(
      this.noResourceLevelPolicy,
      'AwsSolutions-IAM5[Resource::*]',
      'Only the actions without resource-level permissions Lambda requires of this role: the VPC network-interface actions ' +
        '(ec2:CreateNetworkInterface, DescribeNetworkInterfaces, DescribeSubnets, DeleteNetworkInterface, Assign/UnassignPrivateIpAddresses) ' +
        'and X-Ray trace upload (xray:PutTraceSegments, PutTelemetryRecords) for active tracing.',
    );
    this.function = new nodejs.NodejsFunction(this, 'Function', {
      functionName: names.functionName(spec.name),
      description: spec.purpose,
      entry: props.entry,
      handler: 'handler',
      projectRoot: props.projectRoot,
      depsLockFilePath: `${props.projectRoot}/package-lock.json`,
      runtime: lambda.Runtime.NODEJS_24_X,
      architecture: lambda.Architecture.ARM_64,
      memorySize: spec.memoryMb,
      timeout: Duration.seconds(spec.timeoutSeconds),
      // The bundle's source maps, then the description's own flags (functionEnvironment).
      environment: {
        ...props.environment,
        NODE_OPTIONS: ['--enable-source-maps', props.environment.NODE_OPTIONS].filter(Boolean).join(' '),
      },
      environmentEncryption: props.key,
      role: this.role,
      vpc: props.vpc,
      vpcSubnets: { subnetType: ec2.SubnetType.PRIVATE_ISOLATED },
      securityGroups: [props.securityGroup],
      logGroup: this.logGroup,
      ...(spec.reservedConcurrency === undefined
        ? {}
        : { reservedConcurrentExecutions: spec.reservedConcurrency }),
      bundling: {
        format: nodejs.OutputFormat.ESM,
        minify: true,
        sourceMap: true,
        target: 'node22',
        // ioredis and friends are CommonJS: give the ESM bundle a `require`.
        banner: "import { createRequire } from 'node:module';const require = createRequire(import.meta.url);",
        externalModules: ['@aws-sdk/*'],
        // The Lua scripts go inside the bundle as text (shared/redis/scripts/bundling.ts).
        loader: { ...LUA_BUNDLE_LOADER },
        esbuildArgs: { '--conditions': LUA_BUNDLE_CONDITIONS.join(',') },
      },
    });
    // Tracing set on the resource, not through CDK's `tracing` prop, which would add its own
    // X-Ray statement to the role (the role has exactly the described access).
    if (props.activeTracing ?? true)
      (this.function.node.defaultChild as lambda.CfnFunction).tracingConfig = { mode: 'Active' };
    // Lambda validates the role when it creates the function (VPC) and the event source (stream).
    this.function.node.addDependency(this.accessPolicy, this.noResourceLevelPolicy);
    // Lambda's own retries of a failed asynchronous invocation are off (its default is 2): a
    // scheduled invocation the next minute supersedes is worthless late, a re-run pacer minute
    // would tick twice. Stream functions are invoked synchronously by their event source, whose
    // retries are the source's own (spec.source).
    this.function.configureAsyncInvoke({ retryAttempts: 0, maxEventAge: Duration.seconds(60) });
    this.alarms(props);
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
    if (spec.source) this.onFailureQueue = this.eventSource(props, spec.source);
  }

  private notify(a: cloudwatch.Alarm, topic: sns.ITopic): cloudwatch.Alarm {
    a.addAlarmAction(new actions.SnsAction(topic));
    return a;
  }

  /** Errors, and the spec's own metric alarms. */
  private alarms(props: PacelineFunctionProps): void {
    const { spec } = props;
    this.notify(
      new cloudwatch.Alarm(this, 'ErrorsAlarm', {
        alarmDescription: `${spec.name}: invocation errors (whole batches failing)`,
        metric: this.function.metricErrors({ period: Duration.minutes(1) }),
        threshold: 1,
        evaluationPeriods: 5,
        datapointsToAlarm: 3,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
      props.alarmTopic,
    );
    for (const alarm of spec.alarms ?? []) {
      this.notify(
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
        props.alarmTopic,
      );
    }
  }

  /**
   * The Kinesis event-source mapping as an L1 resource: CDK's event-source classes would add
   * their own grants to the role, which holds exactly the described access (the `EventSource`
   * and `OnFailure` statements of shared/region/access.ts).
   */
  private eventSource(props: PacelineFunctionProps, source: KinesisSourceSpec): sqs.Queue {
    const { spec, names } = props;
    if (!props.stream) throw new Error(`${spec.name} has a Kinesis source but no stream was given`);
    const queue = new sqs.Queue(this, 'OnFailure', {
      // A known name: `dead-letters redrive` finds the queue of a function by it.
      queueName: names.onFailureQueueName(spec.name),
      retentionPeriod: Duration.days(14),
      encryption: sqs.QueueEncryption.KMS,
      encryptionMasterKey: props.key,
      enforceSSL: true,
    });
    const why =
      'This queue is itself a dead-letter store: the on-failure destination of a Kinesis event source, holding the ' +
      'metadata (shard, sequence range) of batches Lambda gave up on. Nothing consumes it automatically: operators list ' +
      'it (ReceiveMessage with visibility 0) and `dead-letters redrive` deletes what it re-put, so there is no ' +
      'poison-message loop a second queue would break, and a redrive policy would move messages away after N listings.';
    acknowledgeNag(queue, 'AwsSolutions-SQS3', why);
    acknowledgeGuard(queue, 'sqs_dlq_check', why);
    const mapping = new lambda.CfnEventSourceMapping(this, 'Source', {
      functionName: this.function.functionName,
      eventSourceArn: props.stream.streamArn,
      ...eventSourceProps(source),
      destinationConfig: { onFailure: { destination: queue.queueArn } },
    });
    mapping.node.addDependency(this.accessPolicy);
    this.notify(
      new cloudwatch.Alarm(this, 'IteratorAgeAlarm', {
        alarmDescription: `${spec.name}: falling behind its stream`,
        metric: this.function.metric('IteratorAge', { statistic: 'Maximum', period: Duration.minutes(1) }),
        threshold: (props.iteratorAgeAlarmThreshold ?? Duration.seconds(60)).toMilliseconds(),
        evaluationPeriods: 3,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
      props.alarmTopic,
    );
    this.notify(
      new cloudwatch.Alarm(this, 'OnFailureAlarm', {
        alarmDescription: `${spec.name}: batches gave up after retries / max age (see the on-failure queue)`,
        metric: queue.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1) }),
        threshold: 1,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
      props.alarmTopic,
    );
    this.notify(
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
      props.alarmTopic,
    );
    return queue;
  }
}

/** Maps the description's event-source settings onto the mapping's properties (no defaults of CDK's own). */
export function eventSourceProps(
  source: KinesisSourceSpec,
): Omit<lambda.CfnEventSourceMappingProps, 'functionName' | 'eventSourceArn'> {
  return {
    batchSize: source.batchSize,
    maximumBatchingWindowInSeconds: source.maxBatchingWindowSeconds,
    bisectBatchOnFunctionError: source.bisectBatchOnFunctionError,
    maximumRetryAttempts: source.retryAttempts,
    maximumRecordAgeInSeconds: source.maxRecordAgeSeconds,
    functionResponseTypes: source.reportBatchItemFailures ? ['ReportBatchItemFailures'] : [],
    parallelizationFactor: source.parallelizationFactor ?? 1,
    startingPosition: source.startingPosition,
  };
}
