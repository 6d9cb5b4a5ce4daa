/**
 * pacer: one EventBridge rule per (shard, instance) invokes this every minute with
 * `{shard, instance}`, at the rule's own second plus a delivery delay; the invocation runs the
 * ticks of the minute after its start plus an overlap covering that delay, on wall-clock
 * boundaries (shared/pacing/invocation.ts), so consecutive invocations of an instance overlap
 * (for about a tick: the older one ends once the newer one has registered its start).
 * Wiring only: the domain is shared/pacing (ShardPacer: lease, budgets, controller, fenced
 * publishing).
 *
 * Warm state (budgets cache, controller state, connections) lives in the module, per shard, and
 * survives across invocations of this execution environment — whichever instance of the shard
 * an invocation runs as; the shard's ticks run one at a time and each once in this process
 * (ProcessTicks). An invocation that still holds its shard's lease when its window ends releases
 * it: its instance's next invocation (which would have adopted it) did not come in time, and
 * another instance takes over at its next tick instead of after the lease TTL.
 */
import { randomUUID } from 'node:crypto';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import type { Context } from 'aws-lambda';
import {
  dynamoDbClient,
  endpointsFromEnv,
  peerEndpointsFromEnv,
  ssmClient,
} from '../../shared/aws/clients.js';
import { elastiCacheClient } from '../../shared/aws/ops-clients.js';
import { intEnv, optionalEnv, requireEnv } from '../../shared/config/env.js';
import type { PacerControl } from '../../shared/pacing/control.js';
import type { PacingController } from '../../shared/pacing/controller/api.js';
import { createPacingController } from '../../shared/pacing/controller/index.js';
import { type InvocationSummary, runInvocation } from '../../shared/pacing/invocation.js';
import { ShardLease } from '../../shared/pacing/lease.js';
import { recordTick, recordTrailingSkips } from '../../shared/pacing/metrics.js';
import type { TickOutcome } from '../../shared/pacing/pacer.js';
import { ProcessTicks } from '../../shared/pacing/process-ticks.js';
import {
  allocationSettingsFromEnv,
  regionalReleaseCap,
} from '../../shared/pacing/regions/allocation-config.js';
import type { RegionalShardPacer } from '../../shared/pacing/regions/cross-region.js';
import { regionalShardPacer } from '../../shared/pacing/regions/wiring.js';
import { pacerConfigFromEnv, parsePacerInput } from '../../shared/pacing/settings.js';
import { publisherIdOf } from '../../shared/pacing/status.js';
import { connectRedis, redisConfigFromEnv } from '../../shared/redis/connect.js';
import { parameterEnv, redisEnv, regionResources } from '../../shared/region/resources.js';
import { DEFAULT_RELEASE_CAP } from '../../shared/spend/release.js';
import { systemClock } from '../../shared/time/clock.js';

const spec = regionResources.functions.pacer;
const config = pacerConfigFromEnv();
const logger = new Logger({ serviceName: spec.name });
const metrics = new Metrics({ serviceName: spec.name });
// A tick must not hang on an unreachable dependency: bounded calls, one retry.
const timeouts = {
  connectionTimeoutMs: Math.max(250, Math.floor(config.tickMs / 10)),
  requestTimeoutMs: Math.max(500, Math.floor(config.tickMs / 4)),
  maxAttempts: 2,
};
const endpoints = endpointsFromEnv();
const dynamodb = dynamoDbClient(endpoints, timeouts);
const ssm = ssmClient(endpoints, timeouts);
const leasesTable = requireEnv(regionResources.tables.leases.envVar);
const budgetsTable = requireEnv(regionResources.tables.budgets.envVar);
const regionSpendTable = requireEnv(regionResources.tables.regionSpend.envVar);
// A lost region's confirmed spend (its wins in the replicated ledger), for allocation reclaims.
const spendLedgerTable = requireEnv(regionResources.tables.spendLedger.envVar);
// The deployment's names, from the environment the stack derived from its description: the
// parameter root (a peer region's prefix is `<root><peer>/`) and the caches' group id and IAM user.
const parameterRoot = requireEnv(parameterEnv.root);
const cacheGroupId = requireEnv(redisEnv.cacheName);
const cacheIamUser = optionalEnv(redisEnv.iamUser);
// Peer regions (PACELINE_REGIONS): their publish switches (SSM) and caches (ElastiCache API).
const peers = peerEndpointsFromEnv(config.region).map((e) => ({
  region: e.region,
  ssm: ssmClient(e, timeouts),
  elasticache: elastiCacheClient(e, timeouts),
}));
// Strict multi-region budgets (docs/pacing.md, "Many regions"): the regions in order, the mode.
const allocationSettings = allocationSettingsFromEnv(config.region);
const redis = connectRedis(redisConfigFromEnv());
redis.on('error', (error: Error) => logger.warn('redis connection error', { error: error.message }));
// A region counts the in-flight release its guards count (their part of the cap, several regions).
const controller = createPacingController({
  releaseCap: regionalReleaseCap(
    DEFAULT_RELEASE_CAP,
    allocationSettings.mode,
    allocationSettings.regions.length,
  ),
}) as PacingController<unknown, unknown>;
/**
 * Distinguishes this process from another one running the same instance (publisher ids): the pid
 * (operators and tests map a publisher to its process) and a random part (pids are reused).
 */
const processNonce = `${process.pid}-${randomUUID().slice(0, 4)}`;
/** Fault injection for tests (docs/pacing.md): a pause between claim and publish, ms. */
const pauseBeforePublishMs = intEnv('PACER_FAULT_PAUSE_BEFORE_PUBLISH_MS', 0);
const clock = systemClock;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

