/** A real redis-server (standalone or 3-node cluster) on free loopback ports, with a client. */
import { type RunningRedis, startRedis } from '../../local/emulators/redis.js';
import { connectRedis, parseNodes, type RedisClient } from '../../shared/redis/connect.js';

/** A running server and a client connected to it; `stop()` closes both. */
export interface RedisUnderTest {
  readonly redis: RunningRedis;
  readonly client: RedisClient;
  stop(): Promise<void>;
}

/** Starts redis-server in `mode` and connects a client (the same client ad servers use). */
export async function startRedisWithClient(mode: 'standalone' | 'cluster'): Promise<RedisUnderTest> {
  const redis = await startRedis({ mode });
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
