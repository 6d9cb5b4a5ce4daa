/**
 * The counting objects a function builds once at cold start from its environment (ingest-actions;
 * beside `spendRuntimeFromEnv` and `pacerRuntimeFromEnv`): Redis, the action store with its
 * retention, dedup window and key-schema upgrade settings, and the coalescer that turns the
 * records a batch hands over one at a time into one write.
 */
import { boolEnv, intEnv } from '../config/env.js';
import { connectRedis, type RedisClient, redisConfigFromEnv } from '../redis/connect.js';
import { type Clock, DAY_MS } from '../time/clock.js';
import { IngestCoalescer } from './ingest.js';
import { ActionStore } from './store.js';

type Env = Readonly<Record<string, string | undefined>>;

/** What {@link countingRuntimeFromEnv} builds. */
export interface CountingRuntime {
  readonly redis: RedisClient;
  readonly store: ActionStore;
  readonly ingest: IngestCoalescer;
}

/**
 * Builds the counting objects from the function's environment: `REDIS_*`,
 * `COUNTING_RETENTION_DAYS` (default 30), `COUNTING_DEDUP_WINDOW_MS` (default a day),
 * `COUNTING_RAW_DAYS` (default 31: day summaries only with a longer retention) and
 * `COUNTING_IMPORT_V1_KEYS` (default true). Throws naming a variable that is malformed.
 */
export function countingRuntimeFromEnv(options: {
  readonly clock: Clock;
  /** Connection errors fail the commands (→ retried batch); they are reported here instead of crashing. */
  readonly onRedisError: (error: Error) => void;
  readonly env?: Env;
}): CountingRuntime {
  const env = options.env ?? process.env;
  const redis = connectRedis(redisConfigFromEnv(env));
  redis.on('error', options.onRedisError);
  const store = new ActionStore({
    redis,
    clock: options.clock,
    retentionDays: intEnv('COUNTING_RETENTION_DAYS', 30, env),
    dedupWindowMs: intEnv('COUNTING_DEDUP_WINDOW_MS', DAY_MS, env),
    // Days past which maintenance keeps day summaries (when the retention is longer).
    rawDays: intEnv('COUNTING_RAW_DAYS', 31, env),
    // Key schema v1 → v2 upgrade (docs/counting.md): off once no v1 key can remain.
    legacyV1Keys: boolEnv('COUNTING_IMPORT_V1_KEYS', true, env),
  });
  // The batch handler hands records over one at a time, in parallel: coalesce them into one write.
  return { redis, store, ingest: new IngestCoalescer({ store }) };
}
