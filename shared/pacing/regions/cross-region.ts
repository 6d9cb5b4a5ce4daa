/**
 * The cross-region publish switch (DESIGN.md requirement 3): in every region the SSM parameter
 * `/paceline/<region>/publisher-region` names the region whose pacer publishes into that
 * region's cache. A pacer publishes into every cache whose switch names its own region: its own
 * cache (switch at home) and, after a failover, a peer's — computing the peer's parameters from
 * the peer's live counters and the peer's share of each budget.
 *
 * No window with two writers: the switch's version is the fence's generation g, compared before
 * the override version and the lease epoch (`fence.ts`), and the claim script refuses a lower
 * fence. Flipping A's switch to B bumps g: B's pacer claims A's shard ticks with (g+1, o_B, e_B),
 * which outranks anything A's pacers hold; a stale A claim (a paused leader) is refused. Flipping
 * back bumps g again and A's pacers outrank B's. Between the flip and the first claim of the new
 * side at most one tick goes without a publisher (every instance reads the switch every tick).
 *
 * Peer caches are discovered, not configured: ElastiCache `DescribeReplicationGroups` on the
 * peer's replication group ({@link cacheReplicationGroupId}) in the peer's region, cached for
 * `ttlMs` and re-discovered after a connection failure.
 */

import {
  DescribeReplicationGroupsCommand,
  type DescribeReplicationGroupsCommandOutput,
  type ElastiCacheClient,
} from '@aws-sdk/client-elasticache';
import type { ResolvedPlan } from '../../budget/model.js';
import { errorKind } from '../../errors.js';
import { connectRedis, type RedisClient, type RedisConfig } from '../../redis/connect.js';
import { cacheReplicationGroupId } from '../../region/resources.js';
import { type Clock, systemClock } from '../../time/clock.js';
import type { FlightClosePass, FlightCloser } from '../flight-closer.js';
import type { LeaseView } from '../lease.js';
import type { ControlHandle, LeaseHandle, ShardPacer, TickOutcome } from '../pacer.js';
import type { AllocationAuthority, AuthorityTickOutcome } from './allocation-authority.js';
import type { RegionSpendView } from './region-spend-items.js';

/** Thrown when a peer region's cache cannot be found or described. */
export class PeerCacheDiscoveryError extends errorKind(
  'PeerCacheDiscoveryError',
  'pacing.peer-cache-discovery',
) {}

/**
 * The Redis configuration of a region's cache from `DescribeReplicationGroups`: the
 * configuration endpoint in cluster mode, else the first node group's primary endpoint; TLS when
 * the group encrypts in transit.
 */
export async function describeCache(
  elasticache: ElastiCacheClient,
  replicationGroupId: string = cacheReplicationGroupId,
): Promise<RedisConfig> {
  let out: DescribeReplicationGroupsCommandOutput;
  try {
    out = await elasticache.send(
      new DescribeReplicationGroupsCommand({ ReplicationGroupId: replicationGroupId }),
    );
  } catch (error) {
    throw new PeerCacheDiscoveryError(
      `DescribeReplicationGroups ${replicationGroupId} failed: ${(error as Error).message}`,
      { cause: error },
    );
  }
  const group = out.ReplicationGroups?.[0];
  const endpoint = group?.ClusterEnabled
    ? group.ConfigurationEndpoint
    : group?.NodeGroups?.[0]?.PrimaryEndpoint;
  if (!group || !endpoint?.Address || !endpoint.Port) {
    throw new PeerCacheDiscoveryError(
      `Replication group ${replicationGroupId} has no ${group?.ClusterEnabled ? 'configuration' : 'primary'} endpoint (status ${group?.Status ?? 'unknown'}).`,
    );
  }
  return {
    mode: group.ClusterEnabled ? 'cluster' : 'standalone',
    nodes: [{ host: endpoint.Address, port: endpoint.Port }],
    tls: group.TransitEncryptionEnabled === true,
  };
}

