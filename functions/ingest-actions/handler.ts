/**
 * ingest-actions: Kinesis (actions stream) → deduplicated per-user event sets in Redis.
 * Wiring only: the batch semantics (KPL de-aggregation, quarantine of malformed records, partial
 * batch failures) come from kinesisBatchHandler, the store and its settings from
 * shared/counting/runtime.ts, decoding and storage from shared/counting.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { dynamoDbClient } from '../../shared/aws/clients.js';
import { countingRuntimeFromEnv } from '../../shared/counting/runtime.js';
import { kinesisBatchHandler } from '../../shared/lambda/kinesis-batch.js';
import { deadLetterStoreFromEnv } from '../../shared/quarantine/dead-letter-store.js';
import { regionResources } from '../../shared/region/resources.js';
import { systemClock } from '../../shared/time/clock.js';

const spec = regionResources.functions.ingestActions;
const logger = new Logger({ serviceName: spec.name });
const metrics = new Metrics({ serviceName: spec.name });
const deadLetters = deadLetterStoreFromEnv(dynamoDbClient());
const { ingest } = countingRuntimeFromEnv({
  clock: systemClock,
  onRedisError: (error) => logger.warn('redis connection error', { error: error.message }),
});

export const handler = kinesisBatchHandler({
  source: spec.name,
  deadLetters,
  clock: systemClock,
  logger,
  metrics,
  handleRecord: (record, batch) => ingest.ingest(record.data, batch),
});
