/**
 * The pacer phase of the single-region engine: one shard's `ShardPacer` as the pacer function
 * runs it (its own raw spend reader, the strategy's controller, a `ShardBudgets` cache over the
 * scenario's budget items), a new process per takeover, and the fence evidence of takeovers and
 * region flips: a killed leader is followed by a cold process with the next lease epoch; a flip
 * gives a new region's process a higher fence generation while the old one, still reading its old
 * control value for a few ticks, is refused by the fence.
 */

import { ShardBudgets } from '../../shared/pacing/budgets-cache.js';
import { elasticityOf } from '../../shared/pacing/controller/index.js';
import type { DeliveryCounts } from '../../shared/pacing/delivery-counts.js';
import { ShardPacer, type TickIdentity, type TickOutcome } from '../../shared/pacing/pacer.js';
import { readAuditLog } from '../../shared/pacing/publisher.js';
import { rawSpendSource } from '../../shared/pacing/spend-source.js';
import { TICK_MS } from '../../shared/pacing/types.js';
import type { RedisClient } from '../../shared/redis/connect.js';
import type { ManualClock } from '../../shared/time/clock.js';
import type { ScenarioBudgets } from '../budgets.js';
import { fixedIdentity } from '../engine-parts.js';
import type { AuctionKind } from '../market/index.js';
import { controllerOf, type StrategyName } from '../strategies.js';

const SHARD = 0;
/** Ticks an old region's pacer keeps trying with its old fence after a flip (stale SSM view). */
const STALE_TICKS_AFTER_FLIP = 3;

/** One pacer process: its pacer, spend reader and identity. */
interface PacerProcess {
  readonly pacer: ShardPacer;
  readonly spend: ReturnType<typeof rawSpendSource>;
  readonly instanceId: string;
  readonly publisherId: string;
}

/** What {@link SimPacer} needs. */
export interface SimPacerOptions {
  readonly redis: RedisClient;
  readonly clock: ManualClock;
  readonly strategy: StrategyName;
  /** The market's auction: the controller's elasticity, as a region's pacer setting sets it. */
  readonly auction: AuctionKind;
  /** The market's time zone: the audience's, as a region's pacer setting gives it. */
  readonly audienceTimeZone: string;
  readonly budgets: ScenarioBudgets;
  /** The raw readers' no-reply timeout. */
  readonly readTimeoutMs: number;
  /** How long a killed leader's lease keeps others out. */
  readonly leaseTtlMs: number;
  /** Every leader tick in a new process (`RunOptions.takeoverEveryTick`). @default false */
  readonly takeoverEveryTick?: boolean;
  readonly onError: (line: string) => void;
}

/** The shard's pacer processes over a run (module comment), with their counters. */
export class SimPacer {
  ticks = 0;
  published = 0;
  fenced = 0;
  reloads = 0;
  /** The delivery bands of each minute's publishing tick (`TickOutcome.delivery`). */
  readonly deliveryMinutes: { atMs: number; counts: DeliveryCounts }[] = [];
  /** Each takeover's fence (`g.o.e`) and publisher, as the new leader claimed. */
  readonly takeovers: { fence: string; publisher: string }[] = [];
  /**
   * Set for one leader tick: the pacer runs it after its controller stepped, before it publishes
   * (at most once: a stale pacer's tick finds it cleared).
   */
  publishHook: (() => Promise<void>) | undefined;
  private generation = 1;
  private epoch = 1;
  private region = 'sim-a';
  private processNo = 0;
  /** The processes alive (their raw sockets are closed when they die, or at the end of the run). */
  private readonly processes = new Set<PacerProcess>();
  /** Whether the current leader process has ticked (`takeoverEveryTick` replaces it then). */
  private leaderTicked = false;
  private readonly controller: ReturnType<typeof controllerOf>;
  private leader: PacerProcess;
  private who: TickIdentity;
  private downUntil = Number.NEGATIVE_INFINITY;
  private stale: { pacer: PacerProcess; who: TickIdentity; ticksLeft: number } | undefined;

  constructor(private readonly o: SimPacerOptions) {
    this.controller = controllerOf(o.strategy, {
      elasticity: elasticityOf(o.auction),
      audienceTimeZone: o.audienceTimeZone,
    });
    this.leader = this.newProcess(this.region);
    this.who = this.identity(this.leader);
  }

  /** Whether a stale pacer still ticks after a flip (its spend read follows the leader's tick). */
  get staleTicking(): boolean {
    return this.stale !== undefined && this.stale.ticksLeft > 0;
  }

  /** Whether a leader runs at `now` (none while a killed leader's lease runs out). */
  upAt(now: number): boolean {
    return now >= this.downUntil;
  }

