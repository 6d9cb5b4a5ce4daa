/**
 * ingest-actions: Kinesis (actions stream) → deduplicated per-user event sets in Redis.
 * Wiring only: the batch semantics (KPL de-aggregation, quarantine of malformed records, partial
 * batch failures) come from kinesisBatchHandler, decoding and storage from shared/counting.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { dynamoDbClient } from '../../shared/aws/clients.js';
import { intEnv } from '../../shared/config/env.js';
import { ingestRecord } from '../../shared/counting/ingest.js';
import { ActionStore } from '../../shared/counting/store.js';
import { kinesisBatchHandler } from '../../shared/lambda/kinesis-batch.js';
import { deadLetterStoreFromEnv } from '../../shared/quarantine/dead-letter-store.js';
import { connectRedis, redisConfigFromEnv } from '../../shared/redis/connect.js';
import { regionResources } from '../../shared/region/resources.js';
import { systemClock } from '../../shared/time/clock.js';

const spec = regionResources.functions.ingestActions;
const logger = new Logger({ serviceName: spec.name });
const metrics = new Metrics({ serviceName: spec.name });
const deadLetters = deadLetterStoreFromEnv(dynamoDbClient());
const redis = connectRedis(redisConfigFromEnv());
// Connection errors fail the commands (→ retried batch); log them instead of crashing the process.
redis.on('error', (error: Error) => logger.warn('redis connection error', { error: error.message }));
const store = new ActionStore({
  redis,
  clock: systemClock,
  retentionDays: intEnv('COUNTING_RETENTION_DAYS', 30),
});

export const handler = kinesisBatchHandler({
  source: spec.name,
  deadLetters,
  clock: systemClock,
  logger,
  metrics,
  handleRecord: async (record) => {
    const result = await ingestRecord(store, record.data);
    if (result.duplicates > 0) metrics.addMetric('ActionsDuplicate', MetricUnit.Count, result.duplicates);
    if (result.expired > 0) metrics.addMetric('ActionsExpired', MetricUnit.Count, result.expired);
  },
});
