/**
 * The types of a region's description (resources.ts): tables, streams, buckets, alarms, functions
 * and parameters as data.
 */
import type { BucketKey, StreamKey, TableKey } from './region-catalog.js';

/** DynamoDB attribute type of a key attribute. */
export type KeyType = 'S' | 'N' | 'B';

/** A key attribute of a table or index. */
export interface KeyAttribute {
  readonly name: string;
  readonly type: KeyType;
}

/**
 * A global secondary index. Both the CDK stack and the local provisioning create it from here;
 * queries on it are eventually consistent (DynamoDB propagates GSI writes asynchronously).
 */
export interface IndexSpec {
  readonly name: string;
  readonly partitionKey: KeyAttribute;
  readonly sortKey?: KeyAttribute;
  /** Attributes copied into the index: everything (`ALL`) or only the keys. */
  readonly projection: 'ALL' | 'KEYS_ONLY';
  readonly purpose: string;
}

/** A DynamoDB table. Every table uses generic `pk`/`sk` names so domains own their key design. */
export interface TableSpec {
  /** Environment variable that carries the table's physical name into functions. */
  readonly envVar: string;
  /** Physical-name suffix; the full name is `paceline-<suffix>` (see {@link physicalName}). */
  readonly suffix: string;
  readonly partitionKey: KeyAttribute;
  readonly sortKey: KeyAttribute;
  /** Global secondary indexes. @default none */
  readonly indexes?: readonly IndexSpec[];
  /** Attribute holding an epoch-seconds expiry; DynamoDB TTL only reclaims storage, code checks expiry. */
  readonly ttlAttribute?: string;
  /**
   * `global`: a DynamoDB global table, one replica per Paceline region — every region's writes
   * reach every other region's replica, asynchronously, last writer wins per item. In AWS the
   * primary region's stack owns the `TableV2` and its replicas and the other regions' stacks
   * import it by name (docs/operations.md); locally `local/global-tables.ts` replicates between
   * the local regions with a configurable lag. `regional`: one independent table per region.
   * The only replication setting: the stack and the local runner both read it (required, so
   * every table says which it is).
   */
  readonly replication: 'global' | 'regional';
  /** What the table is for (shown in docs and the runner's banner). */
  readonly purpose: string;
}

/**
 * An S3 bucket. The physical name is left to CloudFormation (bucket names are global); functions
 * get it through `envVar`, the local runner names it `paceline-<suffix>` on its S3 emulator.
 */
export interface BucketSpec {
  readonly envVar: string;
  readonly suffix: string;
  readonly purpose: string;
}

/**
 * A CloudWatch alarm on one of a function's own metrics (namespace `Paceline`, dimension
 * `service` = the function name, as Powertools publishes them).
 */
export interface MetricAlarmSpec {
  /** Construct id suffix; stable. */
  readonly id: string;
  readonly metricName: string;
  readonly statistic: 'Maximum' | 'Sum' | 'Average';
  readonly periodSeconds: number;
  /** Alarm when the statistic is greater than or equal to this. */
  readonly threshold: number;
  readonly evaluationPeriods: number;
  /** A missing datapoint counts as breaching: the function stopped reporting. */
  readonly missingIsBreaching: boolean;
  readonly description: string;
}

/** A Kinesis data stream. */
export interface StreamSpec {
  readonly envVar: string;
  readonly suffix: string;
  /** Provisioned shard count (the local emulator creates the same number). */
  readonly shardCount: number;
  /** Retention; 24 h is the Kinesis minimum and covers a day of replay for reconciliation. */
  readonly retentionHours: number;
  readonly purpose: string;
}

/**
 * Lambda's Kinesis event-source-mapping settings. The same values configure the CDK
 * `KinesisEventSource` and the local poller (`local/esm/`), whose job is to reproduce
 * Lambda's semantics for them.
 */
export interface KinesisSourceSpec {
  readonly stream: StreamKey;
  /** Records per invocation. @default 100 */
  readonly batchSize: number;
  /** How long to gather records before invoking, seconds. @default 0 */
  readonly maxBatchingWindowSeconds: number;
  /** Split a failing batch in two and retry each half, isolating a poison record. */
  readonly bisectBatchOnFunctionError: boolean;
  /** Retries of a failing batch before it goes to the on-failure destination (-1 = until expiry). */
  readonly retryAttempts: number;
  /** Records older than this are sent to the on-failure destination instead of the function. */
  readonly maxRecordAgeSeconds: number;
  /** Always true: handlers return `batchItemFailures` so only the failed tail is retried. */
  readonly reportBatchItemFailures: true;
  readonly startingPosition: 'TRIM_HORIZON' | 'LATEST';
  /**
   * Concurrent batches per shard (Lambda's parallelization factor, 1–10); records of one
   * partition key stay in order. Set per stream in cdk.json (`streams.<stream>.parallelizationFactor`);
   * the local poller runs 1. @default 1
   */
  readonly parallelizationFactor?: number;
}

/** An EventBridge schedule that invokes a function (e.g. the pacer) with a fixed input. */
export interface ScheduleSpec {
  /** EventBridge rate; EventBridge cannot fire more often than once a minute. */
  readonly rateMinutes: number;
  /** One rule per instance; each rule's input carries its instance id (e.g. shard × replica). */
  readonly instances: readonly { readonly id: string; readonly input: Readonly<Record<string, unknown>> }[];
}

/** Access a function needs to a table. */
export type TableAccess = 'read' | 'write' | 'readwrite';

/** A Lambda function: where its code is, what it reads and writes, what triggers it. */
export interface FunctionSpec {
  /** Function name suffix and folder under `functions/`. */
  readonly name: string;
  /** Handler module, relative to the repository root; it must export `handler`. */
  readonly entry: string;
  readonly memoryMb: number;
  readonly timeoutSeconds: number;
  /**
   * Node and V8 flags the function's processes start with: `NODE_OPTIONS` from
   * `functionEnvironment`, so the same in AWS (where the construct puts `--enable-source-maps`
   * first), in the local runner's instances and in the benchmarks that measure the function.
   * @default none
   */
  readonly nodeOptions?: readonly string[];
  readonly source?: KinesisSourceSpec;
  readonly schedule?: ScheduleSpec;
  readonly tables: Readonly<Partial<Record<TableKey, TableAccess>>>;
  /** Streams the function writes to (e.g. replaying quarantined records). */
  readonly writesStreams: readonly StreamKey[];
  /** Buckets the function uses, with the access it needs. @default none */
  readonly buckets?: Readonly<Partial<Record<BucketKey, TableAccess>>>;
  /** Alarms on the function's own metrics, beyond the standard ones every function gets. @default none */
  readonly alarms?: readonly MetricAlarmSpec[];
  readonly usesRedis: boolean;
  /** Static settings passed as environment variables, identical in every region and locally. */
  readonly settings: Readonly<Record<string, string>>;
  /** Reads SSM parameters under the region's prefix (failover switch, leader overrides). */
  readonly readsParameters: boolean;
  /**
   * Concurrent executions reserved for (and capping) the function. @default none: the account's
   * unreserved pool
   */
  readonly reservedConcurrency?: number;
  readonly purpose: string;
}

/** An SSM parameter the region owns; the value is a plain string. */
export interface ParameterSpec {
  /** Path below the region's prefix, e.g. `publisher-region`. */
  readonly path: string;
  /** Initial value for the region; operators change it, deploys do not. */
  readonly initial: (region: string) => string;
  readonly purpose: string;
}