  /** The leader's tick at `now` (the caller checked {@link upAt}). */
  async leaderTick(now: number): Promise<TickOutcome> {
    if (this.o.takeoverEveryTick && this.leaderTicked) this.takeOver();
    this.leaderTicked = true;
    const t = Math.floor(now / TICK_MS);
    const o = await this.leader.pacer.runTick(t, this.who);
    if (o.published) this.published++;
    if (o.delivery) this.deliveryMinutes.push({ atMs: now, counts: o.delivery });
    if (o.stateReloaded) {
      this.reloads++;
      if (o.fence)
        this.takeovers.push({
          fence: `${o.fence.g}.${o.fence.o}.${o.fence.e}`,
          publisher: this.who.publisherId,
        });
    }
    this.fenced += o.fencedWritesRejected;
    if (o.invalidParams > 0)
      this.o.onError(`pacer: ${o.invalidParams} plans got fail-safe parameters at ${now}`);
    return o;
  }

  /** The stale pacer's tick after a flip, if it still ticks: refused by the fence. */
  async staleTick(now: number): Promise<void> {
    const stale = this.stale;
    if (!stale || stale.ticksLeft <= 0) return;
    const t = Math.floor(now / TICK_MS);
    stale.ticksLeft--;
    const o = await stale.pacer.pacer.runTick(t, stale.who);
    this.fenced += o.fencedWritesRejected;
    if (o.published) this.o.onError(`fence: the old region's pacer published tick ${t} after the flip`);
  }

  /**
   * The leader dies at `now`; its lease expires after its TTL; another instance acquires it with
   * the next epoch (a cold process: empty memory, budgets and state from Redis / DynamoDB).
   */
  kill(now: number): void {
    this.downUntil = now + this.o.leaseTtlMs;
    this.takeOver();
    this.leaderTicked = false;
  }

  /** A new process replaces the leader with the next epoch (at once: `takeoverEveryTick`). */
  private takeOver(): void {
    this.epoch++;
    this.retire(this.leader);
    this.leader = this.newProcess(this.region);
    this.who = this.identity(this.leader);
  }

  /** A process dies: its sockets close (a takeover every tick would otherwise pile them up). */
  private retire(p: PacerProcess): void {
    p.pacer.close();
    p.spend.close();
    this.processes.delete(p);
  }

  /**
   * publisher-region now names another region: its version (g) is higher. The old region's
   * pacer keeps its stale control view for a few ticks and is refused by the fence.
   */
  flip(): void {
    this.stale = { pacer: this.leader, who: this.who, ticksLeft: STALE_TICKS_AFTER_FLIP };
    this.generation++;
    this.region = this.region === 'sim-a' ? 'sim-b' : 'sim-a';
    this.leader = this.newProcess(this.region);
    this.who = this.identity(this.leader);
    this.leaderTicked = false;
  }

  /** Closes every live process's sockets. */
  close(): void {
    for (const p of this.processes) this.retire(p);
  }

  /**
   * Fencing evidence from the server's own audit stream: after each takeover's first accepted
   * claim, no accepted write of a lower fence. Returns the stale writes accepted.
   */
  async staleWritesAccepted(): Promise<number> {
    if (this.takeovers.length === 0) return 0;
    const log = await readAuditLog(this.o.redis, SHARD, 1_000_000);
    const cmp = (a: string, b: string) => {
      const x = a.split('.').map(Number);
      const y = b.split('.').map(Number);
      for (let i = 0; i < 3; i++) if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) - (y[i] ?? 0);
      return 0;
    };
    let accepted = 0;
    let highest = '0.0.0';
    for (const e of log) {
      if (!e.accepted) continue;
      if (cmp(e.fence, highest) < 0) accepted++;
      else highest = e.fence;
    }
    return accepted;
  }

  private newProcess(regionName: string): PacerProcess {
    const { redis, clock } = this.o;
    this.processNo++;
    // The pacer function's own spend reader (shared/pacing/regions/wiring.ts): raw RESP, folded
    // from the reply bytes. Its sockets only read, after the tick's writes are acknowledged on the
    // client's connection, so the run stays deterministic.
    const spend = rawSpendSource(redis, { timeoutMs: this.o.readTimeoutMs });
    const pacer = new ShardPacer({
      shard: SHARD,
      region: regionName,
      redis,
      controller: this.controller,
      budgets: new ShardBudgets({ source: this.o.budgets.source, clock }),
      spend,
      clock,
      tickMs: TICK_MS,
      logMaxLen: 100_000,
      beforePublish: async () => {
        const hook = this.publishHook;
        this.publishHook = undefined;
        if (hook) await hook();
      },
    });
    const instanceId = `s${SHARD}-i${this.processNo}`;
    const p = { pacer, spend, instanceId, publisherId: `${instanceId}/${regionName}-p${this.processNo}` };
    this.processes.add(p);
    return p;
  }

  private identity(p: PacerProcess): TickIdentity {
    return fixedIdentity({
      instanceId: p.instanceId,
      publisherId: p.publisherId,
      publisherRegion: this.region,
      epoch: this.epoch,
      generation: this.generation,
    });
  }
}
