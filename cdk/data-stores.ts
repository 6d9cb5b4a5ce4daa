/**
 * The region's data stores from its description: tables (regional, or global and owned by the
 * primary region), streams sized from the settings, buckets. Created in the region's stack itself
 * (`scope`), so their logical ids are the stack's.
 */
import { Duration, RemovalPolicy, type Stack } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as kinesis from 'aws-cdk-lib/aws-kinesis';
import type * as kms from 'aws-cdk-lib/aws-kms';
import * as s3 from 'aws-cdk-lib/aws-s3';
import type { DeployedRegion } from '../shared/region/deployment.js';
import type { ResourceNames } from '../shared/region/names.js';
import {
  type BucketKey,
  type IndexSpec,
  isGlobal,
  type KeyType,
  type RegionDescription,
  type StreamKey,
  type TableKey,
  type TableSpec,
} from '../shared/region/resources.js';
import { acknowledgeGuard, acknowledgeNag } from './nag.js';

const attributeType: Record<KeyType, dynamodb.AttributeType> = {
  S: dynamodb.AttributeType.STRING,
  N: dynamodb.AttributeType.NUMBER,
  B: dynamodb.AttributeType.BINARY,
};

/** The described tables: regional ones here, global ones owned by the primary region. */
export function dataTables(
  scope: Stack,
  d: RegionDescription,
  key: kms.IKey,
  isPrimary: boolean,
  peerRegions: readonly DeployedRegion[],
): Record<TableKey, dynamodb.ITable> {
  const tables = {} as Record<TableKey, dynamodb.ITable>;
  for (const [tableKey, spec] of Object.entries(d.tables) as [TableKey, TableSpec][]) {
    const tableName = d.names.resource(spec.suffix);
    if (isGlobal(spec)) {
      tables[tableKey] = isPrimary
        ? globalTable(scope, tableKey, spec, tableName, key, peerRegions, d.names)
        : // Global tables are owned by the primary region's stack (its replicas are here);
          // this stack refers to the local replica by name, encrypted with this region's key.
          dynamodb.TableV2.fromTableAttributes(scope, `Table-${tableKey}`, {
            tableName,
            encryptionKey: key,
          });
      continue;
    }
    const table = new dynamodb.Table(scope, `Table-${tableKey}`, {
      tableName,
      partitionKey: { name: spec.partitionKey.name, type: attributeType[spec.partitionKey.type] },
      sortKey: { name: spec.sortKey.name, type: attributeType[spec.sortKey.type] },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      encryption: dynamodb.TableEncryption.CUSTOMER_MANAGED,
      encryptionKey: key,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      deletionProtection: true,
      removalPolicy: RemovalPolicy.RETAIN,
      ...(spec.ttlAttribute ? { timeToLiveAttribute: spec.ttlAttribute } : {}),
    });
    for (const index of spec.indexes ?? []) table.addGlobalSecondaryIndex(indexProps(index));
    tables[tableKey] = table;
  }
  return tables;
}

/**
 * A global table owned by this (the primary) region: a TableV2 with one replica per peer
 * region, each replica encrypted with its region's Paceline key (by alias), PITR everywhere.
 */
function globalTable(
  scope: Stack,
  tableKey: TableKey,
  spec: TableSpec,
  tableName: string,
  key: kms.IKey,
  peers: readonly DeployedRegion[],
  names: ResourceNames,
): dynamodb.TableV2 {
  return new dynamodb.TableV2(scope, `Table-${tableKey}`, {
    tableName,
    partitionKey: { name: spec.partitionKey.name, type: attributeType[spec.partitionKey.type] },
    sortKey: { name: spec.sortKey.name, type: attributeType[spec.sortKey.type] },
    billing: dynamodb.Billing.onDemand(),
    encryption: dynamodb.TableEncryptionV2.customerManagedKey(
      key,
      Object.fromEntries(
        peers.map((p) => [
          p.region,
          `arn:${scope.partition}:kms:${p.region}:${scope.account}:${names.keyAliasName}`,
        ]),
      ),
    ),
    pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
    deletionProtection: true,
    removalPolicy: RemovalPolicy.RETAIN,
    replicas: peers.map((p) => ({ region: p.region })),
    ...(spec.ttlAttribute ? { timeToLiveAttribute: spec.ttlAttribute } : {}),
    globalSecondaryIndexes: (spec.indexes ?? []).map(indexProps),
  });
}

