/**
 * sweep-spend: every minute (EventBridge), applies the wins still in the spend outbox — written to
 * the ledger by track-spend but never confirmed in the live counters (Redis refusing writes past
 * the event source's retries, a crash loop, the on-failure destination). Wiring only: the domain
 * is shared/spend/sweeper.ts. Publishes `SpendOutboxOldestAgeSeconds` on every run, which the
 * convergence alarm watches (docs/spend.md).
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import { dynamoDbClient } from '../../shared/aws/clients.js';
import { intEnv } from '../../shared/config/env.js';
import { regionResources } from '../../shared/region/resources.js';
import { spendRuntimeFromEnv } from '../../shared/spend/runtime.js';
import { OutboxSweeper, type SweepResult } from '../../shared/spend/sweeper.js';
import { systemClock } from '../../shared/time/clock.js';

const spec = regionResources.functions.sweepSpend;
const logger = new Logger({ serviceName: spec.name });
const metrics = new Metrics({ serviceName: spec.name });
const { outbox, tracker } = spendRuntimeFromEnv({
  dynamodb: dynamoDbClient(),
  clock: systemClock,
  onRedisError: (error) => logger.warn('redis connection error', { error: error.message }),
});
const graceMs = intEnv('SWEEP_GRACE_MS', 10_000);
// Leave this much of the invocation for the last settles and the metrics flush.
const reserveMs = 10_000;

export const handler = middy<unknown, SweepResult, Error, Context>()
  .use(logMetrics(metrics))
  .handler(async (_event, context) => {
    const sweeper = new OutboxSweeper({
      outbox,
      tracker,
      clock: systemClock,
      graceMs,
      shouldStop: () => context.getRemainingTimeInMillis() < reserveMs,
    });
    const result = await sweeper.sweep();
    metrics.addMetric('SpendOutboxSettled', MetricUnit.Count, result.settled);
    metrics.addMetric('SpendOutboxFailed', MetricUnit.Count, result.failed);
    metrics.addMetric('SpendOutboxOldestAgeSeconds', MetricUnit.Seconds, result.oldestPendingAgeMs / 1000);
    if (result.failed > 0 || result.stoppedEarly) logger.warn('outbox not fully applied', { ...result });
    else if (result.settled > 0) logger.info('outbox applied', { ...result });
    return result;
  });
