/**
 * track-spend: Kinesis (spend stream) → exactly-once confirmed spend (DynamoDB ledger + live
 * counters in Redis) and release of in-flight amounts. Wiring only: batch semantics come from
 * kinesisBatchHandler, the domain from shared/spend (SpendTracker).
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { dynamoDbClient } from '../../shared/aws/clients.js';
import { BudgetRepository } from '../../shared/budget/repository.js';
import { intEnv, requireEnv } from '../../shared/config/env.js';
import { kinesisBatchHandler } from '../../shared/lambda/kinesis-batch.js';
import { DeadLetterStore } from '../../shared/quarantine/dead-letter-store.js';
import { connectRedis, redisConfigFromEnv } from '../../shared/redis/connect.js';
import { regionResources } from '../../shared/region/resources.js';
import { SpendLedger } from '../../shared/spend/ledger.js';
import { defaultInFlight, Reconciler } from '../../shared/spend/reconcile.js';
import { cachedBudgets, SpendTracker } from '../../shared/spend/tracker.js';
import { systemClock } from '../../shared/time/clock.js';

const spec = regionResources.functions.trackSpend;
const logger = new Logger({ serviceName: spec.name });
const metrics = new Metrics({ serviceName: spec.name });
const dynamodb = dynamoDbClient();
const deadLetters = new DeadLetterStore({
  client: dynamodb,
  tableName: requireEnv(regionResources.tables.deadLetters.envVar),
});
const budgets = new BudgetRepository({
  client: dynamodb,
  tableName: requireEnv(regionResources.tables.budgets.envVar),
});
const ledger = new SpendLedger({
  client: dynamodb,
  tableName: requireEnv(regionResources.tables.spendLedger.envVar),
});
const redis = connectRedis(redisConfigFromEnv());
// Connection errors fail the commands (→ retried batch); log them instead of crashing the process.
redis.on('error', (error: Error) => logger.warn('redis connection error', { error: error.message }));
// Must equal the ad servers' guard configuration (stored in each plan-day hash as q / t).
const inFlight = {
  ttlMs: intEnv('IN_FLIGHT_TTL_MS', defaultInFlight.ttlMs),
  slotMs: intEnv('IN_FLIGHT_SLOT_MS', defaultInFlight.slotMs),
};
const reconciler = new Reconciler({
  redis,
  ledger,
  clock: systemClock,
  inFlight,
  campaignsOfAccount: (accountId) => budgets.listCampaignIds(accountId),
});
const tracker = new SpendTracker({
  redis,
  ledger,
  reconciler,
  clock: systemClock,
  inFlight,
  budgets: cachedBudgets((id) => budgets.getCampaignBudgets(id), systemClock),
});

export const handler = kinesisBatchHandler({
  source: spec.name,
  deadLetters,
  clock: systemClock,
  logger,
  metrics,
  handleRecord: async (record, batch) => {
    const outcome = await tracker.handle(record.data);
    batch.count('SpendNoticesDuplicate', outcome.duplicate ? 1 : 0);
    batch.count('SpendNoticesLate', outcome.late ? 1 : 0);
    batch.count('LiveCountersRebuilt', outcome.rebuilt);
    batch.count('ConfirmedSpendMicros', outcome.addedMicros);
  },
});
