/**
 * Which regions an operator command talks to, and through which endpoints — decided the same way
 * for every command (`paceline …`, `npm run budgets`, `npm run dead-letters`):
 *
 * 1. `--aws` (or `PACELINE_TARGET=aws`): real AWS, the regions of `--regions` (else AWS_REGION /
 *    AWS_DEFAULT_REGION), the SDK's endpoints and credential chain; refused while an
 *    `AWS_ENDPOINT_URL*` variable is set (it would send the calls elsewhere). Redis from
 *    `REDIS_NODES_<REGION>` (dashes as underscores) or, for one region, `REDIS_NODES` /
 *    `REDIS_MODE` / `REDIS_TLS` — ElastiCache is only reachable from inside the region's VPC.
 * 2. A local region's variables in the environment (any `AWS_ENDPOINT_URL_<SERVICE>` or
 *    `REDIS_NODES`): that region — and, for commands over every region (`status`, `spend
 *    status`), every region of the `npm start` it belongs to. The endpoint of every service the
 *    command uses must be set and on loopback; otherwise it refuses, naming what is missing.
 * 3. `npm start` running: the regions it lists in `<state dir>/regions.json` (`--regions`
 *    filters).
 * 4. Otherwise refuse with one line saying how to choose: never reach real AWS by accident.
 *
 * A local target's endpoints are restricted to the services the command declared and marked
 * `localOnly`: a client for any other service fails to build instead of reaching AWS. The target
 * line names every endpoint the command will use (for AWS, as the SDK resolves it).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { SSMClient } from '@aws-sdk/client-ssm';
import {
  type AwsEndpoints,
  type AwsService,
  clientEndpoint,
  endpointsFromEnv,
  SERVICE_ENDPOINT_ENV,
} from '../../shared/aws/endpoints.js';
import { InvalidEnvError, MissingEnvError } from '../../shared/config/env.js';
import { type RedisConfig, redisConfigFromEnv } from '../../shared/redis/connect.js';
import { CliUsageError, NO_TARGET_HELP } from '../common.js';

/** A wrong command line or no target: exit code 2, one line (the one class every CLI uses). */
export { CliUsageError };

type Env = Readonly<Record<string, string | undefined>>;

/** What a command will reach: decides what a target must provide and what the target line names. */
export interface TargetNeeds {
  /** The AWS services the command calls. */
  readonly services: readonly AwsService[];
  /** True when it connects to the region's Redis. */
  readonly redis: boolean;
}

/** One region a command talks to. */
export interface RegionTarget {
  readonly region: string;
  readonly kind: 'local' | 'aws';
  /** The endpoints of the needed services (local: `localOnly`, nothing else). */
  readonly endpoints: AwsEndpoints;
  /** Redis, when the command needs it. */
  readonly redis?: RedisConfig;
  /** The region's environment as seen by the command (table names, PACER_SHARDS…). */
  readonly env: Env;
}

/** What `npm start` writes to `<state dir>/regions.json` while it runs. */
export interface LocalRegionsFile {
  readonly pid: number;
  readonly regions: readonly {
    readonly region: string;
    readonly clientEnv: Readonly<Record<string, string>>;
  }[];
}

/** Environment variable naming `npm start`'s state folder (env files, logs, regions.json). */
export const STATE_DIR_ENV = 'PACELINE_STATE_DIR';

/** `npm start`'s state folder: `PACELINE_STATE_DIR`, else `<repo>/.paceline`. */
export function stateDirOf(env: Env, repoRoot: string): string {
  return env[STATE_DIR_ENV] || join(repoRoot, '.paceline');
}

