/**
 * pacer: one EventBridge rule per (shard, instance) invokes this every minute with
 * `{shard, instance}`, at the rule's own second plus a delivery delay; the invocation runs the
 * ticks of the minute after its start plus an overlap covering that delay, on wall-clock
 * boundaries (shared/pacing/invocation.ts), so consecutive invocations of an instance overlap
 * (for about a tick: the older one ends once the newer one has registered its start).
 * Wiring only: the objects come from the environment (shared/pacing/runtime.ts), an invocation's
 * lease, ticks, logs and metrics from shared/pacing/pacer-invocation.ts, the domain from
 * shared/pacing (ShardPacer: lease, budgets, controller, fenced publishing).
 *
 * Warm state (budgets cache, controller state, connections) lives in the module, per shard, and
 * survives across invocations of this execution environment. An invocation that still holds its
 * shard's lease when its window ends hands it back, and a shutdown (SIGTERM) releases held
 * leases, so another instance takes over at its next tick instead of after the lease TTL.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import type { Context } from 'aws-lambda';
import { PacerInvocations } from '../../shared/pacing/pacer-invocation.js';
import { pacerRuntimeFromEnv } from '../../shared/pacing/runtime.js';
import { regionResources } from '../../shared/region/resources.js';

const spec = regionResources.functions.pacer;
const logger = new Logger({ serviceName: spec.name });
const metrics = new Metrics({ serviceName: spec.name });
const runtime = pacerRuntimeFromEnv({
  onRedisError: (error) => logger.warn('redis connection error', { error: error.message }),
});
const invocations = new PacerInvocations(runtime, { logger, metrics });
invocations.releaseLeasesOnSigterm();

export const handler = (event: unknown, context?: Context) =>
  invocations.run(event, context ? () => context.getRemainingTimeInMillis() : undefined);
