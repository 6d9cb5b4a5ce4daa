/**
 * The region shares of a pacer shard: reads the spend summaries every region's publisher wrote
 * into the `region-spend` global table, computes this cache region's share of every plan-day
 * (`shares.ts`), and — when this pacer published the tick — writes the cache region's own
 * summary. The pacer passes the shares to the controller as `budgetMicros`, so the published E(t),
 * and with it every guard of the region (`publishedCurve`), caps at the share.
 *
 * Item per (shard, cache region): pk `<N>:<shard>`, sk = the region whose cache (and live
 * counters) the summary describes; `plans` = JSON `{"<scope>:<planId>|<day>": [spentMicros,
 * demandMicrosPerSec]}`, `tick`, `atMs`, `writer` (publisher id). Only the pacer publishing into a
 * region's cache writes that region's item (the fence makes it one per tick), so global tables'
 * last-writer-wins never merges two regions' figures.
 */
import { ConditionalCheckFailedException, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { ResolvedPlan } from '../../budget/model.js';
import type { DayWindow } from '../../budget/time-zone.js';
import { pacerShardKey } from '../shard.js';
import type { PlanSpendSnapshot } from '../types.js';
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
}

/** The hook the shard pacer calls (absent: single region, every plan gets its whole budget). */
export interface RegionSharing {
  /** Reads the peers' summaries; never throws (the last ones read are kept, `error` says why). */
  load(nowMs: number): Promise<{ ok: boolean; error?: string }>;
  /** This cache region's budget per plan-day of the tick (aligned with `plans`). */
  budgets(plans: readonly SharedPlanDay[], spend: readonly PlanSpendSnapshot[], nowMs: number): number[];
  /**
   * After the controller step: feeds the demand estimate (every instance, to stay warm) and, when
   * `publish`, writes the cache region's summary. Never throws.
   */
  record(
    plans: readonly SharedPlanDay[],
    spend: readonly PlanSpendSnapshot[],
    gains: readonly number[],
    nowMs: number,
    tick: number,
    publish: { readonly writer: string } | undefined,
  ): Promise<{ ok: boolean; error?: string }>;
}

/** Options of {@link RegionShares}. */
export interface RegionSharesOptions {
  readonly dynamodb: DynamoDBClient;
  /** The `region-spend` table (its replica in the pacer's own region). */
  readonly tableName: string;
  readonly shard: number;
  readonly shards: number;
  /** The region whose cache this pacer computes for (its own, or a peer after a failover). */
  readonly cacheRegion: string;
  readonly tickMs: number;
  /** @default defaultShareConfig */
  readonly config?: Partial<ShareConfig>;
}

interface PlanDayMemory {
  readonly demand: DemandWindow;
  readonly published: PublishedMinimum;
  share?: number;
  lastDecision?: ShareDecision;
}

/** Region shares of one shard for one cache region, backed by the `region-spend` global table. */
export class RegionShares implements RegionSharing {
  private readonly doc: DynamoDBDocumentClient;
  private readonly config: ShareConfig;
  private readonly pk: string;
  /** Peers' figures per plan-day key, from the last successful load. */
  private peers = new Map<string, PeerFigures[]>();
  /** This cache region's own item as last read (a new process's demand before it has samples). */
  private ownStored = new Map<string, [number, number]>();
  private readonly memory = new Map<string, PlanDayMemory>();
  /** Ages of the peers' items at the last load (ms), for status and tests. */
  peerAgesMs = new Map<string, number>();

  constructor(private readonly options: RegionSharesOptions) {
    this.doc = DynamoDBDocumentClient.from(options.dynamodb);
    this.config = shareConfig(options.config);
    this.pk = pacerShardKey(options.shard, options.shards);
  }

  async load(nowMs: number): Promise<{ ok: boolean; error?: string }> {
    try {
      const peers = new Map<string, PeerFigures[]>();
      const own = new Map<string, [number, number]>();
      const ages = new Map<string, number>();
      let start: Record<string, unknown> | undefined;
      do {
        const out = await this.doc.send(
          new QueryCommand({
            TableName: this.options.tableName,
            KeyConditionExpression: 'pk = :pk',
            ExpressionAttributeValues: { ':pk': this.pk },
            ConsistentRead: true,
            ...(start ? { ExclusiveStartKey: start } : {}),
          }),
        );
        for (const item of out.Items ?? []) {
          const region = String(item.sk);
          const plans = parsePlans(item.plans);
          ages.set(region, nowMs - Number(item.atMs ?? 0));
          for (const [key, [spent, demand]] of plans) {
            if (region === this.options.cacheRegion) own.set(key, [spent, demand]);
            else {
              const list = peers.get(key) ?? [];
              peers.set(key, list);
              list.push({ region, spentMicros: spent, demandMicrosPerSec: demand });
            }
          }
        }
        start = out.LastEvaluatedKey;
      } while (start);
      this.peers = peers;
      this.ownStored = own;
      this.peerAgesMs = ages;
      return { ok: true };
    } catch (error) {
      return { ok: false, error: (error as Error).message };
    }
  }

