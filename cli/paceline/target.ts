/**
 * Which regions a `paceline` command talks to, decided the same way for every subcommand:
 *
 * 1. `--aws` (or `PACELINE_TARGET=aws`): real AWS, the regions of `--regions` (else AWS_REGION),
 *    default endpoints and credential chain; Redis from `REDIS_NODES_<REGION>` (dashes as
 *    underscores) or, for one region, `REDIS_NODES` / `REDIS_MODE` / `REDIS_TLS` — ElastiCache is
 *    only reachable from inside the region's VPC (or a tunnel into it).
 * 2. A local region's `Client env` in the environment (`AWS_ENDPOINT_URL_DYNAMODB` set): that
 *    region, with its `REDIS_NODES` / `REDIS_MODE`.
 * 3. `npm start` running: every local region it lists in `.local/regions.json` (`--regions`
 *    filters).
 * 4. Otherwise refuse with one line saying how to choose: never reach real AWS by accident.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type AwsEndpoints, endpointsFromEnv } from '../../shared/aws/clients.js';
import { type RedisConfig, redisConfigFromEnv } from '../../shared/redis/connect.js';

import { CliUsageError, NO_TARGET_HELP } from '../common.js';

/** A wrong command line or no target: exit code 2, one line (the one class every CLI uses). */
export { CliUsageError };

/** One region a command talks to. */
export interface RegionTarget {
  readonly region: string;
  readonly kind: 'local' | 'aws';
  readonly endpoints: AwsEndpoints;
  readonly redis: RedisConfig;
  /** The region's environment as seen by the command (table names, PACER_SHARDS…). */
  readonly env: Readonly<Record<string, string | undefined>>;
}

/** What `npm start` writes to `.local/regions.json` while it runs. */
export interface LocalRegionsFile {
  readonly pid: number;
  readonly regions: readonly {
    readonly region: string;
    readonly clientEnv: Readonly<Record<string, string>>;
  }[];
}

/** Path of the running local regions' file. */
export function localRegionsFile(repoRoot: string): string {
  return join(repoRoot, '.local', 'regions.json');
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Resolves the targets; throws {@link CliUsageError} when none is chosen or the choice is incomplete. */
export function resolveTargets(
  flags: { readonly aws?: boolean; readonly regions?: string },
  env: Readonly<Record<string, string | undefined>>,
  repoRoot: string,
): RegionTarget[] {
  const wanted = flags.regions
    ?.split(',')
    .map((r) => r.trim())
    .filter(Boolean);
  const aws = flags.aws === true || env.PACELINE_TARGET === 'aws';
  if (aws) {
    if (env.AWS_ENDPOINT_URL_DYNAMODB || env.AWS_ENDPOINT_URL_SSM) {
      throw new CliUsageError(
        'AWS was chosen but AWS_ENDPOINT_URL_* points at a local region: unset those variables, or drop --aws.',
      );
    }
    const regions = wanted ?? (env.AWS_REGION ? [env.AWS_REGION] : []);
    if (regions.length === 0)
      throw new CliUsageError('With --aws, name the regions: --regions us-east-1[,us-west-2].');
    return regions.map((region) => {
      const suffix = region.replaceAll('-', '_').toUpperCase();
      const nodes = env[`REDIS_NODES_${suffix}`] ?? (regions.length === 1 ? env.REDIS_NODES : undefined);
      if (!nodes) {
        throw new CliUsageError(
          `Set REDIS_NODES_${suffix} (or REDIS_NODES for one region) to ${region}'s ElastiCache configuration endpoint, from inside its VPC.`,
        );
      }
      const redisEnv = {
        REDIS_NODES: nodes,
        REDIS_MODE: env.REDIS_MODE ?? 'cluster',
        REDIS_TLS: env.REDIS_TLS ?? 'true',
      };
      return {
        region,
        kind: 'aws' as const,
        endpoints: { region },
        redis: redisConfigFromEnv(redisEnv),
        env,
      };
    });
  }
  if (env.AWS_ENDPOINT_URL_DYNAMODB) {
    const endpoints = endpointsFromEnv(env);
    if (wanted && !wanted.includes(endpoints.region)) {
      throw new CliUsageError(
        `The environment points at local region ${endpoints.region}, not ${wanted.join(',')}.`,
      );
    }
    return [{ region: endpoints.region, kind: 'local', endpoints, redis: redisConfigFromEnv(env), env }];
  }
  const file = localRegionsFile(repoRoot);
  if (existsSync(file)) {
    const running = JSON.parse(readFileSync(file, 'utf8')) as LocalRegionsFile;
    if (processAlive(running.pid)) {
      const regions = running.regions.filter((r) => !wanted || wanted.includes(r.region));
      if (regions.length === 0)
        throw new CliUsageError(`No running local region named ${wanted?.join(',')}.`);
      return regions.map((r) => ({
        region: r.region,
        kind: 'local' as const,
        endpoints: endpointsFromEnv(r.clientEnv),
        redis: redisConfigFromEnv(r.clientEnv),
        env: r.clientEnv,
      }));
    }
  }
  throw new CliUsageError(NO_TARGET_HELP);
}

/** The line printed before anything else: what is about to be read. */
export function describeTargets(targets: readonly RegionTarget[]): string {
  return `Target: ${targets
    .map((t) =>
      t.kind === 'aws'
        ? `AWS ${t.region} (redis ${t.redis.nodes.map((n) => `${n.host}:${n.port}`).join(',')})`
        : `local ${t.region} (dynamodb ${t.endpoints.dynamodb}, redis ${t.redis.nodes.map((n) => `${n.host}:${n.port}`).join(',')})`,
    )
    .join('; ')}`;
}
