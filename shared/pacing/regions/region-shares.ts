/**
 * The region shares of a pacer shard: reads the spend summaries every region's publisher wrote
 * into the `region-spend` global table, computes this cache region's share of every plan-day
 * (`shares.ts`), and — when this pacer published the tick — writes the cache region's own
 * summary. The pacer passes the shares to the controller as `budgetMicros`, so the published E(t),
 * and with it every guard of the region (`publishedCurve`), aims at the share.
 *
 * With strict allocations (several regions) the share is the soft split and the allocation the
 * hard cap: before writing the summary, the publisher runs the region's allocation step
 * (`region-allocations.ts`, which writes the caps into Redis first) and writes its mailbox entries
 * with the summary; while some region's demand is not measured yet, the share aims at everything
 * left (`optimistic`). Items and parts: `region-spend-items.ts`. Only the pacer publishing into a
 * region's cache writes that region's items (the fence makes it one per tick), so global tables'
 * last-writer-wins never merges two regions' figures.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { ResolvedPlan } from '../../budget/model.js';
import type { DayWindow } from '../../budget/time-zone.js';
import { pacerShardKey } from '../shard.js';
import { evaluateCurve, type PlanPacingParams, type PlanSpendSnapshot } from '../types.js';
import type { AllocationTickOutcome, RegionAllocations } from './region-allocations.js';
import {
  EMPTY_VIEW,
  ownerOfSk,
  partSk,
  type RegionSpendStore,
  type RegionSpendView,
  splitParts,
  viewOf,
} from './region-spend-items.js';
import { dynamoRegionSpendStore } from './region-spend-store.js';
import {
  DemandWindow,
  type PeerFigures,
  PublishedMinimum,
  regionShare,
  type ShareConfig,
  type ShareDecision,
  shareConfig,
} from './shares.js';

/** One plan-day of the tick as the sharing needs it. */
export interface SharedPlanDay {
  /** `<scope>:<planId>` (the state hash field). */
  readonly field: string;
  readonly plan: ResolvedPlan;
  readonly day: DayWindow;
  /** The plan-day's live-spend state key. */
  readonly spendKey: string;
}

/** What {@link RegionSharing.record} did. */
export interface SharingRecord {
  readonly ok: boolean;
  readonly error?: string;
  /** The allocation step, when this pacer published (strict: caps written, mailbox reported). */
  readonly allocation?: Omit<AllocationTickOutcome, 'mailboxes'>;
}

/** The hook the shard pacer calls (absent: single region, every plan gets its whole budget). */
export interface RegionSharing {
  /** Reads the peers' summaries; never throws (the last ones read are kept, `error` says why). */
  load(nowMs: number): Promise<{ ok: boolean; error?: string }>;
  /** This cache region's budget per plan-day of the tick (aligned with `plans`). */
  budgets(plans: readonly SharedPlanDay[], spend: readonly PlanSpendSnapshot[], nowMs: number): number[];
  /**
   * After the controller step: feeds the demand estimate (every instance, to stay warm) and, when
   * `publish`, runs the allocation step and writes the cache region's summary. Never throws.
   */
  record(
    plans: readonly SharedPlanDay[],
    spend: readonly PlanSpendSnapshot[],
    params: readonly PlanPacingParams[],
    nowMs: number,
    tick: number,
    publish: { readonly writer: string } | undefined,
  ): Promise<SharingRecord>;
}

/** Options of {@link RegionShares}. */
export interface RegionSharesOptions {
  /** The table (default: DynamoDB `tableName` through `dynamodb`). */
  readonly store?: RegionSpendStore;
  readonly dynamodb?: DynamoDBClient;
  /** The `region-spend` table (its replica in the pacer's own region). */
  readonly tableName?: string;
  readonly shard: number;
  readonly shards: number;
  /** The region whose cache this pacer computes for (its own, or a peer after a failover). */
  readonly cacheRegion: string;
  readonly tickMs: number;
  /** @default defaultShareConfig */
  readonly config?: Partial<ShareConfig>;
  /** The cache region's allocation step (strict: caps and mailbox; off: stale caps removed). */
  readonly allocations?: RegionAllocations;
  /** Every region of the deployment (strict: a region with no figure yet is not measured). */
  readonly regions?: readonly string[];
  /** Strict: a peer whose item is older than this weighs no demand (it is not pacing). */
  readonly stalePeerMs?: number;
}

interface PlanDayMemory {
  readonly demand: DemandWindow;
  readonly published: PublishedMinimum;
  share?: number;
  lastDecision?: ShareDecision;
}

