/**
 * THE description of one Paceline region's resources. Both the CDK stack (`cdk/`) and the local
 * runner (`local/`) are built from this object, so names, keys, shard counts, event-source
 * settings and function environments cannot drift between the cloud and a laptop.
 *
 * Nothing here touches AWS: it is data plus pure functions over it.
 */

import { REGIONS_ENV } from '../aws/endpoints.js';
import { PacelineError } from '../errors.js';
import { invocationWindowMs } from '../pacing/invocation.js';
import { defaultNames, InvalidStageError, type ResourceNames, stageNames } from './names.js';

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

const tables = {
  budgets: {
    envVar: 'BUDGETS_TABLE',
    suffix: 'budgets',
    partitionKey: { name: 'pk', type: 'S' },
    sortKey: { name: 'sk', type: 'S' },
    indexes: [
      {
        name: 'by-pacer-shard',
        // `<N>:<shard>` written by every BudgetRepository write (shared/pacing/shard.ts); a pacer
        // queries only its own shard, incrementally by `updatedAt`, never scanning the table.
        partitionKey: { name: 'pacerShard', type: 'S' },
        sortKey: { name: 'updatedAt', type: 'N' },
        projection: 'ALL',
        purpose: "A pacer shard's accounts, campaigns and plans, newest change last.",
      },
    ],
    // One budget across regions (docs/pacing.md, "Many regions"): every region paces the same plans.
    replication: 'global',
    purpose: 'The ads database: accounts, campaigns, budget plans (integer micros, time zone, pacing mode).',
  },
  regionSpend: {
    envVar: 'REGION_SPEND_TABLE',
    suffix: 'region-spend',
    // pk `<N>:<shard>`, sk the region whose cache the summary describes: one item per (shard,
    // region), written only by the pacer that publishes into that region's cache.
    partitionKey: { name: 'pk', type: 'S' },
    sortKey: { name: 'sk', type: 'S' },
    purpose:
      "Per-region spend summaries of every plan-day (spend, full-speed demand), written every tick by each region's publishing pacer; the input of the region shares.",
    // Every region reads every other region's summaries: a region's share needs all regions' spend.
    replication: 'global',
  },
  spendLedger: {
    envVar: 'SPEND_LEDGER_TABLE',
    suffix: 'spend-ledger',
    partitionKey: { name: 'pk', type: 'S' },
    sortKey: { name: 'sk', type: 'S' },
    ttlAttribute: 'expiresAt',
    // Global: every region's wins are durable in every region (DESIGN.md requirement 9). Items name
    // the region that booked them; plan-day markers and outbox intents are keyed per region, so only
    // a bid booked by two regions within the replication lag is ever written twice (last writer
    // wins, counted once after a rebuild): docs/spend.md, "The ledger contract".
    replication: 'global',
    purpose:
      'Durable exactly-once ledger of confirmed spend, one item per bid; source of truth for reconcile.',
  },
  deadLetters: {
    envVar: 'DEAD_LETTER_TABLE',
    suffix: 'dead-letters',
    partitionKey: { name: 'pk', type: 'S' },
    sortKey: { name: 'sk', type: 'S' },
    // Regional: a record is quarantined, listed and replayed in the region whose stream it came from.
    replication: 'regional',
    purpose: 'Quarantined (malformed / poison) records with their reason; listable and replayable.',
  },
  leases: {
    envVar: 'LEASES_TABLE',
    suffix: 'leases',
    partitionKey: { name: 'pk', type: 'S' },
    sortKey: { name: 'sk', type: 'S' },
    // Regional: each region elects its own publisher per shard (the publish switch is SSM's).
    replication: 'regional',
    purpose: 'Leader leases of pacer shards (conditional writes, expiry, monotonically increasing epoch).',
  },
} as const satisfies Record<string, TableSpec>;

const streams = {
  actions: {
    envVar: 'ACTIONS_STREAM',
    suffix: 'actions',
    shardCount: 2,
    retentionHours: 24,
    purpose: 'User-action events (impressions, clicks, …) from ad servers, for counting.',
  },
  spend: {
    envVar: 'SPEND_STREAM',
    suffix: 'spend',
    shardCount: 2,
    retentionHours: 24,
    purpose: 'Bid, win (billing) and loss notices, for spend tracking.',
  },
} as const satisfies Record<string, StreamSpec>;

const buckets = {
  deadLetterPayloads: {
    envVar: 'DEAD_LETTER_BUCKET',
    suffix: 'dead-letter-payloads',
    purpose:
      'Payloads of quarantined records too large for a dead-letter item (Kinesis records reach 1 MB, items 400 KB).',
  },
} as const satisfies Record<string, BucketSpec>;

