/**
 * track-spend: Kinesis (spend stream) → exactly-once confirmed spend (outbox intent, DynamoDB
 * ledger, live counters in Redis) and release of in-flight amounts. Wiring only: batch semantics
 * come from kinesisBatchHandler, the domain from shared/spend (SpendTracker).
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { dynamoDbClient } from '../../shared/aws/clients.js';
import { kinesisBatchHandler } from '../../shared/lambda/kinesis-batch.js';
import { deadLetterStoreFromEnv } from '../../shared/quarantine/dead-letter-store.js';
import { regionResources } from '../../shared/region/resources.js';
import { spendRuntimeFromEnv } from '../../shared/spend/runtime.js';
import { systemClock } from '../../shared/time/clock.js';

const spec = regionResources.functions.trackSpend;
const logger = new Logger({ serviceName: spec.name });
const metrics = new Metrics({ serviceName: spec.name });
const dynamodb = dynamoDbClient();
const deadLetters = deadLetterStoreFromEnv(dynamodb);
const { tracker } = spendRuntimeFromEnv({
  dynamodb,
  clock: systemClock,
  onRedisError: (error) => logger.warn('redis connection error', { error: error.message }),
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
