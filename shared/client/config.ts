/**
 * Configuration of the ad-server client (`createPacelineClient`): explicit options, or
 * {@link configFromEnv} reading a region's environment — the `Client env` a local region prints,
 * or the variables an ad-server fleet is deployed with. Resource names come from the region
 * description (`shared/region/resources.ts`), never from literals in user code.
 */
import type { KinesisClient } from '@aws-sdk/client-kinesis';
// endpoints.ts, not clients.ts: the package's declarations then name no SDK client module.
import { type AwsEndpoints, endpointsFromEnv } from '../aws/endpoints.js';
import { InvalidEnvError, intEnv, optionalEnv } from '../config/env.js';
import type { ActionStoreOptions } from '../counting/store.js';
import { errorKind } from '../errors.js';
import type { KinesisProducerOptions } from '../kinesis/producer.js';
import type { PacingReaderOptions } from '../pacing/reader.js';
import { allocationSettingsFromEnv } from '../pacing/regions/allocation-config.js';
import type { RedisClient, RedisConfig } from '../redis/connect.js';
import { redisConfigFromEnv } from '../redis/connect.js';
import { pacerEnv, regionResources, resourceName } from '../region/resources.js';
import type { BudgetGuardOptions } from '../spend/guard.js';
import type { InFlightConfig } from '../spend/reconcile.js';
import { spendSettingsFromEnv } from '../spend/runtime.js';
import type { Clock } from '../time/clock.js';
import type { ClientMetrics, DecisionRecord } from './metrics.js';

type Env = Readonly<Record<string, string | undefined>>;

/**
 * The client's own access key against local endpoints (a local region prints and writes the
 * ad-server principal's key here, so the client is held to the ad-server access policy while the
 * CLI in the same shell keeps the operator's `AWS_ACCESS_KEY_ID`). Unused in AWS, where the SDK's
 * credential chain gives the fleet's role.
 */
export const clientCredentialsEnv = {
  accessKeyId: 'PACELINE_CLIENT_ACCESS_KEY_ID',
  secretAccessKey: 'PACELINE_CLIENT_SECRET_ACCESS_KEY',
} as const;

/**
 * A client configuration a part of the client refuses (`guard` tuning out of range): the message
 * names the option and its range, `cause` is the part's own error.
 */
export class InvalidClientConfigError extends errorKind(
  'InvalidClientConfigError',
  'client.invalid-config',
) {}

/** Names of the region's resources the client uses. */
export interface ClientResources {
  /** Budgets table (accounts, campaigns, plans). @default from the region description */
  readonly budgetsTable: string;
  /** Spend ledger table (rebuilding live counters after a Redis reset). */
  readonly spendLedgerTable: string;
  /** Actions stream (impressions, clicks… for counting). */
  readonly actionsStream: string;
  /** Spend stream (bid, win, loss notices). */
  readonly spendStream: string;
}

/** Client-side metrics hooks (docs/client.md, "Metrics"). */
export interface MetricsHooks {
  /** Every decision `bid()` made (synchronous, on the request path: keep it cheap). */
  readonly onDecision?: (record: DecisionRecord) => void;
  /** Every `intervalMs`: totals since start and the change since the previous call. */
  readonly onSnapshot?: (total: ClientMetrics, sinceLast: ClientMetrics) => void;
  /** @default 60_000 */
  readonly intervalMs?: number;
}