/** Whether a table is a DynamoDB global table (replicated to every region); the one reading of `replication`. */
export function isGlobal(spec: TableSpec): boolean {
  return spec.replication === 'global';
}

/** Keys of the region's buckets. */
export type BucketKey = keyof typeof buckets;

/** Keys of the region's tables. */
export type TableKey = keyof typeof tables;
/** Keys of the region's streams. */
export type StreamKey = keyof typeof streams;

/**
 * Safe stream defaults (aws-solutions-constructs style): bisect on error, bounded retries, a
 * maximum record age, partial batch responses. A record can therefore neither block a shard
 * forever nor vanish: after the retries it lands in the on-failure destination with its metadata.
 */
export const safeKinesisDefaults = {
  batchSize: 100,
  maxBatchingWindowSeconds: 1,
  bisectBatchOnFunctionError: true,
  retryAttempts: 5,
  maxRecordAgeSeconds: 3600,
  reportBatchItemFailures: true,
  startingPosition: 'TRIM_HORIZON',
} as const satisfies Omit<KinesisSourceSpec, 'stream'>;

/**
 * In-flight lifetime T and slot width, shared by every function that books spend; ad servers'
 * budget guards must use the same values (a guard with another slot width refuses to run).
 */
const inFlightSettings = { IN_FLIGHT_TTL_MS: String(10 * 60_000), IN_FLIGHT_SLOT_MS: String(60_000) };

/**
 * The convergence guarantee of the spend outbox (docs/spend.md): a win in the ledger is in the
 * live counters at most this long after Redis accepts writes again (sweep every minute, intents
 * older than the grace). The alarm fires when the oldest pending win is older than this.
 */
export const SPEND_CONVERGENCE_SECONDS = 180;

const functions = {
  ingestActions: {
    name: 'ingest-actions',
    entry: 'functions/ingest-actions/handler.ts',
    memoryMb: 1024,
    timeoutSeconds: 60,
    source: { ...safeKinesisDefaults, stream: 'actions', batchSize: 500 },
    tables: { deadLetters: 'write' },
    writesStreams: [],
    buckets: { deadLetterPayloads: 'write' },
    usesRedis: true,
    // Retention of user-action events (30 by default, up to 90) and the dedup window (one day by
    // default: the same event identity within it counts once): docs/counting.md.
    settings: { COUNTING_RETENTION_DAYS: '30', COUNTING_DEDUP_WINDOW_MS: String(24 * 60 * 60_000) },
    readsParameters: false,
    purpose: 'Decode, validate, deduplicate and store user-action events for counting.',
  },
  trackSpend: {
    name: 'track-spend',
    entry: 'functions/track-spend/handler.ts',
    memoryMb: 1024,
    timeoutSeconds: 60,
    source: { ...safeKinesisDefaults, stream: 'spend', batchSize: 200 },
    tables: { budgets: 'read', spendLedger: 'readwrite', deadLetters: 'write' },
    writesStreams: [],
    buckets: { deadLetterPayloads: 'write' },
    usesRedis: true,
    // In-flight lifetime T and slot width: docs/spend.md.
    settings: inFlightSettings,
    readsParameters: false,
    purpose: 'Exactly-once confirmed spend (ledger + live counters), release of in-flight amounts.',
  },
  sweepSpend: {
    name: 'sweep-spend',
    entry: 'functions/sweep-spend/handler.ts',
    memoryMb: 512,
    timeoutSeconds: 60,
    // Every minute, one rule without input (EventBridge's Scheduled Event).
    schedule: { rateMinutes: 1, instances: [] },
    tables: { budgets: 'read', spendLedger: 'readwrite' },
    writesStreams: [],
    usesRedis: true,
    settings: { ...inFlightSettings, SWEEP_GRACE_MS: '10000' },
    readsParameters: false,
    alarms: [
      {
        id: 'Convergence',
        metricName: 'SpendOutboxOldestAgeSeconds',
        statistic: 'Maximum',
        periodSeconds: 60,
        threshold: SPEND_CONVERGENCE_SECONDS,
        evaluationPeriods: 2,
        missingIsBreaching: true,
        description:
          `sweep-spend: a win has been in the ledger but not in the live counters for over ${SPEND_CONVERGENCE_SECONDS} s ` +
          '(guarantee: applied within that time after Redis accepts writes again) — Redis refusing writes, or ' +
          'the sweeper failing or not running. Guards may overspend by the pending amount meanwhile.',
      },
    ],
    purpose:
      'Applies wins the ledger holds but the live counters never confirmed (spend outbox), so counters converge without an operator.',
  },
} as const satisfies Record<string, FunctionSpec>;

const parameters = {
  publisherRegion: {
    path: 'publisher-region',
    initial: (region: string) => region,
    purpose: "Which region's pacer publishes into this region's cache (cross-region failover switch).",
  },
} as const satisfies Record<string, ParameterSpec>;