interface ShardWarmState {
  readonly pacer: RegionalShardPacer;
  readonly control: PacerControl;
  /** The shard's ticks in this process: one at a time, each once, whichever invocation runs it. */
  readonly ticks: ProcessTicks;
}
const shards = new Map<number, ShardWarmState>();

function warmState(shard: number): ShardWarmState {
  let s = shards.get(shard);
  if (!s) {
    const wiring = regionalShardPacer({
      region: config.region,
      shard,
      shards: config.shards,
      dynamodb,
      ssm,
      budgetsTable,
      regionSpendTable,
      redis,
      peers,
      controller,
      clock,
      tickMs: config.tickMs,
      budgetsFullReloadMs: config.budgetsFullReloadMs,
      regions: allocationSettings.regions,
      spendLedgerTable,
      allocations: { mode: allocationSettings.mode },
      parameterRoot,
      cache: { replicationGroupId: cacheGroupId, ...(cacheIamUser ? { iamUserId: cacheIamUser } : {}) },
      redisSilenceMs: config.redisSilenceMs,
      pacerOptions: {
        logMaxLen: config.auditLogMaxLen,
        ...(pauseBeforePublishMs > 0 ? { beforePublish: () => sleep(pauseBeforePublishMs) } : {}),
      },
    });
    s = { pacer: wiring.pacer, control: wiring.control, ticks: new ProcessTicks() };
    shards.set(shard, s);
  }
  return s;
}

/** Compact per-tick record returned to the invoker (and logged). */
function summarize(o: TickOutcome) {
  return {
    tick: o.tick,
    leader: o.isLeader,
    published: o.published,
    claim: o.claim?.reason,
    rejected: o.fencedWritesRejected,
    lease: o.lease.event,
    epoch: o.lease.epoch,
    ms: o.durationMs,
    campaigns: o.campaignsPaced,
    ...(o.skippedReason ? { skipped: o.skippedReason } : {}),
  };
}

function summarizePeer(p: RegionalTickResult['peers'][number]) {
  return p.role === 'publisher'
    ? { region: p.region, role: p.role, ...summarize(p.outcome) }
    : { region: p.region, role: p.role, ...(p.role === 'unreachable' ? { error: p.error } : {}) };
}

type RegionalTickResult = Awaited<ReturnType<RegionalShardPacer['runTick']>>;

/** The latest lease of each shard this environment ran (held between invocations until adopted). */
const leases = new Map<number, ShardLease>();
// A clean stop (the environment is shut down) releases held leases, so a successor takes over at
// once instead of waiting for expiry.
process.once('SIGTERM', () => {
  void Promise.allSettled([...leases.values()].map((l) => l.release())).finally(() => process.exit(0));
});

export const handler = async (event: unknown, context?: Context) => {
  const input = parsePacerInput(event, config);
  const { pacer, control, ticks } = warmState(input.shard);
  const lease = new ShardLease({
    client: dynamodb,
    tableName: leasesTable,
    shard: input.shard,
    instanceId: input.instanceId,
    processId: `${process.pid}/${processNonce}`,
    invocationStartMs: clock.now(),
    ttlMs: config.leaseTtlMs,
    clock,
  });
  leases.set(input.shard, lease);
  const who = {
    instanceId: input.instanceId,
    publisherId: publisherIdOf(config.region, input.instanceId, processNonce),
    lease,
    control,
  };
  let summary: InvocationSummary<TickOutcome>;
  try {
    summary = await runInvocation({
      clock,
      sleep,
      tickMs: config.tickMs,
      minuteMs: config.minuteMs,
      ...(context ? { remainingMs: () => context.getRemainingTimeInMillis() } : {}),
      ticks: { process: ticks, rank: () => (lease.heldAt(clock.now()) ? lease.epoch : 0) },
      // A newer invocation of this instance has started: it covers the rest of the window.
      superseded: () => lease.superseded,
      // The own cache's outcome drives metrics; peers' publishing (after a failover) is logged.
      runTick: async (tick) => {
        const r = await pacer.runTick(tick, who);
        for (const p of r.peers) {
          if (p.role !== 'not-ours') logger.info('peer cache', { shard: input.shard, ...summarizePeer(p) });
        }
        const a = r.authority;
        if (a && (a.reclaims.length > 0 || a.error || !a.written)) {
          logger.info('allocation authority', { shard: input.shard, ...a });
        }
        return r.own;
      },
      onTick: (outcome, skippedBefore) => {
        recordTick(metrics, outcome, skippedBefore, config.tickMs);
        logger.debug('tick', { shard: input.shard, instance: input.instanceId, ...summarize(outcome) });
        if (outcome.invalidReason !== undefined) {
          logger.warn('plans on the fail-safe', {
            shard: input.shard,
            plans: outcome.invalidParams,
            first: outcome.invalidReason,
          });
        }
      },
    });
  } finally {
    // Still holding at the end of the window: this instance's next invocation did not adopt the
    // lease in time (a missed or late delivery). Hand it back, so another instance takes over at
    // its next tick rather than after the TTL (conditional on holder and epoch: a no-op once adopted).
    if (lease.heldAt(clock.now())) {
      const epoch = lease.epoch;
      const released = await lease.release();
      // An error here: adopted meanwhile (the condition failed) or DynamoDB unreachable (it expires).
      logger.info('end of window: lease handed back', {
        shard: input.shard,
        instance: input.instanceId,
        epoch,
        released: released.error === undefined,
      });
    }
  }
  recordTrailingSkips(metrics, input.shard, input.instanceId, summary.trailingSkipped);
  return {
    shard: input.shard,
    instance: input.instanceId,
    pid: process.pid,
    ticksSkipped: summary.ticksSkipped,
    ticksRunElsewhere: summary.ticksRunElsewhere,
    ticksHandedOver: summary.ticksHandedOver,
    ticks: summary.outcomes.map(summarize),
  };
};
