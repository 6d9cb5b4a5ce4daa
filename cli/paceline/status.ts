/**
 * `paceline status [--json]`: per region and pacer shard, the lease holder and epoch, the last
 * published tick and its age, and the leader override.
 */
import { dynamoDbClient, ssmClient } from '../../shared/aws/clients.js';
import { resolvePacerShards } from '../../shared/pacing/control.js';
import { readShardStatuses, type ShardStatus } from '../../shared/pacing/status.js';
import { connectRedis } from '../../shared/redis/connect.js';
import { regionResources, resourceName } from '../../shared/region/resources.js';
import type { RegionTarget } from './target.js';

/** `--json` output: exactly this one object. */
export interface StatusReport {
  readonly regions: readonly { readonly region: string; readonly shards: readonly ShardStatus[] }[];
}

/** Reads the status of every target region. */
export async function readStatus(targets: readonly RegionTarget[], nowMs: number): Promise<StatusReport> {
  const regions = [];
  for (const t of targets) {
    const timeouts = { connectionTimeoutMs: 2_000, requestTimeoutMs: 5_000, maxAttempts: 2 };
    const dynamodb = dynamoDbClient(t.endpoints, timeouts);
    const ssm = ssmClient(t.endpoints, timeouts);
    const redis = connectRedis(t.redis, { maxRetriesPerRequest: 1, redisOptions: { connectTimeout: 3_000 } });
    redis.on('error', () => {});
    try {
      const shards = await resolvePacerShards(t.env, ssm, t.region);
      const statuses = await readShardStatuses({
        region: t.region,
        shards,
        dynamodb,
        leasesTable: resourceName(regionResources.tables.leases, t.env),
        ssm,
        redis,
        nowMs,
      });
      regions.push({ region: t.region, shards: statuses });
    } finally {
      redis.disconnect();
      dynamodb.destroy();
      ssm.destroy();
    }
  }
  return { regions };
}

function cell(v: string | number | null): string {
  return v === null ? '-' : String(v);
}

/** The human-readable table. */
export function formatStatus(report: StatusReport): string {
  const lines: string[] = [];
  for (const r of report.regions) {
    lines.push(`${r.region}`);
    lines.push('  shard  leader       epoch  last tick      age      override    publisher');
    for (const s of r.shards) {
      const age =
        s.ageMs === null
          ? '-'
          : s.ageMs < 60_000
            ? `${(s.ageMs / 1000).toFixed(1)} s`
            : `${Math.round(s.ageMs / 60_000)} min`;
      lines.push(
        `  ${cell(s.shard).padEnd(5)}  ${cell(s.leader).padEnd(11)}  ${cell(s.epoch).padEnd(5)}  ${cell(s.lastTick).padEnd(13)}  ${age.padEnd(7)}  ${cell(s.override).padEnd(10)}  ${cell(s.publisher)}`,
      );
    }
  }
  return lines.join('\n');
}