/**
 * The pacer's layout and cadence in a region: typed settings, not constants. The schedule
 * instances (one EventBridge rule per shard × instance), the per-shard leader-override parameters
 * and the pacer's environment are all derived from them, by the CDK stack and the local runner
 * alike ({@link regionDescription}).
 */
export interface PacerSettings {
  /**
   * Shards N: an account belongs to shard fnv1a32(utf8(accountId)) mod N. Changing N needs the
   * re-shard procedure of docs/pacing.md (budget items carry their shard). @default 24
   */
  readonly shards: number;
  /** Instances per shard: all compute every tick, one publishes. @default 3 */
  readonly instancesPerShard: number;
  /** Tick length, ms (parameters are recomputed and published every tick). @default 10_000 */
  readonly tickMs: number;
  /**
   * Lease time-to-live, ms: a dead leader is replaced within this plus one tick. At least two
   * ticks, so one slow tick does not lose the lease. @default 25_000
   */
  readonly leaseTtlMs: number;
  /**
   * The schedule period an invocation covers, ms: EventBridge's minute. Only the local runner
   * lowers it (with the scheduler's `msPerMinute`) so tests run a "minute" of ticks fast.
   * @default 60_000
   */
  readonly minuteMs: number;
  /**
   * The pacer function's memory, MB (Lambda gives CPU in proportion: 1,769 MB is one vCPU).
   * Deployment only (the pacer's own environment does not carry it). @default {@link DEFAULT_PACER_MEMORY_MB}
   */
  readonly memoryMb?: number;
  /**
   * Concurrent executions reserved for the pacer: at least shards × instancesPerShard (each
   * instance runs about a minute every minute). Deployment only. @default none (unreserved)
   */
  readonly reservedConcurrency?: number;
}

/**
 * The pacer's default memory, MB: sized as one pacer's measured peak over a cold takeover and
 * steady ticks at 100,000 campaigns (`pacerPeakRssMb`, then 1,670 MiB) with 30 % headroom — the
 * peak now measures 2,201 MiB (docs/operations.md, "Pacer memory"), so this is to be re-derived;
 * it also gives more than the full vCPU (1,769 MB) the cold and takeover ticks need to fit in a
 * 10 s tick (docs/operations.md, "Pacer memory").
 */
export const DEFAULT_PACER_MEMORY_MB = 2240;

/** The pacer in AWS: 24 shards × 3 instances, 10 s ticks (the seed's layout). */
export const defaultPacerSettings: PacerSettings = {
  shards: 24,
  instancesPerShard: 3,
  tickMs: 10_000,
  leaseTtlMs: 25_000,
  minuteMs: 60_000,
  memoryMb: DEFAULT_PACER_MEMORY_MB,
};

/** The local runner's default: 4 shards × 3 instances (12 processes per region instead of 72). */
export const localPacerSettings: PacerSettings = { ...defaultPacerSettings, shards: 4 };

/** Thrown for region settings that cannot work; the message says which and why. */
export class InvalidRegionSettingsError extends PacelineError {
  override readonly name: string = 'InvalidRegionSettingsError';
  override readonly code: string = 'region.invalid-settings';
  /**
   * @param setting the setting at fault, as its path in the settings (e.g. `pacer.shards`,
   *   `streams.actions.shards`), so the deployment can name the cdk.json key it came from
   */
  constructor(
    message: string,
    readonly setting?: string,
  ) {
    super(message);
  }
}

/** Thrown for pacer settings that cannot work; the message says which and why. */
export class InvalidPacerSettingsError extends InvalidRegionSettingsError {
  override readonly name: string = 'InvalidPacerSettingsError';
  override readonly code: string = 'region.invalid-pacer-settings';
}

/** Validates pacer settings (whole numbers, ticks dividing the minute, a lease of ≥ 2 ticks). */
export function validatePacerSettings(s: PacerSettings): PacerSettings {
  const whole = (name: string, v: number, min: number, max: number) => {
    if (!Number.isSafeInteger(v) || v < min || v > max)
      throw new InvalidPacerSettingsError(
        `pacer ${name} = ${v}: give a whole number from ${min} to ${max}.`,
        `pacer.${name}`,
      );
  };
  whole('shards', s.shards, 1, 256);
  whole('instancesPerShard', s.instancesPerShard, 1, 9);
  whole('tickMs', s.tickMs, 100, 60_000);
  whole('minuteMs', s.minuteMs, s.tickMs, 3_600_000);
  whole('leaseTtlMs', s.leaseTtlMs, 2 * s.tickMs, 600_000);
  if (s.minuteMs % s.tickMs !== 0)
    throw new InvalidPacerSettingsError(
      `pacer tickMs ${s.tickMs} must divide minuteMs ${s.minuteMs}: ticks sit on wall-clock boundaries.`,
      'pacer.tickMs',
    );
  // Lambda's memory range.
  if (s.memoryMb !== undefined) whole('memoryMb', s.memoryMb, 128, 10_240);
  if (s.reservedConcurrency !== undefined) {
    const instances = s.shards * s.instancesPerShard;
    if (!Number.isSafeInteger(s.reservedConcurrency) || s.reservedConcurrency < instances)
      throw new InvalidPacerSettingsError(
        `pacer reservedConcurrency = ${s.reservedConcurrency}: give a whole number of at least shards × instancesPerShard = ${instances} ` +
          '(each instance runs about a minute every minute; fewer leaves instances throttled), or leave it out.',
        'pacer.reservedConcurrency',
      );
  }
  return s;
}

