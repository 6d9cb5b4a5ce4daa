/** A real redis-server (standalone or a 3-node cluster) and a client for it, stopped after the file. */
import { afterAll, beforeAll } from 'vitest';
import { type RunningRedis, startRedis } from '../../local/emulators/redis.js';
import { connectRedis, type RedisClient } from '../../shared/redis/connect.js';

/** Handle filled in `beforeAll`: `handle.redis` is usable inside tests. */
export interface TestRedis {
  server: RunningRedis;
  redis: RedisClient;
}

/** Starts Redis for the current describe block (or file) and stops it afterwards. */
export function useRedis(mode: 'standalone' | 'cluster' = 'standalone'): TestRedis {
  const handle = {} as TestRedis;
  beforeAll(async () => {
    handle.server = await startRedis({ mode });
    handle.redis = connectRedis({
      mode,
      nodes: handle.server.nodes.map((n) => ({ host: '127.0.0.1', port: Number(n.split(':')[1]) })),
      tls: false,
    });
  }, 60_000);
  afterAll(async () => {
    handle.redis?.disconnect();
    await handle.server?.stop();
  });
  return handle;
}
