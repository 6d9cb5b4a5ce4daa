/**
 * The ad servers of the single-region engine (`scenario.guards` of them: a `PacingReader` and a
 * `BudgetGuard` each, whose E(t) is `publishedCurve(reader)`), and the scorer's own reader of what
 * the pacer published. Their readers share the fetch (`PublishedReads`): the refresh-ahead they
 * all issue at a tick boundary reads and decodes each campaign hash once. Each keeps its own
 * cache, lookups and idle drops, so what each server serves is what it would serve alone.
 */
import type { CampaignBudgets } from '../../shared/budget/model.js';
import type { TargetCurve } from '../../shared/budget/pacing.js';
import { PublishedReads } from '../../shared/pacing/published-reads.js';
import { PacingReader, publishedCurve } from '../../shared/pacing/reader.js';
import { TICK_MS } from '../../shared/pacing/types.js';
import type { RedisClient } from '../../shared/redis/connect.js';
import { BudgetGuard } from '../../shared/spend/guard.js';
import { defaultInFlight, type Reconciler } from '../../shared/spend/reconcile.js';
import type { ManualClock } from '../../shared/time/clock.js';
import type { AdServer } from './bidding.js';

const SHARDS = 1;

/** What {@link AdServers} needs. */
export interface AdServersOptions {
  readonly redis: RedisClient;
  readonly clock: ManualClock;
  readonly count: number;
  readonly minFloatMicros: number;
  readonly reconciler: Reconciler;
  /** The raw readers' no-reply timeout. */
  readonly readTimeoutMs: number;
  readonly onError: (line: string) => void;
}

/** One ad server: its reader, guard and the guard's curve. */
export interface SimServer extends AdServer {
  readonly curve: TargetCurve;
}

/** The ad servers and the scorer's reader (module comment). */
export class AdServers {
  readonly servers: SimServer[];
  /**
   * The scorer's own reader: what the pacer published, read every minute for every campaign.
   * It shares the ad servers' reads: at a minute boundary its read of every campaign is issued
   * with their refresh-ahead (one read of each hash for all; the state is the same: after the
   * publish).
   */
  readonly monitor: PacingReader;
  readonly monitorCurve: TargetCurve;
  private readonly reads: PublishedReads;

  constructor(o: AdServersOptions) {
    const { redis, clock } = o;
    this.reads = new PublishedReads({ redis, readTimeoutMs: o.readTimeoutMs });
    this.servers = Array.from({ length: o.count }, () => {
      const reader = new PacingReader({
        redis,
        clock,
        shards: SHARDS,
        reads: this.reads,
        onError: (e) => o.onError(`reader: ${String(e)}`),
      });
      const curve = publishedCurve(reader);
      const guard = new BudgetGuard({
        redis,
        clock,
        inFlight: defaultInFlight,
        curve,
        minFloatMicros: o.minFloatMicros,
        // Small plans' floats sized by their bids (the minimum float is the largest bid any
        // campaign can make: a whole one is several percent of a $2 day, held unspent by each ad
        // server).
        floatSizing: 'bids',
        initPlanDay: (plan, day) => o.reconciler.reconcile(plan, day),
        onError: (e) => o.onError(`guard: ${String(e)}`),
      });
      return { reader, guard, curve };
    });
    this.monitor = new PacingReader({
      redis,
      clock,
      shards: SHARDS,
      maxAgeMs: 3 * TICK_MS,
      reads: this.reads,
    });
    this.monitorCurve = publishedCurve(this.monitor);
  }

  /** The server of request `id`. */
  serverOf(id: number): SimServer {
    return this.servers[id % this.servers.length] as SimServer;
  }

  setBudgets(b: CampaignBudgets): void {
    for (const s of this.servers) s.guard.setBudgets(b);
  }

  /** Every reader's prefetch of the active campaigns, one after the other. */
  async prefetch(active: { accountId: string; campaignId: string }[]): Promise<void> {
    for (const s of this.servers) await s.reader.prefetch(active);
  }

  /** Refresh-ahead of every server's reader (reads only: the pipelines go out together). */
  refreshDue(): Promise<unknown> {
    return Promise.all(this.servers.map((s) => s.reader.refreshDue()));
  }

  /**
   * Every guard's upkeep at once: each settles its own floats (the commands reach Redis in the
   * same order as one after the other: the first guard's, then the second's).
   */
  async maintain(): Promise<void> {
    await Promise.all(this.servers.map((s) => s.guard.maintain()));
  }

  /** Lease calls of every guard landed. */
  async idle(): Promise<void> {
    await Promise.all(this.servers.map((s) => s.guard.idle()));
  }

  get leaseCalls(): number {
    return this.servers.reduce((a, s) => a + s.guard.stats.leaseCalls, 0);
  }

  async close(): Promise<void> {
    for (const s of this.servers) {
      await s.guard.close();
      s.reader.close();
    }
    this.reads.close();
    this.monitor.close();
  }
}