  budgets(plans: readonly SharedPlanDay[], spend: readonly PlanSpendSnapshot[], nowMs: number): number[] {
    const out: number[] = new Array(plans.length);
    for (let i = 0; i < plans.length; i++) {
      const p = plans[i] as SharedPlanDay;
      const key = planDayKey(p);
      const m = this.memoryOf(key);
      const s = spend[i] as PlanSpendSnapshot;
      const ownSpent = spentOf(s);
      // The smallest own figure a peer may hold: those this process published within the window
      // and the one in the table now (a predecessor's, after a leader change).
      const stored = this.ownStored.get(key)?.[1];
      const mine = m.published.min(nowMs) ?? m.demand.demandMicrosPerSec();
      const ownDemand = Math.min(mine ?? Number.POSITIVE_INFINITY, stored ?? Number.POSITIVE_INFINITY);
      const decision = regionShare(
        {
          budgetMicros: p.plan.dailyBudgetMicros,
          dayLengthMs: p.day.endMs - p.day.startMs,
          ownSpentMicros: ownSpent,
          ownDemandMicrosPerSec: Number.isFinite(ownDemand) ? ownDemand : 0,
          peers: this.peers.get(key) ?? [],
          ...(m.share === undefined ? {} : { previousMicros: m.share }),
        },
        this.config,
      );
      m.share = decision.shareMicros;
      m.lastDecision = decision;
      out[i] = decision.shareMicros;
    }
    return out;
  }

  /** The last decision of a plan-day (tests, status). */
  decision(field: string, day: string): ShareDecision | undefined {
    return this.memory.get(`${field}|${day}`)?.lastDecision;
  }

  async record(
    plans: readonly SharedPlanDay[],
    spend: readonly PlanSpendSnapshot[],
    gains: readonly number[],
    nowMs: number,
    tick: number,
    publish: { readonly writer: string } | undefined,
  ): Promise<{ ok: boolean; error?: string }> {
    const summary: Record<string, [number, number]> = {};
    for (let i = 0; i < plans.length; i++) {
      const p = plans[i] as SharedPlanDay;
      const key = planDayKey(p);
      const m = this.memoryOf(key);
      const spent = spentOf(spend[i] as PlanSpendSnapshot);
      m.demand.observe(nowMs, spent, gains[i] ?? 1);
      const estimate = m.demand.demandMicrosPerSec();
      // Three decimals are plenty for a weight and keep the item small.
      const demand = Math.round((estimate ?? this.ownStored.get(key)?.[1] ?? 0) * 1000) / 1000;
      summary[key] = [spent, demand];
      // Only a measured figure enters the minimum: a process without samples yet republishes what
      // the table holds (or 0 at the very start, when every region weighs the same).
      if (publish && estimate !== undefined) m.published.publish(nowMs, demand);
    }
    this.forgetEndedDays(plans);
    if (!publish) return { ok: true };
    try {
      await this.doc.send(
        new PutCommand({
          TableName: this.options.tableName,
          Item: {
            pk: this.pk,
            sk: this.options.cacheRegion,
            plans: JSON.stringify(summary),
            tick,
            atMs: nowMs,
            writer: publish.writer,
          },
          // Ticks only move forward in one replica (a late duplicate never overwrites a newer tick).
          ConditionExpression: 'attribute_not_exists(pk) OR #t < :t',
          ExpressionAttributeNames: { '#t': 'tick' },
          ExpressionAttributeValues: { ':t': tick },
        }),
      );
      return { ok: true };
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return { ok: true };
      return { ok: false, error: (error as Error).message };
    }
  }

  private memoryOf(key: string): PlanDayMemory {
    let m = this.memory.get(key);
    if (!m) {
      m = {
        demand: new DemandWindow(this.config.demandWindowTicks),
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

/** Parses a summary's `plans`; a malformed entry is skipped (it cannot be guessed at). */
function parsePlans(raw: unknown): Map<string, [number, number]> {
  const out = new Map<string, [number, number]>();
  if (typeof raw !== 'string') return out;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return out;
  }
  if (!parsed || typeof parsed !== 'object') return out;
  for (const [key, v] of Object.entries(parsed as Record<string, unknown>)) {
    if (!Array.isArray(v) || v.length !== 2) continue;
    const [spent, demand] = v as [unknown, unknown];
    if (typeof spent !== 'number' || typeof demand !== 'number') continue;
    if (!Number.isFinite(spent) || !Number.isFinite(demand) || spent < 0 || demand < 0) continue;
    out.set(key, [spent, demand]);
  }
  return out;
}