/** The described streams, sized from the settings, encrypted with the region's key. */
export function dataStreams(
  scope: Stack,
  d: RegionDescription,
  key: kms.IKey,
): Record<StreamKey, kinesis.Stream> {
  const streams = {} as Record<StreamKey, kinesis.Stream>;
  const onDemand = d.settings.streams.capacityMode === 'on-demand';
  for (const [streamKey, spec] of Object.entries(d.streams) as [
    StreamKey,
    RegionDescription['streams'][StreamKey],
  ][]) {
    const stream = new kinesis.Stream(scope, `Stream-${streamKey}`, {
      streamName: d.names.resource(spec.suffix),
      ...(onDemand
        ? { streamMode: kinesis.StreamMode.ON_DEMAND }
        : { streamMode: kinesis.StreamMode.PROVISIONED, shardCount: spec.shardCount }),
      retentionPeriod: Duration.hours(spec.retentionHours),
      encryption: kinesis.StreamEncryption.KMS,
      encryptionKey: key,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    acknowledgeNag(
      stream,
      'AwsSolutions-KDS3',
      'Encrypted with the customer-managed regional key (rotation on), stronger than the aws/kinesis key the rule prefers.',
    );
    streams[streamKey] = stream;
  }
  return streams;
}

/** The described buckets: private, KMS, TLS only, versioned, old versions expiring. */
export function dataBuckets(scope: Stack, d: RegionDescription, key: kms.IKey): Record<BucketKey, s3.Bucket> {
  const buckets = {} as Record<BucketKey, s3.Bucket>;
  for (const bucketKey of Object.keys(d.buckets) as BucketKey[]) {
    // Name left to CloudFormation (bucket names are global); functions get it from their env.
    const bucket = new s3.Bucket(scope, `Bucket-${bucketKey}`, {
      encryption: s3.BucketEncryption.KMS,
      encryptionKey: key,
      bucketKeyEnabled: true,
      enforceSSL: true,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      versioned: true,
      removalPolicy: RemovalPolicy.RETAIN,
      lifecycleRules: [
        {
          id: 'noncurrent-versions',
          // A payload overwritten or deleted (after its replay) stays recoverable for 30 days.
          noncurrentVersionExpiration: Duration.days(30),
          abortIncompleteMultipartUploadAfter: Duration.days(1),
        },
      ],
    });
    const audit =
      'Written only by the stream functions (each under its own prefix, by IAM), read by operators replaying dead letters; ' +
      'object-level access is auditable with CloudTrail S3 data events, an account-level trail this stack does not create ' +
      '(docs/operations.md), rather than with server access logs in a second bucket that would need the same.';
    acknowledgeNag(bucket, 'AwsSolutions-S1', audit);
    acknowledgeGuard(bucket, 's3_bucket_logging_enabled_check', audit);
    acknowledgeGuard(
      bucket,
      's3_event_notifications_enabled_check',
      'Nothing consumes object events: each payload is written with its dead-letter item, which is the record; the RecordsQuarantined metric and its alarm are the notification.',
    );
    acknowledgeGuard(
      bucket,
      's3_bucket_object_lock_enabled_check',
      'Object Lock (WORM retention) is for records that must not change for a period; dead-letter payloads are a working set operators replay and then delete. Versioning keeps an overwritten or deleted payload for the 30-day noncurrent window.',
    );
    buckets[bucketKey] = bucket;
  }
  return buckets;
}

/** A described index as CDK index props (the same for Table and TableV2). */
function indexProps(
  index: IndexSpec,
): dynamodb.GlobalSecondaryIndexProps & dynamodb.GlobalSecondaryIndexPropsV2 {
  return {
    indexName: index.name,
    partitionKey: { name: index.partitionKey.name, type: attributeType[index.partitionKey.type] },
    ...(index.sortKey
      ? { sortKey: { name: index.sortKey.name, type: attributeType[index.sortKey.type] } }
      : {}),
    projectionType:
      index.projection === 'ALL' ? dynamodb.ProjectionType.ALL : dynamodb.ProjectionType.KEYS_ONLY,
  };
}
