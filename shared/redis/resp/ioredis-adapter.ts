/**
 * Every use of ioredis internals in Paceline, in one file: the cluster client's slot table
 * (`slots`), the options a client connects with, its private `condition`, and the `connect` that
 * IAM auth wraps. ioredis documents none of them as API, so an upgrade may change them; the test
 * test/integration/redis/ioredis-adapter.test.ts checks each one against real redis-server
 * (standalone and cluster) and pins the version they were checked with: after an upgrade it fails
 * and says what to re-check here.
 */
import calculateSlot from 'cluster-key-slot';
import { Cluster } from 'ioredis';
import type { RedisClient } from '../connect.js';

/** The ioredis version the internals below were checked against (package.json pins it). */
export const IOREDIS_VERSION_CHECKED = '5.9.2';

/**
 * `host:port` of the master owning `slot` in a cluster client's slot table, `undefined` while the
 * table has no owner for it (not loaded yet, or a slot being migrated).
 */
export function slotOwner(cluster: Cluster, slot: number): string | undefined {
  // `Cluster.slots[slot]` is the list of nodes serving the slot, master first.
  return cluster.slots[slot]?.[0];
}

/** `host:port` of a standalone client (the node every key lives on). */
export function standaloneNode(client: RedisClient): string {
  const opts = client instanceof Cluster ? undefined : client.options;
  return `${opts?.host ?? '127.0.0.1'}:${opts?.port ?? 6379}`;
}

/** How a client connects to its nodes: TLS, and the credentials it holds right now. */
export interface ConnectionSettings {
  readonly tls: boolean;
  readonly username?: string;
  readonly password?: string;
}

/**
 * The application's client's connection settings, read at each call: with ElastiCache IAM auth
 * the password is the token {@link setPassword} last wrote, as ioredis reads it at each connect.
 */
export function connectionSettings(client: RedisClient): ConnectionSettings {
  const opts = client instanceof Cluster ? client.options.redisOptions : client.options;
  return {
    tls: opts?.tls !== undefined,
    ...(opts?.username ? { username: opts.username } : {}),
    ...(opts?.password ? { password: opts.password } : {}),
  };
}

/**
 * Writes `password` where ioredis reads it at its next connect: the client's options and, for a
 * cluster, the shared node options and every node's own (a cluster copies them into each node).
 */
export function setPassword(client: RedisClient, password: string): void {
  if (client instanceof Cluster) {
    if (client.options.redisOptions) client.options.redisOptions.password = password;
    for (const node of client.nodes('all')) node.options.password = password;
  } else {
    client.options.password = password;
  }
}

/**
 * Makes every connect of `client` (the first, and each reconnect, which ioredis also starts with
 * `connect()`) wait for `before` first. A lazy standalone client queues the commands issued before
 * its first connect with the private `condition` that `connect()` sets: it gets the same initial
 * value here, since `connect()` now runs only after `before`.
 */
export function wrapConnect(client: RedisClient, before: () => Promise<void>): void {
  const connect = client.connect.bind(client) as (cb?: () => void) => Promise<void>;
  if (!(client instanceof Cluster)) {
    const internal = client as unknown as { condition?: { select: number; subscriber: boolean } };
    internal.condition ??= { select: client.options.db ?? 0, subscriber: false };
  }
  (client as { connect: (cb?: () => void) => Promise<void> }).connect = async () => {
    await before();
    return connect();
  };
}

/**
 * The node a raw call for `key` goes to: the slot owner in a cluster client's table, the server of
 * a standalone client; `undefined` when the client is not ready (connecting, reconnecting: its
 * offline queue and retry policy apply) or the slot has no known owner — such calls go through
 * ioredis.
 */
export function nodeOfKey(client: RedisClient, key: string): string | undefined {
  if (client.status !== 'ready') return undefined;
  return client instanceof Cluster ? slotOwner(client, calculateSlot(key)) : standaloneNode(client);
}
