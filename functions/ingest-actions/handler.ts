/**
 * ingest-actions: Kinesis (actions stream) → deduplicated per-user event sets in Redis.
 * Wiring only: the batch semantics (KPL de-aggregation, quarantine of malformed records, partial
 * batch failures) come from kinesisBatchHandler, decoding and storage from shared/counting.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { dynamoDbClient } from '../../shared/aws/clients.js';
import { boolEnv, intEnv } from '../../shared/config/env.js';
import { IngestCoalescer } from '../../shared/counting/ingest.js';
import { ActionStore } from '../../shared/counting/store.js';
import { kinesisBatchHandler } from '../../shared/lambda/kinesis-batch.js';
import { deadLetterStoreFromEnv } from '../../shared/quarantine/dead-letter-store.js';
import { connectRedis, redisConfigFromEnv } from '../../shared/redis/connect.js';
import { regionResources } from '../../shared/region/resources.js';
import { DAY_MS, systemClock } from '../../shared/time/clock.js';

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
  dedupWindowMs: intEnv('COUNTING_DEDUP_WINDOW_MS', DAY_MS),
  // Key schema v1 → v2 upgrade (docs/counting.md): off once no v1 key can remain.
  legacyV1Keys: boolEnv('COUNTING_IMPORT_V1_KEYS', true),
});
// The batch handler hands records over one at a time, in parallel: coalesce them into one write.
const ingest = new IngestCoalescer({ store });

export const handler = kinesisBatchHandler({
  source: spec.name,
  deadLetters,
  clock: systemClock,
  logger,
  metrics,
  handleRecord: (record, batch) => ingest.ingest(record.data, batch),
});
