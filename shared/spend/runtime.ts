/**
 * The spend objects a function builds once at cold start from its environment (track-spend and
 * the outbox sweeper share them, so both book wins exactly the same way): DynamoDB ledger,
 * outbox and budgets, Redis live counters, the reconciler and the tracker.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { BudgetRepository } from '../budget/repository.js';
import { InvalidEnvError, intEnv, requireEnv } from '../config/env.js';
import { connectRedis, type RedisClient, redisConfigFromEnv } from '../redis/connect.js';
import { regionResources } from '../region/resources.js';
import type { Clock } from '../time/clock.js';
import { defaultSpendLimits, type SpendLimits } from './events.js';
import { LEDGER_RETENTION_DAYS, SpendLedger } from './ledger.js';
import { SpendOutbox } from './outbox.js';
import {
  budgetsTableReconciler,
  defaultInFlight,
  type InFlightConfig,
  type Reconciler,
} from './reconcile.js';
import { cachedBudgets, SpendTracker } from './tracker.js';

type Env = Readonly<Record<string, string | undefined>>;

/** What {@link spendRuntimeFromEnv} builds. */
export interface SpendRuntime {
  readonly redis: RedisClient;
  readonly ledger: SpendLedger;
  readonly outbox: SpendOutbox;
  readonly budgets: BudgetRepository;
  readonly reconciler: Reconciler;
  readonly tracker: SpendTracker;
  readonly inFlight: InFlightConfig;
  readonly limits: SpendLimits;
}

/**
 * Longest `SPEND_MAX_BID_AGE_MS`: a booked day's ledger items must outlive every notice of that
 * day (the retention, less the longest day of 25 h and a day's margin), so a rebuild never reads
 * a day whose items TTL may have deleted.
 */
export const MAX_BID_AGE_LIMIT_MS = (LEDGER_RETENTION_DAYS - 2) * 86_400_000;

/**
 * In-flight settings (`IN_FLIGHT_TTL_MS`, `IN_FLIGHT_SLOT_MS`; must equal the ad servers' guards)
 * and booking limits (`SPEND_CLOCK_SKEW_MS`, `SPEND_MAX_BID_AGE_MS`) from the environment.
 */
export function spendSettingsFromEnv(env: Env = process.env): {
  inFlight: InFlightConfig;
  limits: SpendLimits;
} {
  const maxBidAgeMs = intEnv('SPEND_MAX_BID_AGE_MS', defaultSpendLimits.maxBidAgeMs, env);
  if (maxBidAgeMs > MAX_BID_AGE_LIMIT_MS) {
    throw new InvalidEnvError(
      'SPEND_MAX_BID_AGE_MS',
      String(maxBidAgeMs),
      `at most ${MAX_BID_AGE_LIMIT_MS} ms (${LEDGER_RETENTION_DAYS - 2} days): the ledger keeps items ` +
        `${LEDGER_RETENTION_DAYS} days, and a notice older than that could rebuild a day whose wins expired`,
    );
  }
  return {
    inFlight: {
      ttlMs: intEnv('IN_FLIGHT_TTL_MS', defaultInFlight.ttlMs, env),
      slotMs: intEnv('IN_FLIGHT_SLOT_MS', defaultInFlight.slotMs, env),
    },
    limits: {
      ...defaultSpendLimits,
      clockSkewMs: intEnv('SPEND_CLOCK_SKEW_MS', defaultSpendLimits.clockSkewMs, env),
      maxBidAgeMs,
    },
  };
}

/** Builds the spend objects from the function's environment (throws naming a missing variable). */
export function spendRuntimeFromEnv(options: {
  readonly dynamodb: DynamoDBClient;
  readonly clock: Clock;
  /** Connection errors fail commands (→ retried); they are reported here instead of crashing. */
  readonly onRedisError: (error: Error) => void;
  readonly env?: Env;
}): SpendRuntime {
  const env = options.env ?? process.env;
  const { dynamodb, clock } = options;
  const ledgerTable = requireEnv(regionResources.tables.spendLedger.envVar, env);
  const budgets = new BudgetRepository({
    client: dynamodb,
    tableName: requireEnv(regionResources.tables.budgets.envVar, env),
  });
  // The region whose live counters this function keeps: its wins and intents carry it, and its
  // rebuilds read only its own wins from the replicated ledger.
  const region = requireEnv('PACELINE_REGION', env);
  const ledger = new SpendLedger({ client: dynamodb, tableName: ledgerTable, region, clock });
  const outbox = new SpendOutbox({ client: dynamodb, tableName: ledgerTable, region });
  const redis = connectRedis(redisConfigFromEnv(env));
  redis.on('error', options.onRedisError);
  const { inFlight, limits } = spendSettingsFromEnv(env);
  const reconciler = budgetsTableReconciler({ redis, ledger, clock, inFlight, budgets });
  const tracker = new SpendTracker({
    redis,
    ledger,
    outbox,
    reconciler,
    clock,
    inFlight,
    limits,
    budgets: cachedBudgets((id) => budgets.getCampaignBudgets(id), clock),
  });
  return { redis, ledger, outbox, budgets, reconciler, tracker, inFlight, limits };
}