/** Region shares of one shard for one cache region, backed by the `region-spend` global table. */
export class RegionShares implements RegionSharing {
  private readonly store: RegionSpendStore;
  private readonly config: ShareConfig;
  private readonly pk: string;
  /** Peers' figures per plan-day key, from the last successful load. */
  private peers = new Map<string, PeerFigures[]>();
  /** Plan-day keys some peer has not measured a demand for yet. */
  private peersUnmeasured = new Set<string>();
  /** This cache region's own item as last read (a new process's demand before it has samples). */
  private ownStored = new Map<string, { spent: number; demand: number; measured: boolean }>();
  private readonly memory = new Map<string, PlanDayMemory>();
  /** Parts of the own item last written (a shrink deletes the parts beyond). */
  private ownParts: number | undefined;
  /** Ages of the peers' items at the last load (ms), for status and tests. */
  peerAgesMs = new Map<string, number>();
  /** The table as the last load read it (the allocation authority reads it too). */
  view: RegionSpendView = EMPTY_VIEW;

  constructor(private readonly options: RegionSharesOptions) {
    if (options.store) this.store = options.store;
    else {
      if (!options.dynamodb || !options.tableName)
        throw new Error('RegionShares needs a store, or dynamodb and tableName.');
      this.store = dynamoRegionSpendStore(options.dynamodb, options.tableName);
    }
    this.config = shareConfig(options.config);
    this.pk = pacerShardKey(options.shard, options.shards);
  }

  /** The pk of the shard's items. */
  get partitionKey(): string {
    return this.pk;
  }

  private get strict(): boolean {
    return this.options.allocations?.mode === 'strict';
  }

  async load(nowMs: number): Promise<{ ok: boolean; error?: string }> {
    try {
      const items = await this.store.query(this.pk);
      const view = viewOf(items);
      const peers = new Map<string, PeerFigures[]>();
      const unmeasured = new Set<string>();
      const own = new Map<string, { spent: number; demand: number; measured: boolean }>();
      const ages = new Map<string, number>();
      for (const [region, record] of view.regions) {
        ages.set(region, nowMs - record.atMs);
        for (const [key, f] of record.plans) {
          if (region === this.options.cacheRegion) {
            own.set(key, { spent: f.spentMicros, demand: f.demandMicrosPerSec, measured: f.measured });
            continue;
          }
          const list = peers.get(key) ?? [];
          peers.set(key, list);
          // Strict: a peer that stopped reporting is not pacing (its lease runs out, its
          // allocation comes back): its spend counts, its last demand figure no longer weighs.
          const stale =
            this.strict && nowMs - record.atMs > (this.options.stalePeerMs ?? Number.POSITIVE_INFINITY);
          list.push({
            region,
            spentMicros: f.spentMicros,
            demandMicrosPerSec: stale ? 0 : f.demandMicrosPerSec,
          });
          if (!f.measured && !stale) unmeasured.add(key);
        }
      }
      this.view = view;
      this.peers = peers;
      this.peersUnmeasured = unmeasured;
      this.ownStored = own;
      this.peerAgesMs = ages;
      const ownParts = items.filter((i) => {
        const owner = ownerOfSk(String(i.sk));
        return owner.kind === 'region' && owner.name === this.options.cacheRegion;
      }).length;
      this.ownParts ??= ownParts > 0 ? ownParts : undefined;
      return { ok: true };
    } catch (error) {
      return { ok: false, error: (error as Error).message };
    }
  }