/** Environment variables carrying {@link PacerSettings} into the pacer (and printed for the CLI). */
export const pacerEnv = {
  shards: 'PACER_SHARDS',
  instancesPerShard: 'PACER_INSTANCES_PER_SHARD',
  tickMs: 'PACER_TICK_MS',
  leaseTtlMs: 'PACER_LEASE_TTL_MS',
  minuteMs: 'PACER_MINUTE_MS',
} as const satisfies Record<Exclude<keyof PacerSettings, 'memoryMb' | 'reservedConcurrency'>, string>;

/** Id of a pacer instance, as in its rule name and lease holder: `s<shard>-i<instance>`. */
export function pacerInstanceId(shard: number, instance: number): string {
  return `s${shard}-i${instance}`;
}

/** The input EventBridge passes to one pacer instance (a type alias: it is also a JSON record). */
export type PacerInput = { readonly shard: number; readonly instance: number };

/** SSM path (below the region prefix) under which every shard's leader override lives. */
export const LEADER_OVERRIDE_PATH_PREFIX = 'pacer/leader-override/';

/** SSM path (below the region prefix) of a shard's leader override: an instance id or `auto`. */
export function leaderOverridePath(shard: number): string {
  return `${LEADER_OVERRIDE_PATH_PREFIX}${shard}`;
}

/** SSM path (below the region prefix) of the shard count N writers must use. */
export const pacerShardsPath = 'pacer/shards';

/** Leader-override value meaning "the lease holder publishes". */
export const AUTO_LEADER = 'auto';

function pacerFunction(s: PacerSettings) {
  const instances: { id: string; input: PacerInput }[] = [];
  for (let shard = 0; shard < s.shards; shard++) {
    for (let instance = 0; instance < s.instancesPerShard; instance++) {
      instances.push({ id: pacerInstanceId(shard, instance), input: { shard, instance } });
    }
  }
  return {
    name: 'pacer',
    entry: 'functions/pacer/handler.ts',
    // docs/operations.md, "Pacer memory": measured peak RSS at 100,000 campaigns, with headroom.
    memoryMb: s.memoryMb ?? DEFAULT_PACER_MEMORY_MB,
    ...(s.reservedConcurrency === undefined ? {} : { reservedConcurrency: s.reservedConcurrency }),
    // An invocation's window (a minute, the delivery-delay overlap and the tick it starts in:
    // 90 s in AWS), plus 15 s for its last tick to finish (docs/pacing.md, "Cadence").
    timeoutSeconds: Math.ceil((invocationWindowMs(s.tickMs, s.minuteMs) + 15_000) / 1000),
    schedule: { rateMinutes: 1, instances },
    tables: { budgets: 'read', leases: 'readwrite', regionSpend: 'readwrite', spendLedger: 'read' },
    writesStreams: [],
    usesRedis: true,
    settings: {
      [pacerEnv.shards]: String(s.shards),
      [pacerEnv.instancesPerShard]: String(s.instancesPerShard),
      [pacerEnv.tickMs]: String(s.tickMs),
      [pacerEnv.leaseTtlMs]: String(s.leaseTtlMs),
      [pacerEnv.minuteMs]: String(s.minuteMs),
    },
    readsParameters: true,
    purpose: 'Scheduled shard pacer: computes pacing parameters every tick, the lease holder publishes them.',
  } as const satisfies FunctionSpec;
}

/** Parameters derived from the pacer settings: N for writers, one leader override per shard. */
function pacerParameters(s: PacerSettings): Record<string, ParameterSpec> {
  const out: Record<string, ParameterSpec> = {
    pacerShards: {
      path: pacerShardsPath,
      initial: () => String(s.shards),
      purpose:
        'Pacer shard count N: writers of the budgets table tag items with shard = fnv1a32(account) mod N.',
    },
  };
  for (let shard = 0; shard < s.shards; shard++) {
    out[`pacerLeaderOverride${shard}`] = {
      path: leaderOverridePath(shard),
      initial: () => AUTO_LEADER,
      purpose: `Leader override of pacer shard ${shard}: an instance id (e.g. ${pacerInstanceId(shard, 0)}) publishes, or auto (the lease holder).`,
    };
  }
  return out;
}