/** Options of {@link PeerCaches}. */
export interface PeerCachesOptions {
  /** The ElastiCache client of a region (its endpoint resolved by the SDK, or a local one). */
  readonly elasticache: (region: string) => ElastiCacheClient;
  readonly clock: Clock;
  /** How long a discovered endpoint is used before asking again. @default 600_000 */
  readonly ttlMs?: number;
  /**
   * The peers' replication group id (the same in every region of a deployment: the pacer's own
   * `REDIS_CACHE_NAME`). @default the default names' {@link cacheReplicationGroupId}
   */
  readonly replicationGroupId?: string;
  /**
   * The IAM-authenticated cache user to connect to the peers' caches as (AWS: the same user in
   * every region; `REDIS_IAM_USER`). @default none: no AUTH (local)
   */
  readonly iamUserId?: string;
  /** @default connectRedis */
  readonly connect?: (config: RedisConfig) => RedisClient;
}

interface CachedPeer {
  readonly redis: RedisClient;
  readonly config: RedisConfig;
  readonly discoveredAtMs: number;
}

/** Connections to peer regions' caches, discovered through the ElastiCache API and cached. */
export class PeerCaches {
  private readonly peers = new Map<string, CachedPeer>();
  /** DescribeReplicationGroups calls made (tests: discovery is cached). */
  discoveries = 0;

  constructor(private readonly options: PeerCachesOptions) {}

  /** A client of `region`'s cache (discovered on first use, after `ttlMs`, or after {@link invalidate}). */
  async redis(region: string): Promise<RedisClient> {
    const now = this.options.clock.now();
    const cached = this.peers.get(region);
    if (cached && now - cached.discoveredAtMs < (this.options.ttlMs ?? 600_000)) return cached.redis;
    this.discoveries++;
    const groupId = this.options.replicationGroupId ?? cacheReplicationGroupId;
    const described = await describeCache(this.options.elasticache(region), groupId);
    // A peer's cache authenticates like the own one: IAM tokens signed for the peer's group.
    const config: RedisConfig = this.options.iamUserId
      ? { ...described, iam: { userId: this.options.iamUserId, cacheName: groupId, region } }
      : described;
    if (cached && sameConfig(cached.config, config)) {
      this.peers.set(region, { ...cached, discoveredAtMs: now });
      return cached.redis;
    }
    cached?.redis.disconnect();
    const redis = (this.options.connect ?? connectRedis)(config);
    // A peer cache going away must not crash the pacer: the tick reports it, discovery retries.
    redis.on('error', () => {});
    this.peers.set(region, { redis, config, discoveredAtMs: now });
    return redis;
  }

  /** Forgets a peer (its cache failed): the next use discovers it again. */
  invalidate(region: string): void {
    this.peers.get(region)?.redis.disconnect();
    this.peers.delete(region);
  }

  close(): void {
    for (const p of this.peers.values()) p.redis.disconnect();
    this.peers.clear();
  }
}

function sameConfig(a: RedisConfig, b: RedisConfig): boolean {
  return a.mode === b.mode && a.tls === b.tls && JSON.stringify(a.nodes) === JSON.stringify(b.nodes);
}

/** One peer cache this pacer may publish into. */
export interface PeerTarget {
  readonly region: string;
  /** Reads the peer's switch (peer SSM) and this region's override of the shard. */
  readonly control: ControlHandle;
  /** Builds the pacer of the peer's cache (own budgets, the peer's spend, the peer's share). */
  readonly pacer: (redis: RedisClient) => ShardPacer;
}

/**
 * The home step of strict allocations (`allocation-authority.ts`), run once per tick by the
 * shard's lease holder after the own cache's tick (whose load read the table this tick).
 */
export interface AuthorityTarget {
  readonly authority: AllocationAuthority;
  /** The table as the own cache's tick read it. */
  view(): RegionSpendView;
}

/** The flight closer of a shard and the plans it closes (those whose allocation home is here). */
export interface FlightTarget {
  readonly closer: FlightCloser;
  plans(): Iterable<ResolvedPlan>;
}

/** Options of {@link RegionalShardPacer}. */
export interface RegionalShardPacerOptions {
  /** This region's name. */
  readonly region: string;
  /** The pacer of this region's own cache. */
  readonly own: ShardPacer;
  readonly peers: readonly PeerTarget[];
  readonly caches: PeerCaches;
  /** Strict allocations: this region's home step. @default none */
  readonly authority?: AuthorityTarget;
  /** Closes the flight days of the plans whose home is this region. @default none */
  readonly flights?: FlightTarget;
  readonly clock?: Clock;
}