/** Everything {@link createPacelineClient} needs. */
export interface PacelineClientConfig {
  /** AWS region and, locally, the emulator endpoints. */
  readonly endpoints: AwsEndpoints;
  /** Redis (ElastiCache) to connect to, or a client to use (then not closed by `close()`). */
  readonly redis: RedisConfig | RedisClient;
  /**
   * Pacer shard count N of the region (where published parameters live). @default read from the
   * region's SSM parameter `/paceline/<region>/pacer/shards` (what the pacers and writers use)
   */
  readonly pacerShards?: number;
  /** @default the region description's names (`resourceName`) */
  readonly resources?: Partial<ClientResources>;
  /** In-flight lifetime and slot width: must equal track-spend's. @default defaultInFlight (10 min, 1 min) */
  readonly inFlight?: InFlightConfig;
  /**
   * Several regions share every budget: `strict` leases only within the region's allocation
   * (docs/pacing.md, "Many regions"). `configFromEnv` derives it from `PACELINE_REGIONS` (strict
   * with more than one region) unless `PACELINE_ALLOCATIONS` says otherwise. @default 'off'
   */
  readonly allocations?: 'strict' | 'off';
  /**
   * Every region of the deployment, in order (`PACELINE_REGIONS`): with strict allocations the
   * guard leases its region's floor from a plan-day's first instant, before the pacer wrote an
   * allocation. @default this region alone
   */
  readonly regions?: readonly string[];
  /** @default systemClock */
  readonly clock?: Clock;
  /** Random numbers in [0, 1) for throttling (inject for reproducible tests). @default Math.random */
  readonly random?: () => number;
  /**
   * Base of the notice URLs `bid()` returns (`<base>/win?…`), your ad server's notice endpoint.
   * Without it `bid()` returns no URLs (build them with `noticeUrls`).
   */
  readonly noticeBaseUrl?: string;
  /** Put a `bid` event on the spend stream for every bid that goes out. @default true */
  readonly bidEvents?: boolean;
  /**
   * Campaigns to track from the start (budgets loaded, floats leased, pacing read) before
   * `createPacelineClient` resolves. @default none
   */
  readonly campaigns?: readonly string[];
  /**
   * Start tracking a campaign the first time `bid()` sees it (that bid answers
   * `unknown-campaign`; later ones are decided). @default true
   */
  readonly autoTrack?: boolean;
  /**
   * How often tracked campaigns' budgets are re-read (budget changes, pauses, new arm plans).
   * @default 30_000
   */
  readonly budgetRefreshMs?: number;
  /** Budget guard tuning (float size, lease timing…; see BudgetGuardOptions). */
  readonly guard?: Pick<
    BudgetGuardOptions,
    | 'floatFraction'
    | 'minFloatMicros'
    | 'floatSizing'
    | 'releaseCap'
    | 'inFlightWeight'
    | 'leaseAheadMs'
    | 'settleIntervalMs'
    | 'noAllowanceBackoffMs'
    | 'memoryRetentionMs'
  > & {
    /** How often the guard settles and returns expired float in idle periods, ms. @default 1_000 */
    readonly maintainIntervalMs?: number;
  };
  /** Pacing reader tuning (cache ages; see PacingReaderOptions). */
  readonly pacing?: Pick<
    PacingReaderOptions,
    'tickMs' | 'maxAgeMs' | 'settleMs' | 'idleTicks' | 'clockResolutionMs'
  >;
  /** Action store settings (must match ingest-actions'). */
  readonly actions?: Pick<
    ActionStoreOptions,
    | 'retentionDays'
    | 'rawDays'
    | 'cachedDayTables'
    | 'maxFutureSkewMs'
    | 'keyPrefix'
    | 'noIdentity'
    | 'capLogReads'
  >;
  /** Producer tuning for both streams (batching, back-pressure, retries). */
  readonly producer?: Omit<KinesisProducerOptions, 'client' | 'streamName'>;
  /** A Kinesis client to use (then not destroyed by `close()`). @default one for `endpoints` */
  readonly kinesis?: Pick<KinesisClient, 'send' | 'destroy'>;
  readonly metrics?: MetricsHooks;
  /**
   * Background failures (leases, budget refresh, pacing refresh, events that could not be put).
   * The request path never throws for them: it answers conservatively (no-budget, fail-safe
   * pacing). @default a one-line warning on stderr, at most one per 10 s
   */
  readonly onError?: (error: unknown) => void;
}

/**
 * A client configuration from a region's environment: `AWS_REGION` / `AWS_DEFAULT_REGION` and
 * `AWS_ENDPOINT_URL_*` (endpoints; locally called with `PACELINE_CLIENT_ACCESS_KEY_ID` /
 * `PACELINE_CLIENT_SECRET_ACCESS_KEY` when set, else `AWS_ACCESS_KEY_ID`), `REDIS_NODES` / `REDIS_MODE` / `REDIS_TLS`, `PACER_SHARDS` (else read from SSM),
 * `IN_FLIGHT_TTL_MS` / `IN_FLIGHT_SLOT_MS`, the resources' variables (`BUDGETS_TABLE`,
 * `SPEND_LEDGER_TABLE`, `ACTIONS_STREAM`, `SPEND_STREAM`; default: the region description's
 * names) and `PACELINE_NOTICE_BASE_URL`. `overrides` win over the environment. Throws
 * MissingEnvError / InvalidEnvError naming the variable.
 */
export function configFromEnv(
  env: Env = process.env,
  overrides: Partial<PacelineClientConfig> = {},
): PacelineClientConfig {
  const { inFlight } = spendSettingsFromEnv(env);
  const noticeBaseUrl = optionalEnv('PACELINE_NOTICE_BASE_URL', undefined, env);
  const shards = intEnv(pacerEnv.shards, 0, env);
  if (optionalEnv(pacerEnv.shards, undefined, env) !== undefined && shards < 1) {
    throw new InvalidEnvError(pacerEnv.shards, String(env[pacerEnv.shards]), 'a whole number ≥ 1');
  }
  const endpoints = endpointsFromEnv(env);
  const { mode, regions } = allocationSettingsFromEnv(endpoints.region, env);
  const accessKeyId = optionalEnv(clientCredentialsEnv.accessKeyId, undefined, env);
  const secretAccessKey = optionalEnv(clientCredentialsEnv.secretAccessKey, undefined, env);
  return {
    endpoints:
      accessKeyId && secretAccessKey
        ? { ...endpoints, credentials: { accessKeyId, secretAccessKey } }
        : endpoints,
    redis: redisConfigFromEnv(env),
    allocations: mode,
    regions,
    ...(shards > 0 ? { pacerShards: shards } : {}),
    resources: resourcesFromEnv(env),
    inFlight,
    ...(noticeBaseUrl === undefined ? {} : { noticeBaseUrl }),
    ...overrides,
  };
}

/** The resource names of a region's environment (default: the region description's). */
export function resourcesFromEnv(env: Env = process.env): ClientResources {
  return {
    budgetsTable: resourceName(regionResources.tables.budgets, env),
    spendLedgerTable: resourceName(regionResources.tables.spendLedger, env),
    actionsStream: resourceName(regionResources.streams.actions, env),
    spendStream: resourceName(regionResources.streams.spend, env),
  };
}
