/**
 * What `npm start` prints about its regions: the banner (every endpoint a developer or a client
 * needs, each function's wiring), the scheduler's timing, the IAM layer's state and refusals.
 */

import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import {
  type FunctionKey,
  type FunctionSpec,
  physicalName,
  regionResources,
} from '../shared/region/resources.js';
import type { LocalIam, Refusal } from './iam/gate.js';
import type { RegionRuntime } from './runtime.js';
import type { Scheduler } from './scheduler.js';
import { repoRoot } from './worker/process-invoker.js';

function describeIam(iam: LocalIam | undefined): string {
  if (!iam) return 'off (--iam off): every call is let through';
  const s = iam.policies.synthesis;
  const from = iam.origin?.cached
    ? `cached from a synthesis of ${(s.synthMs / 1000).toFixed(1)} s`
    : `synthesized now in ${(s.synthMs / 1000).toFixed(1)} s`;
  return `enforced: each function and the ad-server client (PACELINE_CLIENT_ACCESS_KEY_ID) is held to its synthesized policy (${from}, ${s.regions.join(', ')}); AWS_ACCESS_KEY_ID=local is the unchecked operator`;
}

/** One console line for a call the local IAM layer refused. */
export function formatRefusal(r: Refusal): string {
  return `[${r.region}] IAM refused ${r.principal}: ${r.action} on ${r.resource} (${r.service})`;
}

/** The banner: every endpoint a developer or a client needs. */
export function describeRuntime(runtimes: readonly RegionRuntime[]): string {
  const lines: string[] = [];
  for (const rt of runtimes) {
    const r = rt.region;
    lines.push(`Region ${r.region}`);
    lines.push(
      `  State:    ${r.dataDir ? `${r.dataDir} (kept across restarts)` : 'in memory (gone on stop; --data-dir DIR keeps it)'}`,
    );
    if (rt.logDir) lines.push(`  Logs:     ${rt.logDir}/<function>-<pid>.log`);
    lines.push(`  Redis (${r.redis.mode}): ${r.redis.nodes.join(', ')}`);
    lines.push(`  DynamoDB: ${r.endpoints.dynamodb}`);
    lines.push(`  Kinesis:  ${r.endpoints.kinesis}`);
    lines.push(`  SSM:      ${r.endpoints.ssm}`);
    lines.push(
      `  ElastiCache API: ${r.endpoints.elasticache} (DescribeReplicationGroups → this region's Redis)`,
    );
    lines.push(
      `  S3:       ${r.endpoints.s3} (s3rver; buckets ${Object.values(regionResources.buckets)
        .map((b) => physicalName(b.suffix))
        .join(', ')})`,
    );
    lines.push(
      `  Tables:   ${Object.values(regionResources.tables)
        .map((t) => physicalName(t.suffix))
        .join(', ')}`,
    );
    lines.push(
      `  Streams:  ${Object.values(regionResources.streams)
        .map((s) => `${physicalName(s.suffix)} (${s.shardCount} shards)`)
        .join(', ')}`,
    );
    lines.push(`  Schedules: ${describeTiming(rt.scheduler)}`);
    for (const key of Object.keys(rt.description.functions) as FunctionKey[]) {
      const spec: FunctionSpec = rt.description.functions[key];
      const handlerPath = resolve(repoRoot, rt.handlerModules.get(key) ?? spec.entry);
      const missing = existsSync(handlerPath)
        ? ''
        : '  [handler module not found yet: invocations fail until it exists]';
      if (spec.source) {
        const s = spec.source;
        lines.push(
          `  λ ${spec.name} ← ${physicalName(regionResources.streams[s.stream].suffix)}: batch ${s.batchSize}, window ${s.maxBatchingWindowSeconds}s, ` +
            `bisect ${s.bisectBatchOnFunctionError}, retries ${s.retryAttempts}, max age ${s.maxRecordAgeSeconds}s${missing}`,
        );
        lines.push(`      on-failure → ${rt.onFailure.get(key)?.location}`);
      }
      if (spec.schedule) {
        const pacer = key === 'pacer' ? rt.description.settings.pacer : undefined;
        const layout = pacer
          ? `: ${pacer.shards} shards × ${pacer.instancesPerShard} instances, ${pacer.tickMs / 1000} s ticks, lease ${pacer.leaseTtlMs / 1000} s`
          : '';
        lines.push(
          `  λ ${spec.name} ← schedule rate(${spec.schedule.rateMinutes} minute), ${Math.max(1, spec.schedule.instances.length)} rule(s)${layout}${missing}`,
        );
      }
      const pids = rt.invokers.get(key)?.pids ?? [];
      if (pids.length > 0) lines.push(`      instances: pid ${pids.join(', ')}`);
    }
    lines.push(`  IAM:      ${describeIam(r.iam)}`);
    lines.push(
      `  Client env: ${Object.entries(r.clientEnv)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ')}`,
    );
  }
  return lines.join('\n');
}

/** One line on how the region's scheduler times its rules (the seed reproduces a run's timing). */
export function describeTiming(scheduler: Scheduler): string {
  const t = scheduler.timing;
  if (t.mode === 'exact')
    return 'exact (every rule on the minute, delivered at once, once; --scheduler exact)';
  const pct = (r: number) => `${Number((r * 100).toFixed(2))} %`;
  return (
    `EventBridge-like (seed ${t.seed}): each rule at its own second, delivery delay 0–${t.maxDelayMs / 1000} s, ` +
    `${pct(t.duplicateRate)} delivered twice, ${pct(t.missRate)} missed; --scheduler exact fires on the minute`
  );
}