/** How the region's Kinesis streams are provisioned. */
export type StreamCapacityMode = 'provisioned' | 'on-demand';

/** The region's cache (ElastiCache Valkey, cluster mode). */
export interface CacheSettings {
  /** Node type. @default 'cache.r7g.large' */
  readonly nodeType: string;
  /** Shards (node groups). @default 3 */
  readonly shards: number;
  /** Replicas per shard; ≥ 1 gives automatic failover. @default 1 */
  readonly replicasPerShard: number;
}

/** One stream's size and how its function consumes it. */
export interface StreamSizing {
  /** Provisioned shards (1 MB/s or 1,000 records/s in each). @default the described shardCount (2) */
  readonly shards: number;
  /** The event source's parallelization factor: concurrent batches per shard (1–10). @default 1 */
  readonly parallelizationFactor: number;
}

/** The region's streams. */
export type StreamSettings = {
  /**
   * `provisioned` (each stream gets its shard count) or `on-demand` (Kinesis scales; the shard
   * count only sizes the local emulator). @default 'provisioned'
   */
  readonly capacityMode: StreamCapacityMode;
} & { readonly [K in StreamKey]: StreamSizing };

/** Partial stream settings (cdk.json): each stream's sizing partially. */
export type StreamSettingsInput = { readonly capacityMode?: StreamCapacityMode } & {
  readonly [K in StreamKey]?: Partial<StreamSizing>;
};

/** The cache defaults of an AWS region. */
export const defaultCacheSettings: CacheSettings = {
  nodeType: 'cache.r7g.large',
  shards: 3,
  replicasPerShard: 1,
};

/** The stream defaults of an AWS region: the described shard counts, parallelization factor 1. */
export const defaultStreamSettings: StreamSettings = {
  capacityMode: 'provisioned',
  actions: { shards: streams.actions.shardCount, parallelizationFactor: 1 },
  spend: { shards: streams.spend.shardCount, parallelizationFactor: 1 },
};

/** Settings a region description is derived from. */
export interface RegionSettings {
  readonly pacer: PacerSettings;
  readonly cache: CacheSettings;
  readonly streams: StreamSettings;
  /** The deployment's stage (names; shared/region/names.ts). @default none: the default names */
  readonly stage?: string;
}

/** Partial settings: whatever is not given takes the AWS default. */
export interface RegionSettingsInput {
  readonly pacer?: Partial<PacerSettings>;
  readonly cache?: Partial<CacheSettings>;
  readonly streams?: StreamSettingsInput;
  readonly stage?: string;
}

/** Validates and completes stream settings. */
function streamSettingsOf(input: StreamSettingsInput = {}): StreamSettings {
  const mode = input.capacityMode ?? defaultStreamSettings.capacityMode;
  if (mode !== 'provisioned' && mode !== 'on-demand')
    throw new InvalidRegionSettingsError(
      `streams capacityMode = ${JSON.stringify(mode)}: give "provisioned" or "on-demand".`,
      'streams.capacityMode',
    );
  const sizing = (key: StreamKey): StreamSizing => {
    const s = { ...defaultStreamSettings[key], ...input[key] };
    // Kinesis's account quota is 500 shards by default (200 in smaller regions): more needs a raise.
    if (!Number.isSafeInteger(s.shards) || s.shards < 1 || s.shards > 10_000)
      throw new InvalidRegionSettingsError(
        `streams ${key}.shards = ${s.shards}: give a whole number from 1 to 10000 (the account's Kinesis shard quota, 500 by default, bounds it too).`,
        `streams.${key}.shards`,
      );
    if (
      !Number.isSafeInteger(s.parallelizationFactor) ||
      s.parallelizationFactor < 1 ||
      s.parallelizationFactor > 10
    )
      throw new InvalidRegionSettingsError(
        `streams ${key}.parallelizationFactor = ${s.parallelizationFactor}: give a whole number from 1 to 10 (Lambda's range).`,
        `streams.${key}.parallelizationFactor`,
      );
    return s;
  };
  return {
    capacityMode: mode,
    ...(Object.fromEntries((Object.keys(streams) as StreamKey[]).map((k) => [k, sizing(k)])) as {
      [K in StreamKey]: StreamSizing;
    }),
  };
}

