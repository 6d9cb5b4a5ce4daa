import { fileURLToPath } from 'node:url';
import { Duration, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kinesis from 'aws-cdk-lib/aws-kinesis';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as ssm from 'aws-cdk-lib/aws-ssm';
import type { Construct } from 'constructs';
import { pacerAlarmSpecs } from '../shared/pacing/alarms.js';
import {
  type BucketKey,
  type FunctionKey,
  type FunctionSpec,
  functionEnvironment,
  type KeyType,
  type PacerSettings,
  parameterPrefix,
  physicalName,
  type RegionDescription,
  regionDescription,
  type StreamKey,
  type TableKey,
} from '../shared/region/resources.js';
import { LiveStateCache } from './constructs/cache.js';
import { PrivateNetwork } from './constructs/network.js';
import { PacelineFunction } from './constructs/paceline-function.js';
import { PacerAlarms } from './constructs/pacer-alarms.js';
import { acknowledgeFindings, acknowledgeIndexGrants, acknowledgeObjectPrefix } from './nag.js';

const projectRoot = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');

/** Props of {@link RegionalStack}. */
export interface RegionalStackProps extends StackProps {
  /** Cache node type. @default 'cache.r7g.large' */
  readonly cacheNodeType?: string;
  /** Pacer layout (shards, instances per shard, tick, lease TTL). @default defaultPacerSettings */
  readonly pacer?: Partial<PacerSettings>;
}

const attributeType: Record<KeyType, dynamodb.AttributeType> = {
  S: dynamodb.AttributeType.STRING,
  N: dynamodb.AttributeType.NUMBER,
  B: dynamodb.AttributeType.BINARY,
};

/**
 * One Paceline region. Everything it contains is enumerated from `shared/region/resources.ts`,
 * the same description the local runner provisions, so the two cannot drift.
 */
export class RegionalStack extends Stack {
  readonly tables: Record<TableKey, dynamodb.Table>;
  readonly streams: Record<StreamKey, kinesis.Stream>;
  readonly buckets: Record<BucketKey, s3.Bucket>;
  readonly functions: Record<FunctionKey, PacelineFunction>;
  /** The region description this stack was built from. */
  readonly description: RegionDescription;

  constructor(scope: Construct, id: string, props: RegionalStackProps) {
    super(scope, id, props);
    const regionResources = regionDescription({ ...(props.pacer ? { pacer: props.pacer } : {}) });
    this.description = regionResources;
    const key = new kms.Key(this, 'Key', {
      description: 'Paceline regional data key (tables, streams, cache, queues, logs)',
      enableKeyRotation: true,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    // CloudWatch Logs must be allowed to use the key for the encrypted log groups.
    key.addToResourcePolicy(
      new iam.PolicyStatement({
        principals: [new iam.ServicePrincipal(`logs.${this.region}.amazonaws.com`)],
        actions: ['kms:Encrypt*', 'kms:Decrypt*', 'kms:ReEncrypt*', 'kms:GenerateDataKey*', 'kms:Describe*'],
        resources: ['*'],
      }),
    );
    const network = new PrivateNetwork(this, 'Network', { key });
    const alarmTopic = new sns.Topic(this, 'Alarms', {
      displayName: 'Paceline alarms',
      masterKey: key,
      enforceSSL: true,
    });
    const cache = new LiveStateCache(this, 'Cache', {
      vpc: network.vpc,
      clientSecurityGroup: network.functionSecurityGroup,
      key,
      alarmTopic,
      ...(props.cacheNodeType ? { nodeType: props.cacheNodeType } : {}),
    });

    const tables = {} as Record<TableKey, dynamodb.Table>;
    for (const [tableKey, spec] of Object.entries(regionResources.tables) as [
      TableKey,
      (typeof regionResources.tables)[TableKey],
    ][]) {
      const table = new dynamodb.Table(this, `Table-${tableKey}`, {
        tableName: physicalName(spec.suffix),
        partitionKey: { name: spec.partitionKey.name, type: attributeType[spec.partitionKey.type] },
        sortKey: { name: spec.sortKey.name, type: attributeType[spec.sortKey.type] },
        billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
        encryption: dynamodb.TableEncryption.CUSTOMER_MANAGED,
        encryptionKey: key,
        pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
        deletionProtection: true,
        removalPolicy: RemovalPolicy.RETAIN,
        ...('ttlAttribute' in spec ? { timeToLiveAttribute: spec.ttlAttribute } : {}),
      });
      for (const index of 'indexes' in spec ? spec.indexes : []) {
        table.addGlobalSecondaryIndex({
          indexName: index.name,
          partitionKey: { name: index.partitionKey.name, type: attributeType[index.partitionKey.type] },
          ...(index.sortKey
            ? { sortKey: { name: index.sortKey.name, type: attributeType[index.sortKey.type] } }
            : {}),
          projectionType:
            index.projection === 'ALL' ? dynamodb.ProjectionType.ALL : dynamodb.ProjectionType.KEYS_ONLY,
        });
      }
      tables[tableKey] = table;
    }
    this.tables = tables;

    const streams = {} as Record<StreamKey, kinesis.Stream>;
    for (const [streamKey, spec] of Object.entries(regionResources.streams) as [
      StreamKey,
      (typeof regionResources.streams)[StreamKey],
    ][]) {
      streams[streamKey] = new kinesis.Stream(this, `Stream-${streamKey}`, {
        streamName: physicalName(spec.suffix),
        shardCount: spec.shardCount,
        retentionPeriod: Duration.hours(spec.retentionHours),
        encryption: kinesis.StreamEncryption.KMS,
        encryptionKey: key,
        removalPolicy: RemovalPolicy.RETAIN,
      });
    }
    this.streams = streams;

    const buckets = {} as Record<BucketKey, s3.Bucket>;
    for (const bucketKey of Object.keys(regionResources.buckets) as BucketKey[]) {
      // Name left to CloudFormation (bucket names are global); functions get it from their env.
      buckets[bucketKey] = new s3.Bucket(this, `Bucket-${bucketKey}`, {
        encryption: s3.BucketEncryption.KMS,
        encryptionKey: key,
        bucketKeyEnabled: true,
        enforceSSL: true,
        blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
        objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        versioned: true,
        removalPolicy: RemovalPolicy.RETAIN,
      });
    }
    this.buckets = buckets;

    const prefix = parameterPrefix(this.region);
    for (const [paramKey, spec] of Object.entries(regionResources.parameters)) {
      new ssm.StringParameter(this, `Parameter-${paramKey}`, {
        parameterName: `${prefix}${spec.path}`,
        stringValue: spec.initial(this.region),
        description: spec.purpose,
      });
    }

    const functions = {} as Record<FunctionKey, PacelineFunction>;
    for (const [fnKey, spec] of Object.entries(regionResources.functions) as [
      FunctionKey,
      (typeof regionResources.functions)[FunctionKey],
    ][]) {
      const fn = new PacelineFunction(this, `Function-${fnKey}`, {
        spec,
        entry: `${projectRoot}/${spec.entry}`,
        projectRoot,
        environment: functionEnvironment(spec, {
          region: this.region,
          tableName: (k) => tables[k].tableName,
          streamName: (k) => streams[k].streamName,
          bucketName: (k) => buckets[k].bucketName,
          redis: { nodes: cache.endpoint, mode: 'cluster', tls: true },
        }),
        vpc: network.vpc,
        securityGroup: network.functionSecurityGroup,
        key,
        alarmTopic,
        ...('source' in spec && spec.source ? { stream: streams[spec.source.stream] } : {}),
      });
      // Least privilege: exactly the access the description declares.
      for (const [tableKey, access] of Object.entries(spec.tables) as [TableKey, string][]) {
        const table = tables[tableKey];
        if (access === 'read') table.grantReadData(fn.function);
        else if (access === 'write') table.grantWriteData(fn.function);
        else table.grantReadWriteData(fn.function);
      }
      for (const streamKey of spec.writesStreams as readonly StreamKey[])
        streams[streamKey].grantWrite(fn.function);
      // Least privilege: object actions only under the function's own prefix (`<name>/…`, the
      // keys it writes), and the key only for what encryption/decryption of those objects needs.
      const used = (spec as FunctionSpec).buckets ?? {};
      for (const [bucketKey, access] of Object.entries(used) as [BucketKey, string][]) {
        const bucket = buckets[bucketKey];
        const actions = [
          ...(access === 'read' ? [] : ['s3:PutObject']),
          ...(access === 'write' ? [] : ['s3:GetObject']),
        ];
        fn.function.addToRolePolicy(
          new iam.PolicyStatement({ actions, resources: [bucket.arnForObjects(`${spec.name}/*`)] }),
        );
        key.grant(fn.function, ...(access === 'read' ? [] : ['kms:GenerateDataKey']), 'kms:Decrypt');
        acknowledgeObjectPrefix(this, bucket, spec.name);
      }
      if (spec.readsParameters) {
        // Exactly the region's described parameters (no prefix wildcard).
        fn.function.addToRolePolicy(
          new iam.PolicyStatement({
            actions: ['ssm:GetParameter', 'ssm:GetParameters'],
            resources: Object.values(regionResources.parameters).map((p) =>
              this.formatArn({
                service: 'ssm',
                resource: 'parameter',
                resourceName: `${prefix.slice(1)}${p.path}`,
              }),
            ),
          }),
        );
      }
      functions[fnKey] = fn;
    }
    this.functions = functions;
    new PacerAlarms(this, 'PacerAlarms', {
      specs: pacerAlarmSpecs(regionResources.settings.pacer, regionResources.functions.pacer.name),
      alarmTopic,
    });
    acknowledgeFindings(this);
    acknowledgeIndexGrants(
      this,
      Object.entries(tables)
        .filter(([k]) => 'indexes' in regionResources.tables[k as TableKey])
        .map(([, t]) => this.getLogicalId(t.node.defaultChild as dynamodb.CfnTable)),
    );
  }
}
