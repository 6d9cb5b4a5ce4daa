import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningRedis, redisServerAvailable, startRedis } from '../../../local/emulators/redis.js';
import {
  connectRedis,
  parseNodes,
  pipelineByNode,
  type RedisClient,
  slotOf,
} from '../../../shared/redis/connect.js';

describe.each(['standalone', 'cluster'] as const)('Redis %s', (mode) => {
  let redis: RunningRedis;
  let client: RedisClient;
  beforeAll(async () => {
    redis = await startRedis({ mode });
    client = connectRedis({ mode, nodes: parseNodes(redis.nodesEnv), tls: false });
    if (client instanceof Cluster) {
      await new Promise<void>((resolve) => (client as Cluster).once('ready', () => resolve()));
    }
  });
  afterAll(async () => {
    client.disconnect();
    await redis.stop();
  });

  it('pipelines keys of every node and returns results in item order', async () => {
    const keys = Array.from({ length: 300 }, (_, i) => `{user:${i}}:events`);
    if (mode === 'cluster') {
      // The keys really do span all three nodes (else the test proves nothing).
      const owners = new Set(keys.map((k) => (client as Cluster).slots[slotOf(k)]?.[0]));
      expect(owners.size).toBe(3);
    }
    await pipelineByNode(
      client,
      keys,
      (k) => k,
      (p, k) => p.set(k, k.length),
    );
    const results = await pipelineByNode(
      client,
      keys,
      (k) => k,
      (p, k) => p.get(k),
    );
    expect(results.map(([err, value]) => (err ? 'ERR' : value))).toEqual(keys.map((k) => String(k.length)));
  });

  it('returns a per-item error instead of failing the whole pipeline', async () => {
    await client.set('{x}:string', 'v');
    const results = await pipelineByNode(
      client,
      ['{x}:string', '{y}:n'],
      (k) => k,
      (p, k) => p.incr(k),
    );
    expect(results[0]?.[0]).toBeInstanceOf(Error);
    expect(results[1]).toEqual([null, 1]);
  });
});

describe('redis-server discovery', () => {
  it('reports a missing binary instead of crashing', () => {
    expect(redisServerAvailable('/nonexistent/redis-server')).toBe(false);
    expect(redisServerAvailable()).toBe(true);
  });
});
