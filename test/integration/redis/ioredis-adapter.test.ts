/**
 * The ioredis internals Paceline uses, all in shared/redis/resp/ioredis-adapter.ts, checked
 * against real redis-server (standalone and a 3-node cluster) with the installed ioredis: the
 * cluster slot table routes each key to the master the server says owns it; the options carry the
 * TLS flag and the credentials a raw connection must use, and a password written by the adapter
 * is the one the next connect authenticates with (cluster nodes included); a wrapped `connect`
 * waits for its hook, and commands queued on a lazy client before it still run (the private
 * `condition` they are queued with). If an ioredis upgrade changes any of them, a test here fails
 * — the first one as soon as the version differs, naming what to re-check.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningRedis, startRedis } from '../../../local/emulators/redis.js';
import { slotOf, slotsReady } from '../../../shared/redis/connect.js';
import {
  connectionSettings,
  IOREDIS_VERSION_CHECKED,
  nodeOfKey,
  setPassword,
  slotOwner,
  standaloneNode,
  wrapConnect,
} from '../../../shared/redis/resp/ioredis-adapter.js';
import { useRedis } from '../../support/redis.js';

const require = createRequire(import.meta.url);

it('runs with the ioredis version the adapter was checked against', () => {
  const installed = JSON.parse(readFileSync(require.resolve('ioredis/package.json'), 'utf8')).version;
  expect(
    installed,
    `ioredis is ${installed}, the adapter was checked with ${IOREDIS_VERSION_CHECKED}: run this file, ` +
      'check each internal in shared/redis/resp/ioredis-adapter.ts against the new source, then ' +
      'update IOREDIS_VERSION_CHECKED',
  ).toBe(IOREDIS_VERSION_CHECKED);
});

describe('cluster', () => {
  const r = useRedis('cluster');

  it("routes every key to the master the server's own slot map names", async () => {
    const cluster = r.redis as Cluster;
    await slotsReady(cluster);
    // The server's map: [start, end, [host, port, id], …replicas] per range.
    const ranges = (await cluster.call('CLUSTER', 'SLOTS')) as [number, number, [string, number]][];
    const owner = (slot: number) => {
      const range = ranges.find(([from, to]) => slot >= from && slot <= to);
      return range ? `${range[2][0]}:${range[2][1]}` : undefined;
    };
    const masters = new Set<string>();
    for (let i = 0; i < 2_000; i++) {
      const key = `route:{${i}}`;
      const slot = slotOf(key);
      expect(slotOwner(cluster, slot)).toBe(owner(slot));
      expect(nodeOfKey(cluster, key)).toBe(owner(slot));
      masters.add(nodeOfKey(cluster, key) as string);
    }
    expect(masters.size).toBe(3);
    for (const slot of [0, 5460, 5461, 10922, 10923, 16383])
      expect(slotOwner(cluster, slot)).toBe(owner(slot));
  });

  it('gives every node the password it writes, which their next connects authenticate with', async () => {
    const seeds = r.server.nodes.map((n) => ({
      host: n.split(':')[0] as string,
      port: Number(n.split(':')[1]),
    }));
    const admin = new Cluster(seeds);
    const cluster = new Cluster(seeds, { lazyConnect: true, redisOptions: { username: 'adapter' } });
    try {
      await slotsReady(admin);
      const allow = async (password: string) => {
        for (const node of admin.nodes('master'))
          await node.call(
            'ACL',
            'SETUSER',
            'adapter',
            'on',
            'resetpass',
            `>${password}`,
            '~*',
            '&*',
            '+@all',
          );
      };
      await allow('pw-1');
      expect(connectionSettings(cluster)).toEqual({ tls: false, username: 'adapter' });
      setPassword(cluster, 'pw-1');
      expect(connectionSettings(cluster)).toEqual({ tls: false, username: 'adapter', password: 'pw-1' });
      await slotsReady(cluster);
      expect(cluster.nodes('all').length).toBe(3);
      // Rotated: every node's connection is re-made and must authenticate with pw-2.
      await allow('pw-2');
      setPassword(cluster, 'pw-2');
      for (const node of cluster.nodes('all')) node.disconnect(true);
      for (let i = 0; i < 30; i++) expect(await cluster.set(`auth:{${i}}`, 'x')).toBe('OK');
      for (const node of admin.nodes('master')) {
        expect(String(await node.client('LIST'))).toMatch(/user=adapter/);
      }
    } finally {
      for (const node of admin.nodes('master')) await node.call('ACL', 'DELUSER', 'adapter').catch(() => 0);
      cluster.disconnect();
      admin.disconnect();
    }
  });
});

describe('standalone', () => {
  let server: RunningRedis;
  let admin: Redis;
  beforeAll(async () => {
    server = await startRedis({ mode: 'standalone' });
    admin = new Redis(Number(server.nodes[0]?.split(':')[1]));
  }, 60_000);
  afterAll(async () => {
    admin?.disconnect();
    await server?.stop();
  });
  const port = () => Number(server.nodes[0]?.split(':')[1]);

  it('names its node and reads the settings a raw connection needs, and routes only once ready', async () => {
    const client = new Redis({ host: '127.0.0.1', port: port(), lazyConnect: true, username: 'u', tls: {} });
    expect(standaloneNode(client)).toBe(`127.0.0.1:${port()}`);
    expect(connectionSettings(client)).toEqual({ tls: true, username: 'u' });
    expect(nodeOfKey(client, 'k')).toBeUndefined(); // not connected: calls go through ioredis
    client.disconnect();
    const plain = new Redis({ host: '127.0.0.1', port: port() });
    await plain.ping();
    expect(nodeOfKey(plain, 'k')).toBe(`127.0.0.1:${port()}`);
    plain.disconnect();
  });

  it('waits for the hook before each connect, and runs the commands queued before the first', async () => {
    await admin.call('ACL', 'SETUSER', 'lazy', 'on', '>first', '~*', '&*', '+@all');
    const client = new Redis({ host: '127.0.0.1', port: port(), lazyConnect: true, username: 'lazy' });
    const hooked: string[] = [];
    let password = 'first';
    wrapConnect(client, async () => {
      await new Promise((resolve) => setTimeout(resolve, 30));
      hooked.push(password);
      setPassword(client, password);
    });
    try {
      // Queued before any connect (the private `condition` ioredis queues them with must exist).
      // The first command starts the connect (lazyConnect), through the hook.
      expect(await client.set('lazy-key', 'v')).toBe('OK');
      expect(hooked).toEqual(['first']);
      // ioredis's own connect() sets the condition the adapter stands in for, with the same shape.
      const condition = (client as unknown as { condition?: Record<string, unknown> }).condition;
      expect(condition).toMatchObject({ select: 0, subscriber: false });
      // A reconnect goes through the hook again, with the password it writes.
      await admin.call('ACL', 'SETUSER', 'lazy', 'resetpass', '>second');
      password = 'second';
      client.disconnect();
      await client.connect();
      expect(await client.get('lazy-key')).toBe('v');
      expect(hooked).toEqual(['first', 'second']);
    } finally {
      client.disconnect();
      await admin.call('ACL', 'DELUSER', 'lazy');
    }
  });
});
