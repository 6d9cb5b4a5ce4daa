/**
 * One pacer invocation on a {@link PacerRuntime}: the shard's lease for this invocation, the
 * window's ticks ({@link runInvocation}), their logs and metrics, and the lease handed back at the
 * end of the window when no newer invocation of the instance adopted it. Leases still held when
 * the execution environment is shut down (SIGTERM) are released too
 * ({@link releaseLeasesOnSigterm}), so another instance takes over at its next tick instead of
 * after the lease TTL.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import { runInvocation } from './invocation.js';
import { ShardLease } from './lease.js';
import { recordTick, recordTrailingSkips } from './metrics.js';
import type { TickOutcome } from './pacer.js';
import type { RegionalShardPacer } from './regions/cross-region.js';
import type { PacerRuntime } from './runtime.js';
import { parsePacerInput } from './settings.js';
import { publisherIdOf } from './status.js';

type RegionalTickResult = Awaited<ReturnType<RegionalShardPacer['runTick']>>;
/** The rule's input with its instance id. */
type Input = ReturnType<typeof parsePacerInput>;

/** Compact per-tick record returned to the invoker (and logged). */
export function summarizeTick(o: TickOutcome) {
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
    ? { region: p.region, role: p.role, ...summarizeTick(p.outcome) }
    : { region: p.region, role: p.role, ...(p.role === 'unreachable' ? { error: p.error } : {}) };
}

/** What an invocation returns to its invoker. */
export interface PacerInvocationResult {
  readonly shard: number;
  readonly instance: string;
  readonly pid: number;
  readonly ticksSkipped: number;
  readonly ticksRunElsewhere: number;
  readonly ticksHandedOver: number;
  readonly ticks: readonly ReturnType<typeof summarizeTick>[];
}

/** Runs invocations of the pacer and keeps the latest lease of each shard they ran. */
export class PacerInvocations {
  /** The latest lease of each shard this environment ran (held between invocations until adopted). */
  private readonly leases = new Map<number, ShardLease>();
  /** The flight closer's pass last logged (its start instant). */
  private flightPassLogged = 0;

  constructor(
    private readonly runtime: PacerRuntime,
    private readonly observe: { readonly logger: Logger; readonly metrics: Metrics },
  ) {}

  /**
   * A clean stop (the environment is shut down) releases held leases, so a successor takes over at
   * once instead of waiting for expiry; then the process exits.
   */
  releaseLeasesOnSigterm(): void {
    process.once('SIGTERM', () => {
      void Promise.allSettled([...this.leases.values()].map((l) => l.release())).finally(() =>
        process.exit(0),
      );
    });
  }

  /**
   * Runs the ticks of one invocation's window; `event` is the rule's `{shard, instance}`,
   * `remainingMs` the Lambda context's time left.
   */
  async run(event: unknown, remainingMs?: () => number): Promise<PacerInvocationResult> {
    const { config, clock } = this.runtime;
    const input = parsePacerInput(event, config);
    const { pacer, control, ticks } = this.runtime.warmState(input.shard);
    const lease = this.newLease(input);
    const who = {
      instanceId: input.instanceId,
      publisherId: publisherIdOf(config.region, input.instanceId, this.runtime.processNonce),
      lease,
      control,
    };
    let summary: Awaited<ReturnType<typeof runInvocation<TickOutcome>>>;
    try {
      summary = await runInvocation({
        clock,
        sleep: this.runtime.sleep,
        tickMs: config.tickMs,
        minuteMs: config.minuteMs,
        ...(remainingMs ? { remainingMs } : {}),
        ticks: { process: ticks, rank: () => (lease.heldAt(clock.now()) ? lease.epoch : 0) },
        // A newer invocation of this instance has started: it covers the rest of the window.
        superseded: () => lease.superseded,
        runTick: async (tick) => this.logPeers(input, await pacer.runTick(tick, who)),
        onTick: (outcome, skippedBefore) => this.recordTick(input, outcome, skippedBefore),
      });
    } finally {
      await this.handBack(input, lease);
    }
    recordTrailingSkips(this.observe.metrics, input.shard, input.instanceId, summary.trailingSkipped);
    return {
      shard: input.shard,
      instance: input.instanceId,
      pid: process.pid,
      ticksSkipped: summary.ticksSkipped,
      ticksRunElsewhere: summary.ticksRunElsewhere,
      ticksHandedOver: summary.ticksHandedOver,
      ticks: summary.outcomes.map(summarizeTick),
    };
  }

  private newLease(input: Input): ShardLease {
    const { config, clock, processNonce } = this.runtime;
    const lease = new ShardLease({
      client: this.runtime.dynamodb,
      tableName: this.runtime.leasesTable,
      shard: input.shard,
      instanceId: input.instanceId,
      processId: `${process.pid}/${processNonce}`,
      invocationStartMs: clock.now(),
      ttlMs: config.leaseTtlMs,
      clock,
    });
    this.leases.set(input.shard, lease);
    return lease;
  }

  /** The own cache's outcome drives metrics; peers' publishing (after a failover) is logged. */
  private logPeers(input: Input, r: RegionalTickResult): TickOutcome {
    const { logger } = this.observe;
    for (const p of r.peers) {
      if (p.role !== 'not-ours') logger.info('peer cache', { shard: input.shard, ...summarizePeer(p) });
    }
    const f = r.flights;
    // Each finished pass once, when it closed or failed something.
    if (f && f.atMs !== this.flightPassLogged && (f.closed > 0 || f.unclosed > 0)) {
      this.flightPassLogged = f.atMs;
      const log = f.error ? logger.warn.bind(logger) : logger.info.bind(logger);
      log('flight days closed', { shard: input.shard, ...f });
    }
    const a = r.authority;
    if (a && (a.reclaims.length > 0 || a.error || !a.written)) {
      logger.info('allocation authority', { shard: input.shard, ...a });
    }
    return r.own;
  }

  private recordTick(input: Input, outcome: TickOutcome, skippedBefore: number): void {
    const { logger, metrics } = this.observe;
    recordTick(metrics, outcome, skippedBefore, this.runtime.config.tickMs);
    logger.debug('tick', { shard: input.shard, instance: input.instanceId, ...summarizeTick(outcome) });
    if (outcome.invalidReason !== undefined) {
      logger.warn('plans on the fail-safe', {
        shard: input.shard,
        plans: outcome.invalidParams,
        first: outcome.invalidReason,
      });
    }
  }

  /**
   * Still holding at the end of the window: this instance's next invocation did not adopt the
   * lease in time (a missed or late delivery). Hand it back, so another instance takes over at its
   * next tick rather than after the TTL (conditional on holder and epoch: a no-op once adopted).
   */
  private async handBack(input: Input, lease: ShardLease): Promise<void> {
    if (!lease.heldAt(this.runtime.clock.now())) return;
    const epoch = lease.epoch;
    const released = await lease.release();
    // An error here: adopted meanwhile (the condition failed) or DynamoDB unreachable (it expires).
    this.observe.logger.info('end of window: lease handed back', {
      shard: input.shard,
      instance: input.instanceId,
      epoch,
      released: released.error === undefined,
    });
  }
}