/** Validates cache and stream settings (the pacer has {@link validatePacerSettings}). */
function validateCacheSettings(c: CacheSettings): CacheSettings {
  if (!/^cache\.[a-z0-9-]+\.[a-z0-9]+$/.test(c.nodeType))
    throw new InvalidRegionSettingsError(
      `cache nodeType = ${JSON.stringify(c.nodeType)}: give an ElastiCache node type such as cache.r7g.large.`,
      'cache.nodeType',
    );
  if (!Number.isSafeInteger(c.shards) || c.shards < 1 || c.shards > 500)
    throw new InvalidRegionSettingsError(
      `cache shards = ${c.shards}: give a whole number from 1 to 500.`,
      'cache.shards',
    );
  if (!Number.isSafeInteger(c.replicasPerShard) || c.replicasPerShard < 0 || c.replicasPerShard > 5)
    throw new InvalidRegionSettingsError(
      `cache replicasPerShard = ${c.replicasPerShard}: give a whole number from 0 to 5.`,
      'cache.replicasPerShard',
    );
  return c;
}

/**
 * The whole description of a region for the given settings. Everything that depends on a
 * setting (the pacer's schedule instances, environment and override parameters; the cache
 * layout; the streams' capacity mode) is derived here, so the CDK stack and the local runner
 * cannot disagree.
 */
export function regionDescription(settings: RegionSettingsInput = {}) {
  const pacer = validatePacerSettings({ ...defaultPacerSettings, ...settings.pacer });
  const cache = validateCacheSettings({ ...defaultCacheSettings, ...settings.cache });
  const streamSettings = streamSettingsOf(settings.streams);
  let names: ResourceNames;
  try {
    names = stageNames(settings.stage);
  } catch (error) {
    if (error instanceof InvalidStageError) throw new InvalidRegionSettingsError(error.message, 'stage');
    throw error;
  }
  const sized = Object.fromEntries(
    (Object.keys(streams) as StreamKey[]).map((k) => [
      k,
      { ...streams[k], shardCount: streamSettings[k].shards } satisfies StreamSpec,
    ]),
  ) as {
    readonly [K in StreamKey]: Omit<(typeof streams)[K], 'shardCount'> & { readonly shardCount: number };
  };
  // Each stream function consumes its stream with that stream's parallelization factor.
  const consuming = <F extends FunctionSpec & { readonly source: KinesisSourceSpec }>(fn: F) => ({
    ...fn,
    source: { ...fn.source, parallelizationFactor: streamSettings[fn.source.stream].parallelizationFactor },
  });
  return {
    tables,
    streams: sized,
    buckets,
    functions: {
      ingestActions: consuming(functions.ingestActions),
      trackSpend: consuming(functions.trackSpend),
      sweepSpend: functions.sweepSpend,
      pacer: pacerFunction(pacer),
    },
    parameters: { ...pacerParameters(pacer), ...parameters } as typeof parameters &
      Readonly<Record<string, ParameterSpec>>,
    cache: {
      replicationGroupId: names.cacheReplicationGroupId,
      userId: names.cacheUserId,
      port: cacheIdentity.port,
      ...cache,
    },
    /** Physical names of the deployment's stage (shared/region/names.ts). */
    names,
    /** The ad-server client library's use of the region (shared/region/access.ts grants it). */
    adServer: adServerClient,
    settings: {
      pacer,
      cache,
      streams: streamSettings,
      ...(settings.stage === undefined ? {} : { stage: settings.stage }),
    } satisfies RegionSettings,
  } as const;
}

/**
 * The cache's identity with the default names, the same in every region (names are regional):
 * the replication group id (the host part of an IAM auth token and what a peer pacer discovers
 * with DescribeReplicationGroups), the IAM-authenticated user the functions and ad servers
 * connect as (ElastiCache IAM auth requires user id = user name) and the port. A stage's
 * description carries its own (`description.cache`, from `description.names`).
 */
export const cacheIdentity = {
  replicationGroupId: defaultNames.cacheReplicationGroupId,
  userId: defaultNames.cacheUserId,
  port: 6380,
} as const;

/**
 * What the ad-server client library (`paceline/client`: shared/client, shared/spend/guard.ts,
 * shared/pacing/reader.ts, shared/kinesis/producer.ts) does in a region, per resource — the
 * access construct grants exactly this (shared/region/access.ts):
 * - budgets: the campaign's budgets (`BatchGetItem`, `GetItem`) and an account's campaigns and
 *   plans (`Query` of the base table; the shard index is the pacer's);
 * - spend ledger: the guard's rebuild of a plan-day (`Query`) and its start marker (`PutItem`);
 *   it never writes spend entries (track-spend does);
 * - both streams: events and notices (`PutRecord`, `PutRecords`);
 * - the pacer shard count `pacer/shards` (`GetParameter`) unless `PACER_SHARDS` is set;
 * - the cache (IAM authentication as the cache user).
 */
