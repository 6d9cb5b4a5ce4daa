/** A real redis-server (standalone or a 3-node cluster) and a client for it. */
import { Cluster, type Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { type RunningRedis, startRedis } from '../../local/emulators/redis.js';
import {
  connectRedis,
  parseNodes,
  type RedisClient,
  slotOf,
  slotsReady,
} from '../../shared/redis/connect.js';
import { slotOwner } from '../../shared/redis/resp/ioredis-adapter.js';

/** A running server and a client connected to it; `stop()` closes both. */
export interface RedisUnderTest {
  readonly redis: RunningRedis;
  readonly client: RedisClient;
  stop(): Promise<void>;
}

/**
 * Starts redis-server in `mode` and connects a client (the same client ad servers use);
 * `debugCommand` allows `DEBUG` (e.g. `DEBUG SLEEP`) from loopback.
 */
export async function startRedisWithClient(
  mode: 'standalone' | 'cluster',
  options: { readonly debugCommand?: boolean } = {},
): Promise<RedisUnderTest> {
  const redis = await startRedis({ mode, ...options });
  const client = connectRedis({ mode, nodes: parseNodes(redis.nodesEnv), tls: false });
  return {
    redis,
    client,
    async stop() {
      client.disconnect();
      await redis.stop();
    },
  };
}

/** Handle filled in `beforeAll`: `handle.redis` is usable inside tests. */
export interface TestRedis {
  server: RunningRedis;
  redis: RedisClient;
}

/** Starts Redis for the current describe block (or file) and stops it afterwards. */
export function useRedis(
  mode: 'standalone' | 'cluster' = 'standalone',
  options: { readonly debugCommand?: boolean } = {},
): TestRedis {
  const handle = {} as TestRedis;
  beforeAll(async () => {
    const started = await startRedisWithClient(mode, options);
    handle.server = started.redis;
    handle.redis = started.client;
  }, 60_000);
  afterAll(async () => {
    handle.redis?.disconnect();
    await handle.server?.stop();
  });
  return handle;
}

/**
 * Runs `fn` with `cluster`'s slot map pointing `key`'s slot at another master (a stale map, as
 * after a resharding), then puts the map back: raw readers and callers must follow the redirect.
 */
export async function withStaleSlot<T>(cluster: Cluster, key: string, fn: () => Promise<T>): Promise<T> {
  await slotsReady(cluster);
  const slot = slotOf(key);
  const owner = cluster.slots[slot]?.[0] as string;
  const other = Object.values(cluster.slots)
    .map((s) => s[0])
    .find((n) => n !== owner) as string;
  const saved = cluster.slots[slot] as string[];
  cluster.slots[slot] = [other];
  try {
    return await fn();
  } finally {
    cluster.slots[slot] = saved;
  }
}

/** The master holding `key` (the client itself when standalone). */
export function nodeOf(client: RedisClient, key: string): Redis {
  if (!(client instanceof Cluster)) return client;
  const owner = slotOwner(client, slotOf(key));
  return client.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === owner) as Redis;
}

/** Kills every connection on `node` except the one this command runs on; how many it killed. */
export async function killOtherConnections(node: Redis): Promise<number> {
  const own = await node.client('ID');
  const list = String(await node.client('LIST'));
  const ids = [...list.matchAll(/id=(\d+) /g)].map((m) => Number(m[1])).filter((id) => id !== own);
  for (const id of ids) await node.client('KILL', 'ID', String(id)).catch(() => 0);
  return ids.length;
}