  budgets(plans: readonly SharedPlanDay[], spend: readonly PlanSpendSnapshot[], nowMs: number): number[] {
    const out: number[] = new Array(plans.length);
    const others = Math.max(0, (this.options.regions?.length ?? 1) - 1);
    for (let i = 0; i < plans.length; i++) {
      const p = plans[i] as SharedPlanDay;
      const key = planDayKey(p);
      const m = this.memoryOf(key);
      const s = spend[i] as PlanSpendSnapshot;
      const ownSpent = spentOf(s);
      if (this.leaseLapsed(s, nowMs)) {
        // No guard of this region can lease until the authority renews its allocation (the home
        // unreachable): it aims at what it has committed, so its E(t) — and the combined curve —
        // stops where its spend stops instead of promising what no guard may spend. The peers'
        // rule already moves the remainder to them once this region's summary goes stale.
        const remaining = Math.max(0, p.plan.dailyBudgetMicros - ownSpent);
        const decision = { shareMicros: ownSpent, weight: 0, remainingMicros: remaining, held: false };
        m.share = ownSpent;
        m.lastDecision = decision;
        out[i] = ownSpent;
        continue;
      }
      // The smallest own figure a peer may hold: those this process published within the window
      // and the one in the table now (a predecessor's, after a leader change).
      const stored = this.ownStored.get(key);
      const storedDemand = stored?.measured === false ? undefined : stored?.demand;
      const mine = m.published.min(nowMs) ?? m.demand.demandMicrosPerSec();
      const ownDemand = Math.min(mine ?? Number.POSITIVE_INFINITY, storedDemand ?? Number.POSITIVE_INFINITY);
      const peers = this.peers.get(key) ?? [];
      // Strict: the allocation caps, so until every region measured its demand the share aims at
      // everything left rather than an equal split.
      const optimistic =
        this.strict &&
        (!Number.isFinite(ownDemand) || this.peersUnmeasured.has(key) || peers.length < others);
      const decision = regionShare(
        {
          budgetMicros: p.plan.dailyBudgetMicros,
          dayLengthMs: p.day.endMs - p.day.startMs,
          ownSpentMicros: ownSpent,
          ownDemandMicrosPerSec: Number.isFinite(ownDemand) ? ownDemand : 0,
          peers,
          ...(m.share === undefined ? {} : { previousMicros: m.share }),
          ...(optimistic ? { optimistic } : {}),
        },
        this.config,
      );
      m.share = decision.shareMicros;
      m.lastDecision = decision;
      out[i] = decision.shareMicros;
    }
    return out;
  }

  /**
   * Strict: the region's allocation lease (`ae`) ran out, so its guards can lease nothing, and has
   * stayed out for longer than its peers wait before they stop weighing a silent region
   * (`stalePeerMs`): then they take what is left, and this region yields it. A shorter gap (the
   * first authority entry of a new plan-day still replicating) keeps the share, or a tick's gap
   * would release the region's allocation and re-anchor its curve for nothing.
   */
  private leaseLapsed(s: PlanSpendSnapshot, nowMs: number): boolean {
    const until = s.alloc?.ae;
    return this.strict && until !== undefined && nowMs > until + (this.options.stalePeerMs ?? 0);
  }

  /**
   * Strict: when the allocation last held a lease back (the demand estimate leaves that interval
   * out); a lapsed allocation holds every lease back, so the interval ending now says nothing.
   */
  private heldBackAt(s: PlanSpendSnapshot, nowMs: number): number | undefined {
    if (!this.strict) return undefined;
    return this.leaseLapsed(s, nowMs) ? nowMs : s.alloc?.ac;
  }

  /** The last decision of a plan-day (tests, status). */
  decision(field: string, day: string): ShareDecision | undefined {
    return this.memory.get(`${field}|${day}`)?.lastDecision;
  }

  async record(
    plans: readonly SharedPlanDay[],
    spend: readonly PlanSpendSnapshot[],
    params: readonly PlanPacingParams[],
    nowMs: number,
    tick: number,
    publish: { readonly writer: string } | undefined,
  ): Promise<SharingRecord> {
    const members: [string, string][] = [];
    const unmeasured: string[] = [];
    const demands: (number | undefined)[] = new Array(plans.length);
    for (let i = 0; i < plans.length; i++) {
      const p = plans[i] as SharedPlanDay;
      const key = planDayKey(p);
      const m = this.memoryOf(key);
      const spent = spentOf(spend[i] as PlanSpendSnapshot);
      const q = params[i] as PlanPacingParams | undefined;
      const heldBack = this.heldBackAt(spend[i] as PlanSpendSnapshot, nowMs);
      m.demand.observe(nowMs, spent, q ? q.throttle * q.bidMultiplier : 1, heldBack);
      const estimate = m.demand.demandMicrosPerSec();
      const stored = this.ownStored.get(key);
      // Three decimals are plenty for a weight and keep the item small.
      const demand = Math.round((estimate ?? stored?.demand ?? 0) * 1000) / 1000;
      const measured = estimate !== undefined || stored?.measured === true;
      demands[i] = measured ? demand : undefined;
      if (!measured) unmeasured.push(key);
      members.push([key, `${JSON.stringify(key)}:[${spent},${demand}]`]);
      // Only a measured figure enters the minimum: a process without samples yet republishes what
      // the table holds (or 0 at the very start, when every region weighs the same).
      if (publish && estimate !== undefined) m.published.publish(nowMs, demand);
    }
    this.forgetEndedDays(plans);
    if (!publish) return { ok: true };
    let allocation: AllocationTickOutcome | undefined;
    if (this.options.allocations) {
      allocation = await this.options.allocations.apply({
        plans,
        spend,
        expectedAt: (i, atMs) => {
          const q = params[i] as PlanPacingParams | undefined;
          return q ? evaluateCurve(q.curve, atMs) : 0;
        },
        demands,
        nowMs,
        view: this.view,
      });
    }
    const { mailboxes: written, ...allocationSummary } = allocation ?? { mailboxes: undefined };
    const mailboxes = this.strict ? written : undefined;
    try {
      await this.writeParts(
        members,
        mailboxes,
        new Set(this.strict ? unmeasured : []),
        nowMs,
        tick,
        publish.writer,
      );
      return {
        ok: allocation?.error === undefined,
        ...(allocation?.error ? { error: allocation.error } : {}),
        ...(allocation ? { allocation: allocationSummary as SharingRecord['allocation'] } : {}),
      };
    } catch (error) {
      return {
        ok: false,
        error: (error as Error).message,
        ...(allocation ? { allocation: allocationSummary as SharingRecord['allocation'] } : {}),
      };
    }
  }

