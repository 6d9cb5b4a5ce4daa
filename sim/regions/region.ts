/**
 * One region of a multi-region simulation: its own redis-server (its cache: live counters,
 * published parameters, allocation fields), its spend path (track-spend's `SpendTracker` and the
 * `Reconciler`, over the region's own wins in the ledger), and its processes — the pacer as the
 * pacer function wires it for several regions (`RegionalShardPacer` around a `ShardPacer` whose
 * sharing is `RegionShares` with `RegionAllocations`, the home step `AllocationAuthority`, the
 * `region-spend` table being this region's replica of {@link ReplicatedTable}) and the ad servers
 * (a `PacingReader` and a strict `BudgetGuard` each, leasing within the region's allocation).
 *
 * A lost region's processes are dropped (a crash: nothing settled, floats left to expire) and
 * started cold when it is back, with the next lease epoch; its cache and ledger survive.
 */
import type { CampaignBudgets, ResolvedPlan } from '../../shared/budget/model.js';
import { ShardBudgets } from '../../shared/pacing/budgets-cache.js';
import { elasticityOf } from '../../shared/pacing/controller/index.js';
import { ShardPacer } from '../../shared/pacing/pacer.js';
import { PublishedReads } from '../../shared/pacing/published-reads.js';
import { PacingReader, publishedCurve } from '../../shared/pacing/reader.js';
import { AllocationAuthority } from '../../shared/pacing/regions/allocation-authority.js';
import {
  type AllocationConfig,
  guardAllocations,
  regionalRelease,
} from '../../shared/pacing/regions/allocation-config.js';
import {
  PeerCaches,
  RegionalShardPacer,
  type RegionalTickIdentity,
} from '../../shared/pacing/regions/cross-region.js';
import { RegionAllocations } from '../../shared/pacing/regions/region-allocations.js';
import { RegionShares } from '../../shared/pacing/regions/region-shares.js';
import { rawSpendSource } from '../../shared/pacing/spend-source.js';
import { TICK_MS } from '../../shared/pacing/types.js';
import type { RedisClient } from '../../shared/redis/connect.js';
import { BudgetGuard } from '../../shared/spend/guard.js';
import type { LedgerStore } from '../../shared/spend/ledger.js';
import { defaultInFlight, Reconciler } from '../../shared/spend/reconcile.js';
import { SpendTracker } from '../../shared/spend/tracker.js';
import type { ManualClock } from '../../shared/time/clock.js';
import type { ScenarioBudgets } from '../budgets.js';
import { fixedIdentity, memoryLedger } from '../engine-parts.js';
import type { AuctionKind } from '../market/index.js';
import { controllerOf, type StrategyName } from '../strategies.js';
import type { ReplicatedTable } from './replication.js';
import type { ScenarioRegion } from './scenario.js';

const SHARD = 0;
const SHARDS = 1;

/** An ad server of the region: its reader and its guard. */
export interface SimServer {
  readonly reader: PacingReader;
  readonly guard: BudgetGuard;
}

/** The region's running processes (undefined while the region is lost). */
interface Processes {
  readonly pacer: RegionalShardPacer;
  readonly who: RegionalTickIdentity;
  readonly servers: SimServer[];
  readonly close: () => void;
}

/** What the run needs to build a region. */
export interface SimRegionOptions {
  readonly spec: ScenarioRegion;
  readonly redis: RedisClient;
  readonly clock: ManualClock;
  readonly config: AllocationConfig;
  readonly strategy: StrategyName;
  /** The market's auction: the controller's elasticity, as a region's pacer setting sets it. */
  readonly auction: AuctionKind;
  /** The market's time zone: the audience's, as a region's pacer setting gives it. */
  readonly audienceTimeZone: string;
  readonly budgets: ScenarioBudgets;
  /** Every campaign's budgets as track-spend reads them. */
  readonly live: ReadonlyMap<string, CampaignBudgets>;
  readonly table: ReplicatedTable;
  readonly guards: number;
  readonly minFloatMicros: number;
  /** The campaigns of an account (an account plan's spend is theirs). */
  readonly campaignsOfAccount: (accountId: string) => string[];
  /**
   * What a region confirmed of a plan-day, as this region's replica of the ledger holds it (the
   * home's reclaims).
   */
  readonly confirmedOf: (region: string, plan: ResolvedPlan, day: string) => Promise<number>;
  readonly onError: (line: string) => void;
}

/** One simulated region (module comment). */
export class SimRegion {
  /** The region's wins (its items of the replicated ledger: its rebuilds read only these). */
  readonly ledger: LedgerStore;
  /** When each of its wins was booked (bid id → epoch ms): when it can reach another replica. */
  readonly bookedAt = new Map<string, number>();
  readonly tracker: SpendTracker;
  readonly reconciler: Reconciler;
  /** The scorer's reader of what this region's pacer published (every minute). */
  readonly monitor: PacingReader;
  private readonly reads: PublishedReads;
  private processes: Processes | undefined;
  private epoch = 0;
  /** Counters kept across the region's processes (a lost region's guards are gone). */
  readonly totals = { leaseCalls: 0, allocationHolds: 0, allocationRefusals: 0 };