/** What a peer cache did this tick. */
export type PeerTickOutcome =
  | { readonly region: string; readonly role: 'not-ours'; readonly publisherRegion?: string }
  | { readonly region: string; readonly role: 'unreachable'; readonly error: string }
  | { readonly region: string; readonly role: 'publisher'; readonly outcome: TickOutcome };

/** Who runs the tick (the lease is ticked once and shared by every cache's pacer). */
export interface RegionalTickIdentity {
  readonly instanceId: string;
  readonly publisherId: string;
  readonly lease: LeaseHandle;
  readonly control: ControlHandle;
}

/**
 * A shard's pacer across caches: its own region's cache every tick, and every peer cache whose
 * switch names this region.
 */
export class RegionalShardPacer {
  private readonly peerPacers = new Map<string, ShardPacer>();

  constructor(private readonly options: RegionalShardPacerOptions) {}

  async runTick(
    tick: number,
    who: RegionalTickIdentity,
  ): Promise<{
    own: TickOutcome;
    peers: PeerTickOutcome[];
    authority?: AuthorityTickOutcome;
    /** The flight closer's last finished pass. */
    flights?: FlightClosePass;
  }> {
    // One lease renewal per tick, whatever the number of caches.
    let view: Promise<LeaseView> | undefined;
    const lease: LeaseHandle = {
      tick: () => {
        view ??= who.lease.tick();
        return view;
      },
      heldAt: (now) => who.lease.heldAt(now),
      get epoch() {
        return who.lease.epoch;
      },
    };
    const [own, peers] = await Promise.all([
      this.options.own.runTick(tick, { ...who, lease }),
      Promise.all(this.options.peers.map((p) => this.peerTick(p, tick, who, lease))),
    ]);
    const target = this.options.authority;
    const now = (this.options.clock ?? systemClock).now();
    const flights = this.options.flights;
    // The lease holder alone closes flight days (one writer per plan); the pass runs beside the ticks.
    if (flights && who.lease.heldAt(now)) flights.closer.kick(() => flights.plans(), now);
    const closes = flights?.closer.last ? { flights: flights.closer.last } : {};
    // The lease holder alone allocates, whether or not this region's cache is failed over.
    if (!target || own.sharing?.loaded !== true || !who.lease.heldAt(now)) return { own, peers, ...closes };
    const authority = await target.authority.step({
      nowMs: now,
      tick,
      view: target.view(),
      epoch: who.lease.epoch,
      writer: who.publisherId,
    });
    return { own, peers, authority, ...closes };
  }

  private async peerTick(
    peer: PeerTarget,
    tick: number,
    who: RegionalTickIdentity,
    lease: LeaseHandle,
  ): Promise<PeerTickOutcome> {
    const control = await peer.control.read();
    const publisherRegion = control.snapshot?.publisherRegion;
    if (publisherRegion !== this.options.region) {
      return { region: peer.region, role: 'not-ours', ...(publisherRegion ? { publisherRegion } : {}) };
    }
    let pacer = this.peerPacers.get(peer.region);
    try {
      if (!pacer) {
        pacer = peer.pacer(await this.options.caches.redis(peer.region));
        this.peerPacers.set(peer.region, pacer);
      }
      // The control just read is the one this tick uses (one read of the peer's switch per tick).
      const outcome = await pacer.runTick(tick, {
        instanceId: who.instanceId,
        publisherId: who.publisherId,
        lease,
        control: { read: async () => control },
      });
      return { region: peer.region, role: 'publisher', outcome };
    } catch (error) {
      // The peer's cache is unreachable (that is often why the switch was flipped to us, and the
      // cache may have been replaced): discover it again next tick.
      this.peerPacers.delete(peer.region);
      this.options.caches.invalidate(peer.region);
      return { region: peer.region, role: 'unreachable', error: (error as Error).message };
    }
  }

  /** Stops using every peer cache. */
  close(): void {
    this.peerPacers.clear();
    this.options.caches.close();
  }
}