const adServerClient = {
  tables: {
    budgets: ['dynamodb:BatchGetItem', 'dynamodb:GetItem', 'dynamodb:Query'],
    spendLedger: ['dynamodb:PutItem', 'dynamodb:Query'],
  },
  putsStreams: ['actions', 'spend'],
  readsParameters: [pacerShardsPath],
  usesRedis: true,
} as const satisfies {
  tables: Readonly<Partial<Record<TableKey, readonly string[]>>>;
  putsStreams: readonly StreamKey[];
  readsParameters: readonly string[];
  usesRedis: boolean;
};

/** A region's description (see {@link regionDescription}). */
export type RegionDescription = ReturnType<typeof regionDescription>;

/** The description of an AWS region with the default settings. */
export const regionResources: RegionDescription = regionDescription();

/** Keys of the region's functions. */
export type FunctionKey = keyof RegionDescription['functions'];

/** Regions Paceline deploys to; the local runner starts the same ones side by side. */
export const defaultRegions = ['us-east-1', 'us-west-2'] as const;

/**
 * Physical name of a table or stream with the default names (the same in every region: names are
 * regional in AWS); a stage's names are `description.names.resource(suffix)`.
 */
export function physicalName(suffix: string): string {
  return defaultNames.resource(suffix);
}

/**
 * The name of a table or stream as a process outside the functions (CLI, tool) should use it: the
 * resource's environment variable when set, else its physical name.
 */
export function resourceName(
  spec: { readonly envVar: string; readonly suffix: string },
  env: Readonly<Record<string, string | undefined>> = process.env,
): string {
  const value = env[spec.envVar];
  return value === undefined || value === '' ? physicalName(spec.suffix) : value;
}

/**
 * Name of a stream function's on-failure queue with the default names (names are regional, so
 * the same in every region); `dead-letters redrive` finds the queue by it.
 */
export function onFailureQueueName(functionName: string): string {
  return defaultNames.onFailureQueueName(functionName);
}

/**
 * Replication group id of the region's cache with the default names (the same in every region:
 * ids are regional). Peer pacers find a region's cache endpoint with ElastiCache
 * `DescribeReplicationGroups` on the id their environment carries (`REDIS_CACHE_NAME`,
 * docs/pacing.md, "Many regions"); the stack names its replication group with it.
 */
export const cacheReplicationGroupId = defaultNames.cacheReplicationGroupId;

/** SSM path prefix of a region's parameters with the default names, e.g. `/paceline/us-east-1/`. */
export function parameterPrefix(region: string): string {
  return defaultNames.parameterPrefix(region);
}

/** Environment variables naming Redis; filled from the ElastiCache endpoint or the local server. */
export const redisEnv = {
  /** `host:port[,host:port…]`: the configuration endpoint (cluster) or the primary (standalone). */
  nodes: 'REDIS_NODES',
  /** `cluster` or `standalone`. */
  mode: 'REDIS_MODE',
  /** `true` when the connection must use TLS (always in AWS). */
  tls: 'REDIS_TLS',
  /**
   * ElastiCache IAM authentication: the user id to connect as. When set, `connectRedis` signs
   * short-lived SigV4 auth tokens (shared/redis/iam-auth.ts); unset, no AUTH is sent (local).
   */
  iamUser: 'REDIS_IAM_USER',
  /**
   * The cache's replication group id: what IAM auth tokens are signed for (with
   * `REDIS_IAM_USER`) and what a pacer discovers peer regions' caches by (the same id in every
   * region of a deployment).
   */
  cacheName: 'REDIS_CACHE_NAME',
} as const;

/**
 * How a function's environment refers to resources. The CDK passes CloudFormation tokens, the
 * local runner plain strings; the mapping itself lives only here.
 */
export interface EnvironmentInputs {
  readonly region: string;
  readonly tableName: (key: TableKey) => string;
  readonly streamName: (key: StreamKey) => string;
  readonly bucketName: (key: BucketKey) => string;
  readonly redis?: {
    readonly nodes: string;
    readonly mode: 'cluster' | 'standalone';
    readonly tls: boolean;
    /** ElastiCache IAM authentication (AWS only). @default none (no AUTH) */
    readonly iam?: { readonly userId: string; readonly cacheName: string };
  };
  /** The deployment's names (parameter root, cache id). @default the default names */
  readonly names?: ResourceNames;
  /**
   * Every region of the deployment, in its order (the first is every plan's allocation home).
   * With more than one, the pacer learns its peers and paces in strict allocations from it.
   * @default this region alone
   */
  readonly deploymentRegions?: readonly string[];
}

