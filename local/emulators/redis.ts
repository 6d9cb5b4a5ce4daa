/**
 * Real `redis-server` processes standing in for ElastiCache: one standalone server, or a real
 * 3-node cluster (cluster mode is where hash-slot and cross-node pipeline bugs show up).
 *
 * Supervised: a server that dies (crash, OOM kill, `kill -9`) is reported and restarted on the
 * same port, with the same arguments. Without a data directory it comes back empty, as an
 * ElastiCache node replaced without persistence would, and the spend path rebuilds its live
 * counters from the ledger; with one it replays its append-only file.
 */

import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { PacelineError } from '../../shared/errors.js';
import { freeClusterPort, freePort } from './net.js';
import { restartDelayMs, type SupervisionListener } from './supervision.js';
import { watchProcess } from './watchdog.js';

/** Raised when `redis-server` is not on PATH; the message says how to install it. */
export class RedisServerMissingError extends PacelineError {
  override readonly name = 'RedisServerMissingError';
  override readonly code = 'local.redis-server-missing';
  constructor() {
    super(
      'redis-server was not found on PATH. Paceline runs real Redis locally in place of ElastiCache.\n' +
        '  Debian/Ubuntu: sudo apt-get install -y redis-server\n' +
        '  macOS:         brew install redis\n' +
        'then run the command again.',
    );
  }
}

/** Binaries found runnable by {@link redisServerAvailable} (a miss is probed again: it may be installed meanwhile). */
const runnable = new Set<string>();

/**
 * True when `redis-server` can be run. A success is remembered: `startLocalRegion` checks before
 * its port check and `startRedis` again, and each probe spawns a process.
 */
export function redisServerAvailable(binary = 'redis-server'): boolean {
  if (runnable.has(binary)) return true;
  const probe = spawnSync(binary, ['--version'], { stdio: 'ignore' });
  if (probe.status === 0) runnable.add(binary);
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
  /**
   * Fault injection: node `index` goes down (SIGKILL) and stays down — the supervisor does not
   * revive it — until {@link restart} brings it back empty. For tests of an outage that lasts.
   */
  down(index?: number): Promise<void>;
  /** Unexpected exits seen so far (each was followed by a restart attempt). */
  readonly unexpectedExits: number;
}

interface NodeProc {
  port: number;
  proc: ChildProcess;
  args: string[];
  /** Set while a stop or a deliberate restart is under way: that exit is not a crash. */
  expectedExit: boolean;
}

function serverArgs(port: number, dir: string, persistent: boolean, extra: string[]): string[] {
  return [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    // Persistent: every write goes to the append-only file, fsynced once a second (ElastiCache's
    // AOF setting); a crash loses at most the last second, and the spend rebuild covers that.
    '--appendonly',
    persistent ? 'yes' : 'no',
    ...(persistent ? ['--appendfsync', 'everysec', '--appendfilename', `appendonly-${port}.aof`] : []),
    ...(persistent ? ['--appenddirname', `appendonly-${port}`] : []),
    '--dir',
    dir,
    '--protected-mode',
    'no',
    ...extra,
  ];
}

async function spawnServer(port: number, args: string[]): Promise<NodeProc> {
  const node: NodeProc = { port, args, proc: launch(args), expectedExit: false };
  await waitForPing(port, node.proc);
  return node;
}

/** Every redis-server this process started and that has not exited (for {@link killServersOnSignal}). */
const liveServers = new Set<ChildProcess>();

function launch(args: string[]): ChildProcess {
  // Its own process group: a Ctrl-C in the terminal reaches the runner, which stops the servers
  // in order, instead of killing them under it (and being reported as a crash). The watchdog
  // stops them if the runner dies without doing so (kill -9, the OOM killer).
  const proc = spawn('redis-server', args, { stdio: 'ignore', detached: true });
  proc.on('error', () => {});
  watchProcess(proc, 'redis-server');
  liveServers.add(proc);
  proc.once('exit', () => liveServers.delete(proc));
  return proc;
}

/**
 * For one-shot tools (`npm run sim`, `npm run bench`): on SIGINT, SIGTERM or SIGHUP, kill every
 * redis-server this process started, then die of the same signal. The servers run in their own
 * process group, so neither `kill` nor a Ctrl-C reaches them directly; without this they would
 * be left running, parented to init. Long-running programs with their own graceful stop
 * (`npm start`) do not use it.
 */
