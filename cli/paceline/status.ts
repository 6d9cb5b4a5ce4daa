/**
 * `paceline status [--json]`: per region, the pacer shards (lease holder and epoch, last
 * published tick and its age, leader override), the cross-region publish switch (which region's
 * pacer publishes into this region's cache, and the parameter's version), the streams' iterator
 * age and the dead-letter counts per stream function.
 */
import { QueryCommand } from '@aws-sdk/client-dynamodb';
import { GetParameterCommand, ParameterNotFound } from '@aws-sdk/client-ssm';
import { dynamoDbClient, ssmClient } from '../../shared/aws/clients.js';
import { resolvePacerShards } from '../../shared/pacing/control.js';
import { readShardStatuses, type ShardStatus } from '../../shared/pacing/status.js';
import { connectRedis } from '../../shared/redis/connect.js';
import {
  type FunctionSpec,
  parameterPrefix,
  regionResources,
  resourceName,
} from '../../shared/region/resources.js';
import { type RegionTarget, redisOf } from './target.js';

/** The cross-region publish switch of a region (SSM `publisher-region`). */
export interface PublisherSwitch {
  readonly parameter: string;
  /** The region whose pacer publishes into this region's cache; null when the parameter is missing. */
  readonly publisherRegion: string | null;
  /** The parameter's version (the pacer's fence compares it before the lease epoch). */
  readonly version: number | null;
  /** `local` (this region publishes for itself) or `failed-over` (another region does). */
  readonly state: 'local' | 'failed-over' | 'missing';
}

/** A stream's consumer lag as far as the target can tell. */
export interface StreamLag {
  readonly stream: string;
  /** Iterator age, ms; null when the target cannot measure it. */
  readonly iteratorAgeMs: number | null;
  readonly note: string;
}

/** One region's status. */
export interface RegionStatus {
  readonly region: string;
  readonly publisher: PublisherSwitch;
  readonly shards: readonly ShardStatus[];
  readonly streams: readonly StreamLag[];
  /** Quarantined records per stream function (the dead-letter table's partition = function name). */
  readonly deadLetters: Readonly<Record<string, number>>;
}

/** `--json` output: exactly this one object. */
export interface StatusReport {
  readonly regions: readonly RegionStatus[];
}

/** Reads the status of every target region. */
export async function readStatus(targets: readonly RegionTarget[], nowMs: number): Promise<StatusReport> {
  const regions = [];
  for (const t of targets) {
    const timeouts = { connectionTimeoutMs: 2_000, requestTimeoutMs: 5_000, maxAttempts: 2 };
    const dynamodb = dynamoDbClient(t.endpoints, timeouts);
    const ssm = ssmClient(t.endpoints, timeouts);
    const redis = connectRedis(redisOf(t), {
      maxRetriesPerRequest: 1,
      redisOptions: { connectTimeout: 3_000 },
    });
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
      const publisher = await readPublisher(ssm, t.region);
      const deadLetters: Record<string, number> = {};
      const deadLetterTable = resourceName(regionResources.tables.deadLetters, t.env);
      for (const fn of Object.values(regionResources.functions) as FunctionSpec[]) {
        if (!fn.source) continue;
        let count = 0;
        let start: Record<string, never> | undefined;
        do {
          const page = await dynamodb.send(
            new QueryCommand({
              TableName: deadLetterTable,
              KeyConditionExpression: 'pk = :pk',
              ExpressionAttributeValues: { ':pk': { S: fn.name } },
              Select: 'COUNT',
              ExclusiveStartKey: start,
            }),
          );
          count += page.Count ?? 0;
          start = page.LastEvaluatedKey as typeof start;
        } while (start);
        deadLetters[fn.name] = count;
      }
      const streams = Object.values(regionResources.streams).map((spec) => ({
        stream: resourceName(spec, t.env),
        iteratorAgeMs: t.kind === 'local' ? 0 : null,
        note:
          t.kind === 'local'
            ? 'kinesalite reports MillisBehindLatest 0 always: not a measurement'
            : `read the stream functions' IteratorAge on the dashboard paceline-${t.region}`,
      }));
      regions.push({ region: t.region, publisher, shards: statuses, streams, deadLetters });
    } finally {
      redis.disconnect();
      dynamodb.destroy();
      ssm.destroy();
    }
  }
  return { regions };
}

async function readPublisher(ssm: ReturnType<typeof ssmClient>, region: string): Promise<PublisherSwitch> {
  const parameter = `${parameterPrefix(region)}${regionResources.parameters.publisherRegion.path}`;
  try {
    const out = await ssm.send(new GetParameterCommand({ Name: parameter }));
    const value = out.Parameter?.Value ?? null;
    return {
      parameter,
      publisherRegion: value,
      version: out.Parameter?.Version ?? null,
      state: value === region ? 'local' : 'failed-over',
    };
  } catch (error) {
    if (error instanceof ParameterNotFound || (error as Error).name === 'ParameterNotFound')
      return { parameter, publisherRegion: null, version: null, state: 'missing' };
    throw error;
  }
}

function cell(v: string | number | null): string {
  return v === null ? '-' : String(v);
}

/** The human-readable table. */
export function formatStatus(report: StatusReport): string {
  const lines: string[] = [];
  for (const r of report.regions) {
    const p = r.publisher;
    lines.push(
      `${r.region}  publisher: ${p.publisherRegion ?? '(parameter missing)'} (${p.state}, version ${cell(p.version)})`,
    );
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
    for (const st of r.streams)
      lines.push(
        `  stream ${st.stream}: iterator age ${st.iteratorAgeMs === null ? '-' : `${st.iteratorAgeMs} ms`} (${st.note})`,
      );
    lines.push(
      `  dead letters: ${Object.entries(r.deadLetters)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}`,
    );
  }
  return lines.join('\n');
}