/** Environment variables carrying the deployment's SSM parameter names into a function. */
export const parameterEnv = {
  /** This region's prefix, e.g. `/paceline/us-east-1/`. */
  prefix: 'PARAMETER_PREFIX',
  /** The deployment's root, e.g. `/paceline/` (a peer region's prefix is `<root><peer>/`). */
  root: 'PARAMETER_ROOT',
} as const;

/** The environment of one function, derived from what its spec says it uses. */
export function functionEnvironment(spec: FunctionSpec, inputs: EnvironmentInputs): Record<string, string> {
  const env: Record<string, string> = {
    PACELINE_REGION: inputs.region,
    POWERTOOLS_SERVICE_NAME: spec.name,
    POWERTOOLS_METRICS_NAMESPACE: 'Paceline',
    ...spec.settings,
  };
  for (const key of Object.keys(spec.tables) as TableKey[]) {
    env[tables[key].envVar] = inputs.tableName(key);
  }
  const streamKeys = new Set<StreamKey>(spec.writesStreams);
  if (spec.source) streamKeys.add(spec.source.stream);
  for (const key of streamKeys) env[streams[key].envVar] = inputs.streamName(key);
  for (const key of Object.keys(spec.buckets ?? {}) as BucketKey[]) {
    env[buckets[key].envVar] = inputs.bucketName(key);
  }
  const names = inputs.names ?? defaultNames;
  if (spec.readsParameters) {
    env[parameterEnv.prefix] = names.parameterPrefix(inputs.region);
    env[parameterEnv.root] = names.parameterRoot;
    // The pacer: its peers (their publish switches and caches) and its allocations.
    if (inputs.deploymentRegions && inputs.deploymentRegions.length > 1)
      env[REGIONS_ENV] = inputs.deploymentRegions.join(',');
  }
  if (spec.usesRedis) {
    if (!inputs.redis) throw new Error(`Function ${spec.name} uses Redis but no Redis endpoint was given.`);
    env[redisEnv.nodes] = inputs.redis.nodes;
    env[redisEnv.mode] = inputs.redis.mode;
    env[redisEnv.tls] = String(inputs.redis.tls);
    // The group id names the cache for IAM auth and for peer discovery (also without IAM: local).
    env[redisEnv.cacheName] = inputs.redis.iam?.cacheName ?? names.cacheReplicationGroupId;
    if (inputs.redis.iam) env[redisEnv.iamUser] = inputs.redis.iam.userId;
  }
  return env;
}

/** What an ad server's environment refers to (see {@link clientEnvironment}). */
export interface ClientEnvironmentInputs {
  readonly region: string;
  readonly tableName: (key: TableKey) => string;
  readonly streamName: (key: StreamKey) => string;
  readonly redis: {
    readonly nodes: string;
    readonly mode: 'cluster' | 'standalone';
    readonly tls: boolean;
    /** ElastiCache IAM authentication (AWS). @default none (no AUTH) */
    readonly iam?: { readonly userId: string; readonly cacheName: string };
  };
  /** The pacer shard count, when the fleet should not read it from SSM. @default read from SSM */
  readonly pacerShards?: number;
  /**
   * Every region of the deployment, in its order: with more than one, the client's guards lease
   * within their region's allocation (strict), from a plan-day's first instant. @default one region
   */
  readonly deploymentRegions?: readonly string[];
}

/**
 * The environment the ad-server client library (`configFromEnv` of `paceline/client`) needs in a
 * region, derived from what the description says the client uses: the region, Redis (and its IAM
 * user), the tables and streams it reads and writes by name, `PACER_SHARDS` when given, and the
 * deployment's regions when there are several (`PACELINE_REGIONS`: strict allocations).
 */
export function clientEnvironment(
  description: Pick<RegionDescription, 'adServer'>,
  inputs: ClientEnvironmentInputs,
): Record<string, string> {
  const env: Record<string, string> = { AWS_REGION: inputs.region };
  for (const key of Object.keys(description.adServer.tables) as TableKey[])
    env[tables[key].envVar] = inputs.tableName(key);
  for (const key of description.adServer.putsStreams) env[streams[key].envVar] = inputs.streamName(key);
  env[redisEnv.nodes] = inputs.redis.nodes;
  env[redisEnv.mode] = inputs.redis.mode;
  env[redisEnv.tls] = String(inputs.redis.tls);
  if (inputs.redis.iam) {
    env[redisEnv.iamUser] = inputs.redis.iam.userId;
    env[redisEnv.cacheName] = inputs.redis.iam.cacheName;
  }
  if (inputs.pacerShards !== undefined) env[pacerEnv.shards] = String(inputs.pacerShards);
  if (inputs.deploymentRegions && inputs.deploymentRegions.length > 1)
    env[REGIONS_ENV] = inputs.deploymentRegions.join(',');
  return env;
}
