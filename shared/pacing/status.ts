/**
 * The operator's view of a region's pacer shards: per shard the lease holder and epoch
 * (DynamoDB), the last published tick and its age (the shard's claim in Redis) and the leader
 * override (SSM). Read in batches: one BatchGet per 100 shards, one GetParameters per 10, one
 * pipeline per Redis node.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetParameterCommand, GetParametersCommand, type SSMClient } from '@aws-sdk/client-ssm';
import { BatchGetCommand, DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { pipelineByNode, type RedisClient } from '../redis/connect.js';
import { leaderOverridePath, parameterPrefix, regionResources } from '../region/resources.js';
import { shardKeys } from './keys.js';
import { leaseKey } from './lease.js';

/** One shard's status (the `paceline status --json` shape, plus detail fields). */
export interface ShardStatus {
  readonly shard: number;
  /** Instance holding an unexpired lease; null when none does. */
  readonly leader: string | null;
  /** Lease epoch (0 when no lease was ever taken). */
  readonly epoch: number;
  /** Last claimed (published) tick; null when the shard never published. */
  readonly lastTick: number | null;
  /** Age of that publish, ms; null when never. */
  readonly ageMs: number | null;
  /** `auto` or the instance named by the override; null when the parameter is missing. */
  readonly override: string | null;
  /** Publisher id of the last claim (`<region>/<instance>/<process>`: {@link parsePublisherId}). */
  readonly publisher: string | null;
  /** The region whose pacer made the last claim (from the publisher id); null when unknown. */
  readonly publishingRegion: string | null;
  /** Lease holder even if expired, and how long until it expires (negative: expired). */
  readonly leaseHolder: string | null;
  readonly leaseExpiresInMs: number | null;
}

/**
 * A pacer process's publisher id: `<region>/<instance>/<process>` — the region whose pacer
 * publishes (after a failover, another region's), the instance (`s<shard>-i<k>`) and the process
 * (`<pid>-<nonce>`). Recorded with every claim (audit stream, claim hash).
 */
export function publisherIdOf(region: string, instanceId: string, processNonce: string): string {
  return `${region}/${instanceId}/${processNonce}`;
}

/**
 * The parts of a publisher id; ids written before they carried a region (`<instance>/<process>`)
 * have no region.
 */
export function parsePublisherId(id: string): { region?: string; instanceId: string; process: string } {
  const parts = id.split('/');
  if (parts.length >= 3) {
    return { region: parts[0] as string, instanceId: parts[1] as string, process: parts.slice(2).join('/') };
  }
  return { instanceId: parts[0] ?? '', process: parts.slice(1).join('/') };
}

/** A region's cross-region publish switch (SSM `publisher-region`, docs/pacing.md). */
export interface PublishSwitch {
  /** The region whose cache this is. */
  readonly region: string;
  /** The region whose pacer publishes into it; null when the parameter is missing. */
  readonly publisherRegion: string | null;
  /** The parameter's version (the fence's generation g). */
  readonly version: number | null;
  /** When it was last set (epoch ms); null when unknown. */
  readonly sinceMs: number | null;
}

/** Reads a region's publish switch (one GetParameter). */
export async function readPublishSwitch(ssm: SSMClient, region: string): Promise<PublishSwitch> {
  const name = `${parameterPrefix(region)}${regionResources.parameters.publisherRegion.path}`;
  try {
    const out = await ssm.send(new GetParameterCommand({ Name: name }));
    const p = out.Parameter;
    return {
      region,
      publisherRegion: p?.Value ?? null,
      version: p?.Version ?? null,
      sinceMs: p?.LastModifiedDate ? p.LastModifiedDate.getTime() : null,
    };
  } catch (error) {
    if ((error as Error).name === 'ParameterNotFound')
      return { region, publisherRegion: null, version: null, sinceMs: null };
    throw error;
  }
}

/** What {@link readShardStatuses} reads from. */
export interface StatusSources {
  readonly region: string;
  readonly shards: number;
  readonly dynamodb: DynamoDBClient;
  readonly leasesTable: string;
  readonly ssm: SSMClient;
  readonly redis: RedisClient;
  readonly nowMs: number;
}

