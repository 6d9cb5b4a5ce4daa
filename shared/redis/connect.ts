/**
 * Redis (ElastiCache) connections and cluster-safe pipelines.
 *
 * ElastiCache runs in cluster mode with TLS; locally a standalone `redis-server` or a real
 * 3-node cluster. ioredis rejects a cluster pipeline whose keys live on different nodes, so
 * every batched operation goes through {@link pipelineByNode}, which splits by owning node.
 */
import calculateSlot from 'cluster-key-slot';
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import { boolEnv, InvalidEnvError, requireEnv } from '../config/env.js';
import { errorKind } from '../errors.js';
import { redisEnv } from '../region/resources.js';
import type { Clock } from '../time/clock.js';
import { type CredentialProvider, type IamAuthTarget, IamTokenRefresher } from './iam-auth.js';
import { setPassword, slotOwner, wrapConnect } from './resp/ioredis-adapter.js';

type Env = Readonly<Record<string, string | undefined>>;

/** A standalone or cluster client. */
export type RedisClient = Redis | Cluster;

/** How to reach Redis. */
export interface RedisConfig {
  readonly mode: 'standalone' | 'cluster';
  /** Seed nodes (cluster) or the single server (standalone). */
  readonly nodes: readonly { readonly host: string; readonly port: number }[];
  /** Use TLS (ElastiCache in-transit encryption). @default false */
  readonly tls: boolean;
  /** ElastiCache IAM authentication (AWS); without it no AUTH is sent (local). @default none */
  readonly iam?: IamAuthTarget;
}

/** Parses `host:port[,host:port…]`. */
export function parseNodes(value: string, variable = redisEnv.nodes): RedisConfig['nodes'] {
  return value.split(',').map((part) => {
    const trimmed = part.trim();
    const idx = trimmed.lastIndexOf(':');
    const port = Number(trimmed.slice(idx + 1));
    if (idx <= 0 || !Number.isInteger(port) || port <= 0 || port > 65_535) {
      throw new InvalidEnvError(variable, value, 'comma-separated host:port pairs');
    }
    return { host: trimmed.slice(0, idx), port };
  });
}

/** Reads {@link RedisConfig} from `REDIS_NODES`, `REDIS_MODE`, `REDIS_TLS`. */
export function redisConfigFromEnv(env: Env = process.env): RedisConfig {
  const mode = requireEnv(redisEnv.mode, env);
  if (mode !== 'standalone' && mode !== 'cluster') {
    throw new InvalidEnvError(redisEnv.mode, mode, '"standalone" or "cluster"');
  }
  const base: RedisConfig = {
    mode,
    nodes: parseNodes(requireEnv(redisEnv.nodes, env)),
    tls: boolEnv(redisEnv.tls, false, env),
  };
  const userId = env[redisEnv.iamUser];
  if (userId === undefined || userId === '') return base;
  const cacheName = requireEnv(redisEnv.cacheName, env);
  const region = env.AWS_REGION ?? env.PACELINE_REGION;
  if (!region)
    throw new InvalidEnvError('AWS_REGION', '', `the cache's region (needed with ${redisEnv.iamUser})`);
  return { ...base, iam: { userId, cacheName, region } };
}

/** Options for {@link connectRedis}. */
export interface ConnectOptions {
  /**
   * Batch concurrent commands issued in the same tick into one round trip. Handlers that
   * process a batch's records concurrently get pipelining for free.
   * @default true
   */
  readonly autoPipelining?: boolean;
  /** Fail commands fast while disconnected instead of queueing them forever. @default 1 */
  readonly maxRetriesPerRequest?: number;
  /** Extra ioredis options. */
  readonly redisOptions?: RedisOptions;
  /**
   * Credentials that sign IAM auth tokens (with `config.iam`).
   * @default the AWS SDK's default provider chain (the function's role in Lambda)
   */
  readonly credentials?: CredentialProvider;
  /** Clock of the token signer. @default systemClock */
  readonly clock?: Clock;
  /** How often a new token is signed, ms (tokens last 15 minutes). @default 600_000 */
  readonly tokenRefreshMs?: number;
}

/**
 * The AWS SDK's default credential chain, loaded only when IAM auth is used. Taken from a
 * DynamoDB client's configuration: every process with a cache also has that client, so no other
 * SDK package is installed for it (the ad-server client's package has no ElastiCache client).
 */
function defaultCredentials(region: string): CredentialProvider {
  let provider: CredentialProvider | undefined;
  return async () => {
    if (!provider) {
      const { DynamoDBClient } = await import('@aws-sdk/client-dynamodb');
      const client = new DynamoDBClient({ region });
      provider = () => client.config.credentials();
    }
    return provider();
  };
}

/**
 * IAM auth: every connect (first, and each reconnect) waits for a signed token and writes it
 * where ioredis reads the password (both through shared/redis/resp/ioredis-adapter.ts), and a
 * timer re-signs it every `tokenRefreshMs`, so a node reconnecting on its own (cluster) also
 * finds a token that is still valid.
 */
