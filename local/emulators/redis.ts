/**
 * Real `redis-server` processes standing in for ElastiCache: one standalone server, or a real
 * 3-node cluster (cluster mode is where hash-slot and cross-node pipeline bugs show up).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './net.js';

/** Raised when `redis-server` is not on PATH; the message says how to install it. */
export class RedisServerMissingError extends Error {
  override readonly name = 'RedisServerMissingError';
  constructor() {
    super(
      'redis-server was not found on PATH. Paceline runs real Redis locally in place of ElastiCache.\n' +
        '  Debian/Ubuntu: sudo apt-get install -y redis-server\n' +
        '  macOS:         brew install redis\n' +
        'then run the command again.',
    );
  }
}

/** True when `redis-server` can be run. */
export function redisServerAvailable(binary = 'redis-server'): boolean {
  const probe = spawnSync(binary, ['--version'], { stdio: 'ignore' });
  return probe.status === 0;
}

/** A running Redis deployment (one server or a cluster). */
export interface RunningRedis {
  readonly mode: 'standalone' | 'cluster';
  /** Every node, `127.0.0.1:port`. */
  readonly nodes: readonly string[];
  /** PIDs of the server processes (tests kill/pause them). */
  readonly pids: readonly number[];
  /** `REDIS_NODES` value. */
  readonly nodesEnv: string;
  stop(): Promise<void>;
  /** Restarts node `index` empty (as an ElastiCache failover without persistence would). */
  restart(index?: number): Promise<void>;
}

interface NodeProc {
  port: number;
  proc: ChildProcess;
  args: string[];
}

async function spawnServer(port: number, dir: string, extra: string[]): Promise<NodeProc> {
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
    '--protected-mode',
    'no',
    ...extra,
  ];
  const node: NodeProc = { port, args, proc: launch(args) };
  await waitForPing(port);
  return node;
}

function launch(args: string[]): ChildProcess {
  const proc = spawn('redis-server', args, { stdio: 'ignore' });
  proc.on('error', () => {});
  return proc;
}

async function waitForPing(port: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const client = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0 });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.ping();
      client.disconnect();
      return;
    } catch {
      client.disconnect();
      if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not answer PING`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }
}

async function stopProc(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  proc.kill('SIGCONT');
  proc.kill('SIGTERM');
  const timer = setTimeout(() => proc.kill('SIGKILL'), 3000);
  await exited;
  clearTimeout(timer);
}

/** Options of {@link startRedis}. */
export interface StartRedisOptions {
  /** @default 'standalone' */
  readonly mode?: 'standalone' | 'cluster';
  /** Cluster size (masters, no replicas). @default 3 */
  readonly clusterNodes?: number;
}

/** Starts `redis-server` on free loopback ports. Throws {@link RedisServerMissingError} if absent. */
export async function startRedis(options: StartRedisOptions = {}): Promise<RunningRedis> {
  if (!redisServerAvailable()) throw new RedisServerMissingError();
  const mode = options.mode ?? 'standalone';
  const dir = mkdtempSync(join(tmpdir(), 'paceline-redis-'));
  const count = mode === 'cluster' ? (options.clusterNodes ?? 3) : 1;
  const nodes: NodeProc[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const port = await freePort();
      const extra =
        mode === 'cluster'
          ? ['--cluster-enabled', 'yes', '--cluster-config-file', join(dir, `nodes-${port}.conf`)]
          : [];
      nodes.push(await spawnServer(port, dir, extra));
    }
    if (mode === 'cluster') await formCluster(nodes.map((n) => n.port));
  } catch (error) {
    await Promise.all(nodes.map((n) => stopProc(n.proc)));
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  const addresses = nodes.map((n) => `127.0.0.1:${n.port}`);
  return {
    mode,
    nodes: addresses,
    get pids() {
      return nodes.map((n) => n.proc.pid ?? -1);
    },
    nodesEnv: addresses.join(','),
    async stop() {
      await Promise.all(nodes.map((n) => stopProc(n.proc)));
      rmSync(dir, { recursive: true, force: true });
    },
    async restart(index = 0) {
      if (mode === 'cluster') throw new Error('restart() is implemented for standalone Redis only');
      const node = nodes[index];
      if (!node) throw new Error(`no node ${index}`);
      await stopProc(node.proc);
      node.proc = launch(node.args);
      await waitForPing(node.port);
    },
  };
}

/**
 * Forms a cluster without redis-cli: split the 16384 slots evenly, MEET every node, wait until
 * every node reports `cluster_state:ok` and agrees on the slot map.
 */
async function formCluster(ports: number[]): Promise<void> {
  const clients = ports.map((port) => new Redis({ port, host: '127.0.0.1' }));
  try {
    const per = Math.ceil(16384 / ports.length);
    await Promise.all(
      clients.map((c, i) => c.call('CLUSTER', 'ADDSLOTSRANGE', i * per, Math.min(16383, (i + 1) * per - 1))),
    );
    for (const c of clients.slice(1)) await c.call('CLUSTER', 'MEET', '127.0.0.1', ports[0] as number);
    const deadline = Date.now() + 20_000;
    for (;;) {
      const infos = await Promise.all(clients.map((c) => c.call('CLUSTER', 'INFO') as Promise<string>));
      const ok = infos.every(
        (info) => info.includes('cluster_state:ok') && info.includes(`cluster_known_nodes:${ports.length}`),
      );
      if (ok) {
        const slots = await Promise.all(clients.map((c) => c.call('CLUSTER', 'SLOTS') as Promise<unknown[]>));
        if (slots.every((s) => s.length === ports.length)) return;
      }
      if (Date.now() > deadline) throw new Error('Redis cluster did not converge within 20 s');
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    for (const c of clients) c.disconnect();
  }
}
