/**
 * The local Redis emulator's ports. A cluster node also binds its bus on port + 10000: a free
 * node port with a taken bus port makes redis-server exit at start, and the start must say so at
 * once rather than wait out the PING timeout. Free cluster ports are chosen with both free.
 */
import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { freeClusterPort, freePort } from '../../../local/emulators/net.js';
import { startRedis } from '../../../local/emulators/redis.js';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

async function occupy(port: number): Promise<void> {
  const server = createServer();
  servers.push(server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
}

/** A free port whose bus port (port + 10000) exists. */
async function portWithBus(): Promise<number> {
  for (;;) {
    const port = await freePort();
    if (port + 10_000 <= 65_535) return port;
  }
}

describe('local Redis ports', () => {
  it('freeClusterPort returns ports whose bus port is free and exists', async () => {
    for (let i = 0; i < 20; i++) {
      const port = await freeClusterPort();
      expect(port + 10_000).toBeLessThanOrEqual(65_535);
      await occupy(port);
      await occupy(port + 10_000);
    }
  });

  it('a cluster node whose bus port is taken fails the start at once, naming the exit', async () => {
    const port = await portWithBus();
    await occupy(port + 10_000);
    const started = Date.now();
    await expect(startRedis({ mode: 'cluster', clusterNodes: 1, ports: [port] })).rejects.toThrow(
      new RegExp(`redis-server on port ${port} exited at start \\(exit status \\d+\\)`),
    );
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('a cluster started on chosen free ports forms and stops', async () => {
    const redis = await startRedis({ mode: 'cluster' });
    try {
      expect(redis.nodes).toHaveLength(3);
    } finally {
      await redis.stop();
    }
  });
});