function withIamAuth(client: RedisClient, target: IamAuthTarget, options: ConnectOptions): RedisClient {
  const refresher = new IamTokenRefresher(
    {
      target,
      credentials: options.credentials ?? defaultCredentials(target.region),
      ...(options.clock ? { clock: options.clock } : {}),
      ...(options.tokenRefreshMs ? { refreshEveryMs: options.tokenRefreshMs } : {}),
      onError: (error) => client.emit('error', error),
    },
    (token) => setPassword(client, token),
  );
  let started: Promise<void> | undefined;
  wrapConnect(client, async () => {
    if (!started) started = refresher.start();
    else await refresher.refresh().catch(() => undefined); // the timer's token is still valid
    try {
      await started;
    } catch (error) {
      // No first token: fail every queued and later command at once (never hang), loudly.
      started = undefined;
      client.emit('error', error);
      client.disconnect();
      throw error;
    }
  });
  client.once('end', () => refresher.stop());
  const quit = client.quit.bind(client);
  client.quit = ((...args: Parameters<typeof quit>) => {
    refresher.stop();
    return quit(...args);
  }) as typeof client.quit;
  const disconnect = client.disconnect.bind(client);
  client.disconnect = ((reconnect?: boolean) => {
    if (!reconnect) refresher.stop();
    return disconnect(reconnect);
  }) as typeof client.disconnect;
  void client.connect().catch(() => {}); // reported through the 'error' event above
  return client;
}

/** A {@link RedisConfig} that cannot be connected to (the message says what to give). */
export class InvalidRedisConfigError extends errorKind('InvalidRedisConfigError', 'redis.invalid-config') {}

/** Opens a client for `config`. */
export function connectRedis(config: RedisConfig, options: ConnectOptions = {}): RedisClient {
  const base: RedisOptions = {
    maxRetriesPerRequest: options.maxRetriesPerRequest ?? 1,
    enableAutoPipelining: options.autoPipelining ?? true,
    ...(config.tls ? { tls: {} } : {}),
    ...options.redisOptions,
  };
  const first = config.nodes[0];
  if (!first) {
    throw new InvalidRedisConfigError(
      'RedisConfig.nodes is empty: give at least one { host, port } (or REDIS_NODES=host:port,…).',
    );
  }
  // With IAM auth the first connect waits for a signed token (withIamAuth starts it).
  const iam = config.iam ? { username: config.iam.userId, lazyConnect: true } : {};
  if (config.mode === 'standalone') {
    const client = new Redis({ host: first.host, port: first.port, ...base, ...iam });
    return config.iam ? withIamAuth(client, config.iam, options) : client;
  }
  const clusterOptions: ClusterOptions = {
    enableAutoPipelining: base.enableAutoPipelining ?? true,
    redisOptions: { ...base, ...(config.iam ? { username: config.iam.userId } : {}) },
    ...(config.iam ? { lazyConnect: true } : {}),
    // ElastiCache's TLS certificates name the configuration endpoint, not each node's IP.
    ...(config.tls ? { dnsLookup: (address, callback) => callback(null, address) } : {}),
  };
  const cluster = new Cluster(
    config.nodes.map((n) => ({ host: n.host, port: n.port })),
    clusterOptions,
  );
  return config.iam ? withIamAuth(cluster, config.iam, options) : cluster;
}

/** The Redis hash slot of a key (honours `{hash tags}`). */
export function slotOf(key: string): number {
  return calculateSlot(key);
}

/**
 * Resolves once a cluster client knows the slot table (it loads it when it connects); at once for
 * a standalone client. Grouping keys by node before that would put every key in one group.
 */
export async function slotsReady(client: RedisClient): Promise<void> {
  if (!(client instanceof Cluster) || client.status === 'ready') return;
  if (client.status === 'wait') void client.connect().catch(() => {});
  await new Promise<void>((resolve, reject) => {
    const onReady = () => {
      client.off('error', onError);
      resolve();
    };
    const onError = (error: Error) => {
      if (client.status === 'end') {
        client.off('ready', onReady);
        reject(error);
      }
    };
    client.once('ready', onReady);
    client.on('error', onError);
  });
}

/** A pipeline-capable command builder (what `client.pipeline()` returns). */
export type Pipeline = ReturnType<Redis['pipeline']>;

/**
 * Runs one command per item, pipelined, grouping items by the node that owns their key so a
 * cluster pipeline never spans nodes. Returns the results in item order; a command error is
 * returned in its slot (not thrown) so the caller can fail just that item.
 *
 * @param keyOf the key the item's command touches (its hash slot decides the node)
 * @param add   adds exactly one command for the item to the pipeline
 */
export async function pipelineByNode<T>(
  client: RedisClient,
  items: readonly T[],
  keyOf: (item: T) => string,
  add: (pipeline: Pipeline, item: T) => void,
): Promise<Array<[Error | null, unknown]>> {
  const results: Array<[Error | null, unknown]> = new Array(items.length);
  const groups = new Map<string, number[]>();
  await slotsReady(client);
  if (client instanceof Cluster) {
    for (let i = 0; i < items.length; i++) {
      const node = slotOwner(client, slotOf(keyOf(items[i] as T))) ?? 'unknown';
      const group = groups.get(node);
      if (group) group.push(i);
      else groups.set(node, [i]);
    }
  } else {
    groups.set(
      'single',
      items.map((_, i) => i),
    );
  }
  await Promise.all(
    [...groups.values()].map(async (indexes) => {
      const pipeline = client.pipeline() as Pipeline;
      for (const i of indexes) add(pipeline, items[i] as T);
      const out = (await pipeline.exec()) ?? [];
      indexes.forEach((itemIndex, j) => {
        results[itemIndex] = out[j] ?? [new Error('pipeline returned no result'), null];
      });
    }),
  );
  return results;
}
