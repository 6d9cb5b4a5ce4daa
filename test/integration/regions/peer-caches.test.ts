import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type RunningElastiCache,
  startElastiCacheServer,
} from '../../../local/emulators/elasticache-server.js';
import { elastiCacheClient } from '../../../shared/aws/ops-clients.js';
import { PeerCacheDiscoveryError, PeerCaches } from '../../../shared/pacing/regions/cross-region.js';
import type { RedisConfig } from '../../../shared/redis/connect.js';
import { stageNames } from '../../../shared/region/names.js';
import { cacheReplicationGroupId } from '../../../shared/region/resources.js';
import { ManualClock } from '../../../shared/time/clock.js';

/**
 * Peer-cache discovery against the local ElastiCache API (the AWS Query protocol, real SDK
 * client): by the deployment's replication group id, and, in AWS, with IAM authentication as the
 * deployment's cache user, tokens signed for the peer's group in the peer's region.
 */
let api: RunningElastiCache;
beforeAll(async () => {
  api = await startElastiCacheServer({
    region: 'us-west-2',
    redis: { mode: 'cluster', nodes: ['127.0.0.1:7001', '127.0.0.1:7002', '127.0.0.1:7003'] },
  });
});
afterAll(async () => {
  await api.stop();
});

function caches(options: { replicationGroupId?: string; iamUserId?: string }) {
  const seen: RedisConfig[] = [];
  const peers = new PeerCaches({
    clock: new ManualClock(0),
    elasticache: () => elastiCacheClient({ region: 'us-west-2', elasticache: api.url }),
    ...options,
    // Nothing listens there: the client is never used, only how it would connect.
    connect: (config) => {
      seen.push(config);
      return new Redis({ lazyConnect: true });
    },
  });
  return { peers, seen };
}

describe('PeerCaches', () => {
  it("connects to the peer's cache as the deployment's IAM user, with tokens for the peer's group and region", async () => {
    const { peers, seen } = caches({
      replicationGroupId: cacheReplicationGroupId,
      iamUserId: 'paceline-app',
    });
    await peers.redis('us-west-2');
    expect(seen).toEqual([
      {
        mode: 'cluster',
        nodes: [{ host: '127.0.0.1', port: 7001 }],
        tls: false,
        iam: { userId: 'paceline-app', cacheName: cacheReplicationGroupId, region: 'us-west-2' },
      },
    ]);
    peers.close();
  });

  it('without an IAM user (local): no AUTH', async () => {
    const { peers, seen } = caches({});
    await peers.redis('us-west-2');
    expect(seen[0]?.iam).toBeUndefined();
    peers.close();
  });

  it("discovers by the deployment's group id: another stage's id finds no cache here", async () => {
    const { peers } = caches({ replicationGroupId: stageNames('staging').cacheReplicationGroupId });
    await expect(peers.redis('us-west-2')).rejects.toThrow(PeerCacheDiscoveryError);
    await expect(peers.redis('us-west-2')).rejects.toThrow(/staging-paceline/);
    peers.close();
  });
});