  /** Writes the cache region's item(s): the summary, the mailbox, split in parts by plan hash. */
  private async writeParts(
    members: readonly [string, string][],
    mailboxes: ReadonlyMap<string, readonly unknown[]> | undefined,
    unmeasured: ReadonlySet<string>,
    nowMs: number,
    tick: number,
    writer: string,
  ): Promise<void> {
    const region = this.options.cacheRegion;
    const mailboxJson = members.map(([key]) => {
      const mb = mailboxes?.get(key);
      return mb ? `${JSON.stringify(key)}:${JSON.stringify(mb)}` : undefined;
    });
    const parts = splitParts(
      members.map(([key, json], i) => [key, json.length + (mailboxJson[i]?.length ?? 0)] as const),
    );
    const n = parts.length;
    await Promise.all(
      parts.map((indexes, part) => {
        const plans: string[] = [];
        const alloc: string[] = [];
        const um: string[] = [];
        for (const i of indexes) {
          const [key, json] = members[i] as [string, string];
          plans.push(json);
          const mb = mailboxJson[i];
          if (mb !== undefined) alloc.push(mb);
          if (unmeasured.has(key)) um.push(key);
        }
        return this.store.put({
          pk: this.pk,
          sk: partSk(region, part, n),
          plans: `{${plans.join(',')}}`,
          ...(mailboxes ? { alloc: `{${alloc.join(',')}}` } : {}),
          ...(um.length > 0 ? { um: JSON.stringify(um) } : {}),
          tick,
          atMs: nowMs,
          writer,
          parts: n,
        });
      }),
    );
    // Parts beyond a shrunk count would be read as lagging entries: delete them.
    const before = this.ownParts ?? n;
    this.ownParts = n;
    if (before > n) {
      const stale = before === 1 ? [region] : Array.from({ length: before }, (_, p) => `${region}#${p}`);
      const keep = new Set(parts.map((_, p) => partSk(region, p, n)));
      await Promise.all(stale.filter((sk) => !keep.has(sk)).map((sk) => this.store.delete(this.pk, sk)));
    }
  }

  private memoryOf(key: string): PlanDayMemory {
    let m = this.memory.get(key);
    if (!m) {
      m = {
        demand: new DemandWindow(this.config.demandWindowTicks, this.config.demandWindowMaxTicks),
        published: new PublishedMinimum(this.config.maxReplicationLagMs + this.options.tickMs),
      };
      this.memory.set(key, m);
    }
    return m;
  }

  /** Drops plan-days no longer paced (ended days, deleted plans) once they outnumber the live ones. */
  private forgetEndedDays(plans: readonly SharedPlanDay[]): void {
    if (this.memory.size <= plans.length * 2) return;
    const live = new Set(plans.map(planDayKey));
    for (const key of this.memory.keys()) if (!live.has(key)) this.memory.delete(key);
  }
}

/** `<field>|<day>`: a plan-day's key in the summaries. */
export function planDayKey(p: Pick<SharedPlanDay, 'field' | 'day'>): string {
  return `${p.field}|${p.day.day}`;
}

/** What a region has committed of a plan-day: confirmed + in flight + leased floats. */
export function spentOf(s: PlanSpendSnapshot): number {
  return s.confirmedMicros + s.inFlightMicros + s.leasedMicros;
}
