/**
 * The fixed part of a region's description (resources.ts): its tables, streams, buckets, the
 * stream and scheduled functions that do not depend on settings, and its own parameters. The
 * pacer's function and parameters are derived from its settings (pacer-settings.ts).
 */
import type {
  BucketSpec,
  FunctionSpec,
  KinesisSourceSpec,
  ParameterSpec,
  StreamSpec,
  TableSpec,
} from './resource-specs.js';

/** The keys of every table: string `pk` and `sk` (each table's items spell their own key formats). */
const stringKeys = {
  partitionKey: { name: 'pk', type: 'S' },
  sortKey: { name: 'sk', type: 'S' },
} as const;

export const tables = {
  budgets: {
    envVar: 'BUDGETS_TABLE',
    suffix: 'budgets',
    ...stringKeys,
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
    ...stringKeys,
    purpose:
      "Per-region spend summaries of every plan-day (spend, full-speed demand), written every tick by each region's publishing pacer; the input of the region shares.",
    // Every region reads every other region's summaries: a region's share needs all regions' spend.
    replication: 'global',
  },
  spendLedger: {
    envVar: 'SPEND_LEDGER_TABLE',
    suffix: 'spend-ledger',
    ...stringKeys,
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
    ...stringKeys,
    // Regional: a record is quarantined, listed and replayed in the region whose stream it came from.
    replication: 'regional',
    purpose: 'Quarantined (malformed / poison) records with their reason; listable and replayable.',
  },
  leases: {
    envVar: 'LEASES_TABLE',
    suffix: 'leases',
    ...stringKeys,
    // Regional: each region elects its own publisher per shard (the publish switch is SSM's).
    replication: 'regional',
    purpose: 'Leader leases of pacer shards (conditional writes, expiry, monotonically increasing epoch).',
  },
} as const satisfies Record<string, TableSpec>;

/**
 * What every stream starts from: 2 provisioned shards (the settings' `streams.<key>.shards`
 * overrides them) and 24 h of retention, Kinesis's minimum, which covers a day of replay.
 */
const streamDefaults = { shardCount: 2, retentionHours: 24 } as const;

export const streams = {
  actions: {
    envVar: 'ACTIONS_STREAM',
    suffix: 'actions',
    ...streamDefaults,
    purpose: 'User-action events (impressions, clicks, …) from ad servers, for counting.',
  },
  spend: {
    envVar: 'SPEND_STREAM',
    suffix: 'spend',
    ...streamDefaults,
    purpose: 'Bid, win (billing) and loss notices, for spend tracking.',
  },
} as const satisfies Record<string, StreamSpec>;

export const buckets = {
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

export const functions = {
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
    // Retention of user-action events (30 by default, up to 90), the dedup window (one day by
    // default: the same event identity within it counts once) and the raw days (a longer
    // retention keeps day summaries past them): docs/counting.md.
    settings: {
      COUNTING_RETENTION_DAYS: '30',
      COUNTING_DEDUP_WINDOW_MS: String(24 * 60 * 60_000),
      COUNTING_RAW_DAYS: '31',
    },
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

export const parameters = {
  publisherRegion: {
    path: 'publisher-region',
    initial: (region: string) => region,
    purpose: "Which region's pacer publishes into this region's cache (cross-region failover switch).",
  },
} as const satisfies Record<string, ParameterSpec>;