/** Path of the running local regions' file in a state folder. */
export function localRegionsFile(stateDir: string): string {
  return join(stateDir, 'regions.json');
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The regions of a running `npm start`, or undefined. */
function runningRegions(stateDir: string): LocalRegionsFile | undefined {
  const file = localRegionsFile(stateDir);
  if (!existsSync(file)) return undefined;
  try {
    const running = JSON.parse(readFileSync(file, 'utf8')) as LocalRegionsFile;
    return processAlive(running.pid) ? running : undefined;
  } catch {
    return undefined; // written at this moment, or by a runner that crashed mid-write
  }
}

/** True for a loopback host: the only hosts a local target may name. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h);
}

function hostOfUrl(url: string): string | undefined {
  try {
    return new URL(url).hostname;
  } catch {
    return undefined;
  }
}

/** Every variable that redirects the SDK's endpoints (the global one and each service's). */
function endpointVariablesSet(env: Env): string[] {
  return Object.keys(env)
    .filter((k) => k === 'AWS_ENDPOINT_URL' || k.startsWith('AWS_ENDPOINT_URL_'))
    .filter((k) => env[k])
    .sort();
}

/** True when the environment carries (part of) a local region's variables. */
function hasLocalVariables(env: Env): boolean {
  return Object.values(SERVICE_ENDPOINT_ENV).some((k) => env[k]) || Boolean(env.REDIS_NODES);
}

/**
 * A local target for `needs` from a region's environment: every needed endpoint set and on
 * loopback, Redis too; endpoints restricted to the needed services and marked `localOnly`.
 */
function localTarget(env: Env, needs: TargetNeeds, origin: string): RegionTarget {
  const all = endpointsFromEnv(env);
  const missing: string[] = needs.services.filter((s) => !all[s]).map((s) => SERVICE_ENDPOINT_ENV[s]);
  if (needs.redis && !env.REDIS_NODES) missing.push('REDIS_NODES');
  if (needs.redis && !env.REDIS_MODE) missing.push('REDIS_MODE');
  if (missing.length > 0) {
    throw new CliUsageError(
      `${origin} is incomplete for this command: ${missing.join(', ')} unset, nothing was touched. ` +
        'Source the whole env file (source .paceline/<region>.env) or paste the whole "Client env" line; ' +
        'to act on AWS instead, unset the local variables and pass --aws.',
    );
  }
  const endpoints: { -readonly [K in keyof AwsEndpoints]: AwsEndpoints[K] } = {
    region: all.region,
    localOnly: true,
  };
  for (const service of needs.services) {
    const url = all[service] as string;
    const host = hostOfUrl(url);
    if (host === undefined || !isLoopback(host)) {
      throw new CliUsageError(
        `${SERVICE_ENDPOINT_ENV[service]}=${url} is not a loopback endpoint: a local target stays on this machine ` +
          '(127.0.0.1); to act on AWS, unset the AWS_ENDPOINT_URL_* variables and pass --aws.',
      );
    }
    endpoints[service] = url;
  }
  let redis: RedisConfig | undefined;
  if (needs.redis) {
    try {
      redis = redisConfigFromEnv(env);
    } catch (error) {
      if (error instanceof MissingEnvError || error instanceof InvalidEnvError)
        throw new CliUsageError(`${origin}: ${error.message.split('. Set it')[0]}.`);
      throw error;
    }
    const remote = redis.nodes.find((n) => !isLoopback(n.host));
    if (remote) {
      throw new CliUsageError(
        `REDIS_NODES names ${remote.host}:${remote.port}, not a loopback address: a local target stays on this machine; ` +
          'pass --aws (with REDIS_NODES_<REGION>) to reach an ElastiCache cluster.',
      );
    }
  }
  return { region: all.region, kind: 'local', endpoints, ...(redis ? { redis } : {}), env };
}

/** The AWS targets of `--aws`. */
function awsTargets(wanted: readonly string[] | undefined, env: Env, needs: TargetNeeds): RegionTarget[] {
  const redirected = endpointVariablesSet(env);
  if (redirected.length > 0) {
    throw new CliUsageError(
      `AWS was chosen but ${redirected.join(', ')} ${redirected.length === 1 ? 'is' : 'are'} set (a local region's ` +
        'endpoints, or an override): unset them, or drop --aws to act on the local region.',
    );
  }
  const fromEnv = env.AWS_REGION || env.AWS_DEFAULT_REGION;
  const regions = wanted ?? (fromEnv ? [fromEnv] : []);
  if (regions.length === 0)
    throw new CliUsageError('With --aws, name the regions: --regions us-east-1[,us-west-2] (or AWS_REGION).');
  return regions.map((region) => {
    let redis: RedisConfig | undefined;
    if (needs.redis) {
      const suffix = region.replaceAll('-', '_').toUpperCase();
      const nodes = env[`REDIS_NODES_${suffix}`] ?? (regions.length === 1 ? env.REDIS_NODES : undefined);
      if (!nodes) {
        throw new CliUsageError(
          `Set REDIS_NODES_${suffix} (or REDIS_NODES for one region) to ${region}'s ElastiCache configuration endpoint, from inside its VPC.`,
        );
      }
      redis = redisConfigFromEnv({
        REDIS_NODES: nodes,
        REDIS_MODE: env.REDIS_MODE ?? 'cluster',
        REDIS_TLS: env.REDIS_TLS ?? 'true',
      });
    }
    return { region, kind: 'aws' as const, endpoints: { region }, ...(redis ? { redis } : {}), env };
  });
}

/** Options of {@link resolveTargets}. */
export interface ResolveOptions {
  /** What the command will reach. @default dynamodb and ssm, and Redis */
  readonly needs?: TargetNeeds;
  /**
   * `all`: a command over every region (a sourced env file stands for every region of its
   * `npm start`); `one`: the env's region. @default 'one'
   */
  readonly scope?: 'all' | 'one';
}

const defaultNeeds: TargetNeeds = { services: ['dynamodb', 'ssm'], redis: true };

/** Resolves the targets; throws {@link CliUsageError} when none is chosen or the choice is incomplete. */
export function resolveTargets(
  flags: { readonly aws?: boolean | undefined; readonly regions?: string | undefined },
  env: Env,
  repoRoot: string,
  options: ResolveOptions = {},
): RegionTarget[] {
  const needs = options.needs ?? defaultNeeds;
  const wanted = flags.regions
    ?.split(',')
    .map((r) => r.trim())
    .filter(Boolean);
  if (flags.aws === true || env.PACELINE_TARGET === 'aws') return awsTargets(wanted, env, needs);
  const running = runningRegions(stateDirOf(env, repoRoot));
  if (hasLocalVariables(env)) {
    const own = endpointsFromEnv(env);
    // A sourced env file of a running `npm start` stands for all its regions where the command
    // covers every region: the variables must be that runner's, endpoint for endpoint.
    const sibling = running?.regions.find((r) =>
      (Object.keys(SERVICE_ENDPOINT_ENV) as AwsService[]).every(
        (s) => (r.clientEnv[SERVICE_ENDPOINT_ENV[s]] ?? undefined) === own[s],
      ),
    );
    if (options.scope === 'all' && running && sibling) {
      const regions = running.regions.filter((r) => !wanted || wanted.includes(r.region));
      if (regions.length === 0)
        throw new CliUsageError(`No running local region named ${wanted?.join(',')}.`);
      return regions.map((r) => localTarget(r.clientEnv, needs, `The local region ${r.region}`));
    }
    const target = localTarget(env, needs, `The local region environment (${own.region})`);
    if (wanted && !wanted.includes(target.region)) {
      throw new CliUsageError(
        `The environment points at local region ${target.region}, not ${wanted.join(',')}.`,
      );
    }
    return [target];
  }
  if (running) {
    const regions = running.regions.filter((r) => !wanted || wanted.includes(r.region));
    if (regions.length === 0) throw new CliUsageError(`No running local region named ${wanted?.join(',')}.`);
    return regions.map((r) => localTarget(r.clientEnv, needs, `The local region ${r.region}`));
  }
  throw new CliUsageError(NO_TARGET_HELP);
}

/**
 * A throwaway client of `service` for `region` (AWS), only to ask the SDK where it would send.
 * The SDK modules load here, after the target was chosen: a refused command never loads them.
 */
async function probeClient(
  service: AwsService,
  region: string,
): Promise<{ config: object; destroy(): void }> {
  const endpoints = { region };
  const { dynamoDbClient, kinesisClient, ssmClient } = await import('../../shared/aws/clients.js');
  const { s3Client, sqsClient } = await import('../../shared/aws/ops-clients.js');
  switch (service) {
    case 'dynamodb':
      return dynamoDbClient(endpoints);
    case 'kinesis':
      return kinesisClient(endpoints);
    case 'ssm':
      return ssmClient(endpoints);
    case 's3':
      return s3Client(endpoints);
    case 'sqs':
      return sqsClient(endpoints);
    case 'elasticache':
      throw new Error('no command of the operator CLI reaches the ElastiCache API');
  }
}

/** One target's part of the target line: every endpoint the command will use. */
export async function describeTarget(
  t: RegionTarget,
  needs: TargetNeeds,
  extra: readonly string[] = [],
): Promise<string> {
  const parts: string[] = [];
  for (const service of needs.services) {
    if (t.kind === 'local') {
      parts.push(`${service} ${t.endpoints[service]}`);
      continue;
    }
    const client = await probeClient(service, t.region);
    try {
      parts.push(`${service} ${await clientEndpoint(client, t.region)}`);
    } finally {
      client.destroy();
    }
  }
  if (needs.redis && t.redis)
    parts.push(
      `redis ${t.redis.nodes.map((n) => `${n.host}:${n.port}`).join(',')}${t.redis.tls ? ' (TLS)' : ''}`,
    );
  parts.push(...extra);
  if (t.kind === 'aws') parts.push('credentials: the default chain');
  return `${t.kind === 'aws' ? 'AWS' : 'local'} ${t.region} (${parts.length > 0 ? parts.join(', ') : 'no endpoint'})`;
}

/** The line printed before anything else: what is about to be reached. */
export async function describeTargets(
  targets: readonly RegionTarget[],
  needs: TargetNeeds = defaultNeeds,
): Promise<string> {
  const described = await Promise.all(targets.map((t) => describeTarget(t, needs)));
  return `Target: ${described.join('; ')}`;
}

/**
 * Stands in for an SSM client where SSM is not part of the target (PACER_SHARDS is set, so
 * `resolvePacerShards` does not call it): any call fails instead of reaching an endpoint.
 */
export const NO_SSM = {
  send: () => Promise.reject(new Error("internal: SSM is not part of this command's target")),
} as unknown as SSMClient;

/** The Redis of a target that was resolved with `needs.redis`. */
export function redisOf(t: RegionTarget): RedisConfig {
  if (!t.redis) throw new Error(`internal: target ${t.region} was resolved without Redis`);
  return t.redis;
}

/**
 * The target of the one-region tools (`npm run budgets`, `npm run dead-letters`, and the
 * `paceline` commands that delegate to them) from their environment alone: a local region's
 * complete variables, or AWS with `--aws` / `PACELINE_TARGET=aws`. Returns the target and its
 * line.
 */
export async function targetOf(
  env: Env,
  aws: boolean | undefined,
  needs: TargetNeeds,
  extra: readonly string[] = [],
): Promise<{ readonly target: RegionTarget; readonly text: string }> {
  const chooseAws = aws === true || env.PACELINE_TARGET === 'aws';
  let target: RegionTarget;
  if (chooseAws) {
    [target] = awsTargets(undefined, env, needs) as [RegionTarget];
  } else if (hasLocalVariables(env)) {
    target = localTarget(env, needs, `The local region environment (${endpointsFromEnv(env).region})`);
  } else {
    throw new CliUsageError(NO_TARGET_HELP);
  }
  return { target, text: `Target: ${await describeTarget(target, needs, extra)}` };
}