  constructor(private readonly o: SimRegionOptions) {
    const inFlight = defaultInFlight;
    const ledger = memoryLedger();
    this.ledger = {
      ...ledger,
      record: async (entry) => {
        const r = await ledger.record(entry);
        if (r.created) this.bookedAt.set(entry.bidId, o.clock.now());
        return r;
      },
    };
    this.reconciler = new Reconciler({
      redis: o.redis,
      ledger: this.ledger,
      clock: o.clock,
      inFlight,
      campaignsOfAccount: async (a) => o.campaignsOfAccount(a),
    });
    this.tracker = new SpendTracker({
      redis: o.redis,
      ledger: this.ledger,
      reconciler: this.reconciler,
      clock: o.clock,
      inFlight,
      budgets: async (id) => o.live.get(id),
    });
    this.reads = new PublishedReads({ redis: o.redis });
    this.monitor = new PacingReader({
      redis: o.redis,
      clock: o.clock,
      shards: SHARDS,
      maxAgeMs: 3 * TICK_MS,
      reads: this.reads,
    });
  }

  get name(): string {
    return this.o.spec.name;
  }

  /** True while the region's processes run (not lost). */
  get up(): boolean {
    return this.processes !== undefined;
  }

  /** The ad servers (none while lost). */
  get servers(): readonly SimServer[] {
    return this.processes?.servers ?? [];
  }

  /** Starts the region's processes cold (the run's start, or the region back after a loss). */
  start(campaigns: readonly CampaignBudgets[]): void {
    const { o } = this;
    this.epoch++;
    const budgets = new ShardBudgets({ source: o.budgets.source, clock: o.clock });
    const allocations = new RegionAllocations({ redis: o.redis, cacheRegion: this.name, config: o.config });
    const shares = new RegionShares({
      store: o.table.store(this.name),
      shard: SHARD,
      shards: SHARDS,
      cacheRegion: this.name,
      tickMs: TICK_MS,
      regions: o.config.regions,
      stalePeerMs: o.config.ackFreshMs,
      allocations,
    });
    const spend = rawSpendSource(o.redis, { allocations: o.config.mode });
    const own = new ShardPacer({
      shard: SHARD,
      region: this.name,
      redis: o.redis,
      controller: controllerOf(o.strategy, {
        elasticity: elasticityOf(o.auction),
        audienceTimeZone: o.audienceTimeZone,
        ...regionalRelease(o.config.mode, o.config.regions.length),
      }),
      budgets,
      spend,
      sharing: shares,
      clock: o.clock,
      tickMs: TICK_MS,
      logMaxLen: 10_000,
    });
    const authority = new AllocationAuthority({
      store: o.table.store(this.name),
      region: this.name,
      pk: shares.partitionKey,
      config: o.config,
      budgets,
      confirmedOf: o.confirmedOf,
    });
    const pacer = new RegionalShardPacer({
      region: this.name,
      own,
      peers: [],
      // No peer caches: the publish switches stay with their own regions in these scenarios.
      caches: new PeerCaches({
        clock: o.clock,
        elasticache: () => {
          throw new Error('no peer caches in the simulator');
        },
      }),
      authority: { authority, view: () => shares.view },
      clock: o.clock,
    });
    const epoch = this.epoch;
    const instanceId = `s${SHARD}-i${epoch}`;
    const who: RegionalTickIdentity = fixedIdentity({
      instanceId,
      publisherId: `${this.name}/${instanceId}/p${epoch}`,
      publisherRegion: this.name,
      epoch,
    });
    const servers = Array.from({ length: o.guards }, (): SimServer => {
      const reader = new PacingReader({
        redis: o.redis,
        clock: o.clock,
        shards: SHARDS,
        reads: this.reads,
        onError: (e) => o.onError(`${this.name} reader: ${String(e)}`),
      });
      const guard = new BudgetGuard({
        redis: o.redis,
        clock: o.clock,
        inFlight: defaultInFlight,
        curve: publishedCurve(reader),
        minFloatMicros: o.minFloatMicros,
        // As the single-region simulator's ad servers: small plans' floats sized by their bids.
        floatSizing: 'bids',
        initPlanDay: (plan, day) => this.reconciler.reconcile(plan, day),
        onError: (e) => o.onError(`${this.name} guard: ${String(e)}`),
        allocations: guardAllocations(o.config.mode, o.config.regions, this.name),
      });
      for (const b of campaigns) guard.setBudgets(b);
      return { reader, guard };
    });
    this.processes = {
      pacer,
      who,
      servers,
      close: () => {
        for (const s of servers) s.reader.close();
        spend.close();
      },
    };
  }

  /** The region is lost: its processes die where they stand (no settle, no release). */
  crash(): void {
    const p = this.processes;
    if (!p) return;
    for (const s of p.servers) this.count(s.guard);
    p.close();
    this.processes = undefined;
  }

  /** One pacer tick (own cache, then the home step). */
  tick(tick: number): ReturnType<RegionalShardPacer['runTick']> | undefined {
    const p = this.processes;
    return p ? p.pacer.runTick(tick, p.who) : undefined;
  }

  /** Every ad server's view of a changed campaign. */
  setBudgets(b: CampaignBudgets): void {
    for (const s of this.servers) s.guard.setBudgets(b);
  }

  /** Ends the run: closes the guards (their settle) and every reader. */
  async close(): Promise<void> {
    const p = this.processes;
    if (p) {
      for (const s of p.servers) {
        await s.guard.close();
        this.count(s.guard);
      }
      p.close();
      this.processes = undefined;
    }
    this.monitor.close();
    this.reads.close();
  }

  private count(guard: BudgetGuard): void {
    this.totals.leaseCalls += guard.stats.leaseCalls;
    this.totals.allocationHolds += guard.stats.allocationHolds;
    this.totals.allocationRefusals += guard.stats.allocationRefusals;
  }
}
