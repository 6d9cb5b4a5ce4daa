/**
 * connectRedis with IAM auth against a real redis-server: the server's ACL user stands in for the
 * ElastiCache IAM user, its password set to exactly the token the signer produces for fixed
 * credentials and time. Proves the client authenticates as the user with the signed token, and
 * that a reconnect after the clock moved authenticates with a freshly signed one (the old token
 * no longer accepted).
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningRedis, startRedis } from '../../../local/emulators/redis.js';
import { connectRedis, parseNodes, type RedisClient } from '../../../shared/redis/connect.js';
import { elastiCacheAuthToken } from '../../../shared/redis/iam-auth.js';
import { ManualClock } from '../../../shared/time/clock.js';

const credentials = { accessKeyId: 'AKIDTEST', secretAccessKey: 'secret', sessionToken: 'tok' };
const target = { userId: 'paceline-app', cacheName: 'paceline', region: 'us-east-1' };

let server: RunningRedis;
let admin: Redis;
beforeAll(async () => {
  server = await startRedis({ mode: 'standalone' });
  const [node] = parseNodes(server.nodesEnv);
  admin = new Redis({ host: node?.host, port: node?.port });
}, 60_000);
afterAll(async () => {
  admin?.disconnect();
  await server?.stop();
});

async function allowOnly(token: string): Promise<void> {
  await admin.call('ACL', 'SETUSER', target.userId, 'reset', 'on', `>${token}`, '~*', '&*', '+@all');
}

describe('connectRedis with IAM auth (real redis-server ACL user)', () => {
  let client: RedisClient | undefined;
  afterAll(() => client?.disconnect());

  it('authenticates as the IAM user with the signed token, and re-signs on reconnect', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 23, 12, 0, 0));
    const first = await elastiCacheAuthToken(target, credentials, clock);
    await allowOnly(first);
    client = connectRedis(
      { mode: 'standalone', nodes: parseNodes(server.nodesEnv), tls: false, iam: target },
      { credentials: async () => credentials, clock, maxRetriesPerRequest: 20 },
    );
    client.on('error', () => {});
    expect(await client.call('ACL', 'WHOAMI')).toBe(target.userId);
    await client.set('iam:k', '1');

    // 14 minutes later the first token is about to expire: the server now accepts only the new
    // one (and the old connection is dropped, as ElastiCache does after a connection's lifetime).
    clock.advance(14 * 60_000);
    const second = await elastiCacheAuthToken(target, credentials, clock);
    expect(second).not.toBe(first);
    await allowOnly(second);
    await admin.call('CLIENT', 'KILL', 'USER', target.userId);
    expect(await client.get('iam:k')).toBe('1');
    expect(await client.call('ACL', 'WHOAMI')).toBe(target.userId);
  });

  it('without IAM config sends no AUTH (local regions)', async () => {
    const plain = connectRedis({ mode: 'standalone', nodes: parseNodes(server.nodesEnv), tls: false });
    try {
      expect(await plain.call('ACL', 'WHOAMI')).toBe('default');
    } finally {
      plain.disconnect();
    }
  });

  it('fails loudly when no token can be signed', async () => {
    const broken = connectRedis(
      { mode: 'standalone', nodes: parseNodes(server.nodesEnv), tls: false, iam: target },
      {
        credentials: async () => {
          throw new Error('no credentials in the chain');
        },
      },
    );
    const errors: Error[] = [];
    broken.on('error', (e: Error) => errors.push(e));
    await expect(broken.ping()).rejects.toThrow();
    broken.disconnect();
    expect(errors.some((e) => /Could not sign an ElastiCache IAM auth token/.test(e.message))).toBe(true);
  });
});

describe('connectRedis with IAM auth on a 3-node cluster (real redis-server ACL users)', () => {
  let cluster: RunningRedis;
  let admins: Redis[] = [];
  beforeAll(async () => {
    cluster = await startRedis({ mode: 'cluster' });
    admins = parseNodes(cluster.nodesEnv).map((n) => new Redis({ host: n.host, port: n.port }));
  }, 60_000);
  afterAll(async () => {
    for (const a of admins) a.disconnect();
    await cluster?.stop();
  });
  const allowOnlyEverywhere = (token: string) =>
    Promise.all(
      admins.map((a) =>
        a.call('ACL', 'SETUSER', target.userId, 'reset', 'on', `>${token}`, '~*', '&*', '+@all'),
      ),
    );

  it('authenticates every node connection, and reconnects with the refreshed token', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 23, 13, 0, 0));
    await allowOnlyEverywhere(await elastiCacheAuthToken(target, credentials, clock));
    const client = connectRedis(
      { mode: 'cluster', nodes: parseNodes(cluster.nodesEnv), tls: false, iam: target },
      { credentials: async () => credentials, clock, tokenRefreshMs: 100, maxRetriesPerRequest: 20 },
    );
    client.on('error', () => {});
    try {
      // Keys on every node (different slots).
      for (let i = 0; i < 30; i++) await client.set(`iam:{k${i}}`, String(i));
      expect(await client.get('iam:{k29}')).toBe('29');
      // The clock moves; the timer re-signs; the nodes now accept only the new token.
      clock.advance(12 * 60_000);
      const next = await elastiCacheAuthToken(target, credentials, clock);
      await new Promise((r) => setTimeout(r, 400));
      await allowOnlyEverywhere(next);
      await Promise.all(admins.map((a) => a.call('CLIENT', 'KILL', 'USER', target.userId)));
      // A cluster client fails the commands in flight on a killed connection (ioredis does not
      // retry "Connection is closed"); within a few attempts its new node connections are up —
      // authenticated with the new token, as the old one is refused now.
      let first: string | null = null;
      for (let attempt = 0; attempt < 50 && first === null; attempt++) {
        first = await client.get('iam:{k0}').catch(async () => {
          await new Promise((r) => setTimeout(r, 100));
          return null;
        });
      }
      expect(first).toBe('0');
      for (let i = 0; i < 30; i++) expect(await client.get(`iam:{k${i}}`)).toBe(String(i));
      const users = await Promise.all(admins.map((a) => a.call('CLIENT', 'LIST')));
      expect(users.join('')).toContain(`user=${target.userId}`);
    } finally {
      client.disconnect();
    }
  });
});