export function killServersOnSignal(): void {
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      for (const proc of liveServers) proc.kill('SIGKILL');
      // The listener is gone (once): the re-raised signal takes its default action.
      process.kill(process.pid, signal);
    });
  }
}

/**
 * Waits until the server on `port` answers PING. With `proc`, fails at once when that process
 * has exited (a taken port, a bad argument) instead of waiting out the timeout.
 */
async function waitForPing(port: number, proc?: ChildProcess, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc && (proc.exitCode !== null || proc.signalCode !== null)) {
      throw new Error(`redis-server on port ${port} exited at start (${exitReason(proc)})`);
    }
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

function exitReason(proc: ChildProcess): string {
  return proc.signalCode ? `signal ${proc.signalCode}` : `exit status ${proc.exitCode}`;
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
  /**
   * Ports of the nodes, in order (stable ports: a restarted runner keeps its endpoints).
   * @default free loopback ports
   */
  readonly ports?: readonly number[];
  /**
   * Persistent state: the servers keep an append-only file (and the cluster its `nodes-*.conf`)
   * in this directory, kept on stop, replayed on the next start. @default a temporary directory,
   * no persistence, deleted on stop
   */
  readonly dataDir?: string;
  /**
   * Called when a server dies unexpectedly and when the supervisor restarts it (on the same
   * port). @default no report (the restart still happens)
   */
  readonly onEvent?: SupervisionListener;
  /**
   * Fault injection for tests: `DEBUG` (e.g. `DEBUG SLEEP 2`, a node busy for 2 s) allowed from
   * loopback connections (`--enable-debug-command local`). ElastiCache has no `DEBUG`: never set
   * by the local region. @default false
   */
  readonly debugCommand?: boolean;
}

/**
 * Starts `redis-server` (on free loopback ports unless `ports` are given) and supervises it.
 * Throws {@link RedisServerMissingError} if absent.
 */
export async function startRedis(options: StartRedisOptions = {}): Promise<RunningRedis> {
  if (!redisServerAvailable()) throw new RedisServerMissingError();
  const mode = options.mode ?? 'standalone';
  const persistent = options.dataDir !== undefined;
  const dir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'paceline-redis-'));
  if (persistent) mkdirSync(dir, { recursive: true });
  const count = mode === 'cluster' ? (options.clusterNodes ?? 3) : 1;
  if (options.ports && options.ports.length !== count) {
    throw new Error(`startRedis: ${count} port(s) needed for ${mode}, got ${options.ports.length}`);
  }
  const nodes: NodeProc[] = [];
  let stopped = false;
  let unexpectedExits = 0;
  const report = options.onEvent ?? (() => {});
  const supervise = (node: NodeProc) => {
    const proc = node.proc;
    proc.once('exit', () => {
      if (stopped || node.expectedExit || node.proc !== proc) return;
      unexpectedExits++;
      report({
        type: 'died',
        component: `redis-server (pid ${proc.pid ?? -1})`,
        address: `127.0.0.1:${node.port}`,
        reason: exitReason(proc),
      });
      void revive(node, 0);
    });
  };
  const revive = async (node: NodeProc, attempt: number): Promise<void> => {
    const wait = restartDelayMs(attempt);
    if (wait > 0) await new Promise((r) => setTimeout(r, wait).unref());
    if (stopped) return;
    try {
      node.proc = launch(node.args);
      supervise(node);
      await waitForPing(node.port);
      report({
        type: 'restarted',
        component: 'redis-server',
        address: `127.0.0.1:${node.port}`,
        state: persistent
          ? `pid ${node.proc.pid}, data replayed from its append-only file`
          : `pid ${node.proc.pid}, empty: live spend counters are rebuilt from the ledger on the next notice, caches refill`,
      });
    } catch (error) {
      if (stopped) return;
      report({
        type: 'restart-failed',
        component: 'redis-server',
        address: `127.0.0.1:${node.port}`,
        error: error instanceof Error ? error.message : String(error),
        retryInMs: restartDelayMs(attempt + 1),
      });
      // The launched process may still be starting (or have exited): stop it before retrying so
      // two servers never race for the port.
      node.expectedExit = true;
      await stopProc(node.proc);
      node.expectedExit = false;
      await revive(node, attempt + 1);
    }
  };
  try {
    await launchNodes(options, { mode, count, dir, persistent }, (node) => {
      supervise(node);
      nodes.push(node);
    });
  } catch (error) {
    stopped = true;
    await Promise.all(nodes.map((n) => stopProc(n.proc)));
    if (!persistent) rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  const addresses = nodes.map((n) => `127.0.0.1:${n.port}`);
  return {
    mode,
    nodes: addresses,
    get pids() {
      return nodes.map((n) => n.proc.pid ?? -1);
    },
    get unexpectedExits() {
      return unexpectedExits;
    },
    nodesEnv: addresses.join(','),
    async stop() {
      stopped = true;
      await Promise.all(nodes.map((n) => stopProc(n.proc)));
      if (!persistent) rmSync(dir, { recursive: true, force: true });
    },
    async down(index = 0) {
      const node = nodes[index];
      if (!node) throw new Error(`no node ${index}`);
      node.expectedExit = true;
      const exited = new Promise<void>((resolve) => node.proc.once('exit', () => resolve()));
      node.proc.kill('SIGKILL');
      await exited;
    },
    async restart(index = 0) {
      if (mode === 'cluster') throw new Error('restart() is implemented for standalone Redis only');
      const node = nodes[index];
      if (!node) throw new Error(`no node ${index}`);
      node.expectedExit = true;
      await stopProc(node.proc);
      // "Empty", as documented, even with an append-only file.
      if (persistent) rmSync(join(dir, `appendonly-${node.port}`), { recursive: true, force: true });
      node.expectedExit = false;
      node.proc = launch(node.args);
      supervise(node);
      await waitForPing(node.port);
    },
  };
}