/** Reads the status of shards 0..shards−1 of a region. */
export async function readShardStatuses(s: StatusSources): Promise<ShardStatus[]> {
  const ids = Array.from({ length: s.shards }, (_, i) => i);
  const [leases, overrides, claims] = await Promise.all([
    readLeases(s, ids),
    readOverrides(s, ids),
    readClaims(s, ids),
  ]);
  return ids.map((shard) => {
    const lease = leases.get(shard);
    const claim = claims.get(shard);
    const expiresIn = lease ? lease.expiresAt - s.nowMs : null;
    return {
      shard,
      leader: lease && lease.holder !== '' && (expiresIn as number) > 0 ? lease.holder : null,
      epoch: lease?.epoch ?? 0,
      lastTick: claim?.tick ?? null,
      ageMs: claim ? Math.max(0, s.nowMs - claim.at) : null,
      override: overrides.get(shard) ?? null,
      publisher: claim?.publisher ?? null,
      publishingRegion: claim ? (parsePublisherId(claim.publisher).region ?? null) : null,
      leaseHolder: lease && lease.holder !== '' ? lease.holder : null,
      leaseExpiresInMs: lease && lease.holder !== '' ? expiresIn : null,
    };
  });
}

async function readLeases(
  s: StatusSources,
  ids: readonly number[],
): Promise<Map<number, { holder: string; epoch: number; expiresAt: number }>> {
  const out = new Map<number, { holder: string; epoch: number; expiresAt: number }>();
  const doc = DynamoDBDocumentClient.from(s.dynamodb);
  for (let i = 0; i < ids.length; i += 100) {
    let keys: Record<string, unknown>[] = ids.slice(i, i + 100).map((shard) => leaseKey(shard));
    // BatchGet may leave keys unprocessed under throttling: ask again for those.
    for (let attempt = 0; keys.length > 0 && attempt < 5; attempt++) {
      const res = await doc.send(
        new BatchGetCommand({ RequestItems: { [s.leasesTable]: { Keys: keys, ConsistentRead: true } } }),
      );
      for (const item of res.Responses?.[s.leasesTable] ?? []) {
        const shard = Number(String(item.pk).slice('PACER#'.length));
        out.set(shard, {
          holder: String(item.holder ?? ''),
          epoch: Number(item.epoch ?? 0),
          expiresAt: Number(item.expiresAt ?? 0),
        });
      }
      keys = res.UnprocessedKeys?.[s.leasesTable]?.Keys ?? [];
    }
  }
  return out;
}

async function readOverrides(s: StatusSources, ids: readonly number[]): Promise<Map<number, string>> {
  const prefix = parameterPrefix(s.region);
  const out = new Map<number, string>();
  for (let i = 0; i < ids.length; i += 10) {
    const names = ids.slice(i, i + 10).map((shard) => `${prefix}${leaderOverridePath(shard)}`);
    const res = await s.ssm.send(new GetParametersCommand({ Names: names }));
    for (const p of res.Parameters ?? []) {
      const shard = Number(String(p.Name).slice(String(p.Name).lastIndexOf('/') + 1));
      if (p.Value !== undefined) out.set(shard, p.Value);
    }
  }
  return out;
}

async function readClaims(
  s: StatusSources,
  ids: readonly number[],
): Promise<Map<number, { tick: number; at: number; publisher: string }>> {
  const results = await pipelineByNode(
    s.redis,
    ids,
    (shard) => shardKeys(shard).claim,
    (p, shard) => {
      p.hmget(shardKeys(shard).claim, 't', 'at', 'p');
    },
  );
  const out = new Map<number, { tick: number; at: number; publisher: string }>();
  ids.forEach((shard, i) => {
    const [error, reply] = results[i] as [Error | null, (string | null)[]];
    if (error) throw error;
    const [t, at, p] = reply;
    if (t !== null && at !== null) out.set(shard, { tick: Number(t), at: Number(at), publisher: p ?? '' });
  });
  return out;
}
