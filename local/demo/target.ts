/**
 * Where `npm run demo` sends its traffic: a *local* region, named by the environment `npm start`
 * prints ("Client env") and writes to `.paceline/<region>.env`. Never AWS: the demo writes
 * budgets and spend, so without a local endpoint it refuses (one line saying how to choose).
 */

import { type AwsEndpoints, endpointsFromEnv } from '../../shared/aws/clients.js';
import { InvalidEnvError } from '../../shared/config/env.js';
import { errorKind } from '../../shared/errors.js';
import { type RedisConfig, redisConfigFromEnv } from '../../shared/redis/connect.js';

type Env = Readonly<Record<string, string | undefined>>;

/** No (complete) local target in the environment. Exit code 2. */
export class DemoTargetError extends errorKind('DemoTargetError', 'demo.target') {}

/** A local region the demo drives. */
export interface DemoTarget {
  readonly region: string;
  readonly endpoints: AwsEndpoints & { readonly dynamodb: string; readonly kinesis: string };
  readonly redis: RedisConfig;
  readonly env: Env;
}

/** The variables the demo needs, all printed by `npm start` for each region. */
export const DEMO_REQUIRED_ENV = [
  'AWS_ENDPOINT_URL_DYNAMODB',
  'AWS_ENDPOINT_URL_KINESIS',
  'REDIS_NODES',
  'REDIS_MODE',
] as const;

const HOW =
  'start the local regions (npm start), then in this shell `source .paceline/us-east-1.env` ' +
  '(or paste a region’s "Client env" line) and run the demo again; it never runs against AWS.';

/** Reads the target; throws {@link DemoTargetError} when the environment names no local region. */
export function demoTargetFromEnv(env: Env): DemoTarget {
  if (env.PACELINE_TARGET === 'aws') {
    throw new DemoTargetError(
      `PACELINE_TARGET=aws: the demo writes test budgets and spend, so it only runs locally: ${HOW}`,
    );
  }
  const missing = DEMO_REQUIRED_ENV.filter((k) => !env[k]);
  if (missing.length === DEMO_REQUIRED_ENV.length)
    throw new DemoTargetError(`No local region in the environment: ${HOW}`);
  if (missing.length > 0) {
    throw new DemoTargetError(`Incomplete local region environment (${missing.join(', ')} unset): ${HOW}`);
  }
  for (const k of ['AWS_ENDPOINT_URL_DYNAMODB', 'AWS_ENDPOINT_URL_KINESIS'] as const) {
    const host = hostOf(env[k] as string);
    if (host === undefined) throw new DemoTargetError(`${k}=${env[k]} is not a URL: ${HOW}`);
    if (host.endsWith('amazonaws.com') || host.endsWith('amazonaws.com.cn')) {
      throw new DemoTargetError(`${k} points at AWS (${host}): ${HOW}`);
    }
  }
  const endpoints = endpointsFromEnv(env);
  let redis: RedisConfig;
  try {
    redis = redisConfigFromEnv(env);
  } catch (error) {
    if (error instanceof InvalidEnvError)
      throw new DemoTargetError(`${error.message} ${HOW}`, { cause: error });
    throw error;
  }
  return {
    region: endpoints.region,
    endpoints: { ...endpoints, dynamodb: endpoints.dynamodb as string, kinesis: endpoints.kinesis as string },
    redis,
    env,
  };
}

function hostOf(url: string): string | undefined {
  try {
    return new URL(url).hostname;
  } catch {
    return undefined;
  }
}

/** The line printed before anything else. */
export function describeDemoTarget(t: DemoTarget): string {
  return `Target: local ${t.region} (dynamodb ${t.endpoints.dynamodb}, kinesis ${t.endpoints.kinesis}, redis ${t.redis.mode} ${t.redis.nodes
    .map((n) => `${n.host}:${n.port}`)
    .join(',')})`;
}