/**
 * Spawns the servers (each handed to `started` at once, so a failure stops those already up) and,
 * in cluster mode, forms the cluster.
 */
async function launchNodes(
  options: StartRedisOptions,
  layout: { mode: 'standalone' | 'cluster'; count: number; dir: string; persistent: boolean },
  started: (node: NodeProc) => void,
): Promise<void> {
  const { mode, dir } = layout;
  const ports: number[] = [];
  for (let i = 0; i < layout.count; i++) {
    const port = options.ports?.[i] ?? (await (mode === 'cluster' ? freeClusterPort() : freePort()));
    const extra = [
      ...(mode === 'cluster'
        ? ['--cluster-enabled', 'yes', '--cluster-config-file', join(dir, `nodes-${port}.conf`)]
        : []),
      ...(options.debugCommand ? ['--enable-debug-command', 'local'] : []),
    ];
    started(await spawnServer(port, serverArgs(port, dir, layout.persistent, extra)));
    ports.push(port);
  }
  // A persistent cluster formed by an earlier run reloads its slot map from nodes-*.conf.
  if (mode === 'cluster') await formCluster(ports);
}

/**
 * Forms a cluster without redis-cli: split the 16384 slots evenly, MEET every node, wait until
 * every node reports `cluster_state:ok` and agrees on the slot map.
 */
async function formCluster(ports: number[]): Promise<void> {
  const clients = ports.map((port) => new Redis({ port, host: '127.0.0.1' }));
  try {
    const assigned = await Promise.all(clients.map((c) => c.call('CLUSTER', 'INFO') as Promise<string>));
    if (assigned.every((info) => !info.includes('cluster_slots_assigned:0'))) {
      await waitForConvergence(clients, ports.length);
      return;
    }
    const per = Math.ceil(16384 / ports.length);
    await Promise.all(
      clients.map((c, i) => c.call('CLUSTER', 'ADDSLOTSRANGE', i * per, Math.min(16383, (i + 1) * per - 1))),
    );
    for (const c of clients.slice(1)) await c.call('CLUSTER', 'MEET', '127.0.0.1', ports[0] as number);
    await waitForConvergence(clients, ports.length);
  } finally {
    for (const c of clients) c.disconnect();
  }
}

/** Waits until every node reports `cluster_state:ok` and agrees on the slot map. */
async function waitForConvergence(clients: Redis[], size: number): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const infos = await Promise.all(clients.map((c) => c.call('CLUSTER', 'INFO') as Promise<string>));
    const ok = infos.every(
      (info) => info.includes('cluster_state:ok') && info.includes(`cluster_known_nodes:${size}`),
    );
    if (ok) {
      const slots = await Promise.all(clients.map((c) => c.call('CLUSTER', 'SLOTS') as Promise<unknown[]>));
      if (slots.every((s) => s.length === size)) return;
    }
    if (Date.now() > deadline) throw new Error('Redis cluster did not converge within 20 s');
    await new Promise((r) => setTimeout(r, 100));
  }
}
