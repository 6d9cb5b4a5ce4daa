/**
 * A pacer shard's budgets (accounts, campaigns, plans), cached between ticks and kept current
 * without ever scanning the table:
 *
 * - **incremental** every tick: one Query of the `by-pacer-shard` index for items with
 *   `updatedAt ≥ watermark − overlap`, where the watermark is the newest `updatedAt` seen. The
 *   overlap re-reads recent items because index reads are eventually consistent and writers'
 *   clocks differ; re-reading is harmless (an item applies only if it is newer than what is held);
 * - **full reload** every `fullReloadMs` (and on the first refresh): the whole shard partition,
 *   replacing the cache, so a write stamped by a clock far behind (below the overlap) or an item
 *   re-tagged to another shard is picked up within that period.
 *
 * A change is therefore visible at the next tick (≤ one tick) in the normal case. When DynamoDB
 * cannot be read the cache keeps serving what it holds (the refresh reports the failure), so a
 * pacer keeps computing through a DynamoDB outage. Raw items can be exported and imported, so a
 * fresh process can warm up from a snapshot instead of DynamoDB.
 */
import {
  type Account,
  type BudgetPlan,
  type Campaign,
  type CampaignBudgets,
  campaignBudgets,
} from '../budget/model.js';
import type { BudgetItem } from '../budget/repository.js';
import type { Clock } from '../time/clock.js';

/** One page of a shard's items changed at or after `sinceMs` (BudgetRepository.shardItemsPage). */
export type ShardItemSource = (
  sinceMs: number,
  startKey?: Record<string, unknown>,
) => Promise<{ items: BudgetItem[]; next?: Record<string, unknown> }>;

/** Options of {@link ShardBudgets}. */
export interface ShardBudgetsOptions {
  readonly source: ShardItemSource;
  readonly clock: Clock;
  /** Period of full reloads of the shard partition, ms. @default 300_000 (5 min) */
  readonly fullReloadMs?: number;
  /** How far behind the watermark each incremental query starts, ms. @default 60_000 */
  readonly overlapMs?: number;
}

/** What a refresh did. */
export interface RefreshOutcome {
  readonly kind: 'full' | 'incremental';
  /** Items read from DynamoDB. */
  readonly read: number;
  /** Items that were new or newer than the cached ones. */
  readonly applied: number;
  /** Campaigns whose budgets changed (rebuilt). */
  readonly campaignsChanged: number;
}

const itemKey = budgetItemKey;

function model<T>(item: BudgetItem): T {
  const { pk: _pk, sk: _sk, type: _type, pacerShard: _s, version: _v, updatedAt: _u, ...rest } = item;
  return rest as unknown as T;
}

/** Changes of the cached items since the last drain (mirrored into the Redis snapshot). */
export interface BudgetChanges {
  readonly upserts: readonly BudgetItem[];
  /** Keys (`<pk>|<sk>`) of items that left the shard (seen missing at a full reload). */
  readonly removals: readonly string[];
}

/** What the pacer needs of a shard's budgets (ShardBudgets). */
export interface BudgetsRefresh {
  /** Brings the budgets up to date; throws when the source cannot be read (the old view stays). */
  refresh(): Promise<RefreshOutcome>;
  /** True once anything was loaded. */
  readonly loaded: boolean;
  /** Changes whenever the set of budgets changes (derived caches key on it). */
  readonly generation: number;
  campaigns(): readonly CampaignBudgets[];
  /** Every cached item (a full snapshot). */
  exportItems(): BudgetItem[];
  /** Loads a snapshot taken at `takenAtMs` (a cold process warming up without DynamoDB). */
  importItems(items: readonly BudgetItem[], takenAtMs: number): void;
  /** Changes since the previous call. */
  drainChanges(): BudgetChanges;
}

/** Key of an item in the cache and the snapshot: `<pk>|<sk>`. */
export function budgetItemKey(i: Pick<BudgetItem, 'pk' | 'sk'>): string {
  return `${i.pk}|${i.sk}`;
}

/** The cached budgets of one pacer shard. */
export class ShardBudgets implements BudgetsRefresh {
  private items = new Map<string, BudgetItem>();
  /** Campaign ids by account id, and campaign/arm plan items by campaign id (for O(1) rebuilds). */
  private byAccount = new Map<string, Set<string>>();
  private plansByCampaign = new Map<string, Map<string, BudgetItem>>();
  private readonly derived = new Map<string, CampaignBudgets>();
  private view: CampaignBudgets[] = [];
  private viewStale = true;
  private watermark = Number.NEGATIVE_INFINITY;
  private lastFullMs = Number.NEGATIVE_INFINITY;
  private readonly fullReloadMs: number;
  private readonly overlapMs: number;
  /** Bumped whenever the set of budgets changes (callers key derived caches on it). */
  generation = 0;
  private changed = new Map<string, BudgetItem>();
  private removed = new Set<string>();

  constructor(private readonly options: ShardBudgetsOptions) {
    this.fullReloadMs = options.fullReloadMs ?? 300_000;
    this.overlapMs = options.overlapMs ?? 60_000;
  }

  /** True once a full load (from DynamoDB or a snapshot) has happened. */
  get loaded(): boolean {
    return this.lastFullMs > Number.NEGATIVE_INFINITY;
  }

  /** Number of cached items. */
  get size(): number {
    return this.items.size;
  }

  /**
   * Brings the cache up to date: a full reload when due, else an incremental query. Throws what
   * the source throws (the cache is then unchanged and keeps serving).
   */
  async refresh(): Promise<RefreshOutcome> {
    const now = this.options.clock.now();
    if (!this.loaded || now - this.lastFullMs >= this.fullReloadMs) {
      const all: BudgetItem[] = [];
      let start: Record<string, unknown> | undefined;
      do {
        const page = await this.options.source(0, start);
        for (const item of page.items) all.push(item);
        start = page.next;
      } while (start);
      const changed = this.replaceAll(all);
      this.lastFullMs = now;
      return { kind: 'full', read: all.length, applied: all.length, campaignsChanged: changed };
    }
    const since = this.watermark - this.overlapMs;
    let read = 0;
    let applied = 0;
    const dirty = new Set<string>();
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.options.source(Number.isFinite(since) ? since : 0, start);
      read += page.items.length;
      for (const item of page.items) if (this.apply(item, dirty)) applied++;
      start = page.next;
    } while (start);
    this.rebuild(dirty);
    return { kind: 'incremental', read, applied, campaignsChanged: dirty.size };
  }

  /** Every campaign of the shard whose account is known, with its plans. */
  campaigns(): readonly CampaignBudgets[] {
    if (this.viewStale) {
      this.view = [...this.derived.values()];
      this.viewStale = false;
    }
    return this.view;
  }

  /** One campaign's budgets, or undefined. */
  campaign(campaignId: string): CampaignBudgets | undefined {
    return this.derived.get(campaignId);
  }

  /** The raw cached items (for a snapshot another process can import). */
  exportItems(): BudgetItem[] {
    return [...this.items.values()];
  }

  /**
   * Replaces the cache with a snapshot's items (a fresh process warming up without DynamoDB).
   * Counts as a full load taken at `takenAtMs`, so the next full reload from DynamoDB happens
   * `fullReloadMs` after the snapshot was taken.
   */
  importItems(items: readonly BudgetItem[], takenAtMs: number): void {
    this.replaceAll(items);
    this.lastFullMs = takenAtMs;
  }

  drainChanges(): BudgetChanges {
    const out = { upserts: [...this.changed.values()], removals: [...this.removed] };
    this.changed = new Map();
    this.removed = new Set();
    return out;
  }

  private replaceAll(all: readonly BudgetItem[]): number {
    const before = this.items;
    const present = new Set(all.map(itemKey));
    for (const key of before.keys()) {
      if (!present.has(key)) {
        this.removed.add(key);
        this.changed.delete(key);
      }
    }
    this.items = new Map();
    this.byAccount = new Map();
    this.plansByCampaign = new Map();
    this.watermark = Number.NEGATIVE_INFINITY;
    const dirty = new Set<string>(this.derived.keys());
    const pending = new Set(this.changed.keys());
    for (const item of all) {
      const key = itemKey(item);
      const held = before.get(key);
      this.apply(item, dirty);
      // Unchanged by the reload (and not already waiting to be mirrored): nothing to mirror.
      if (held && held.version === item.version && held.updatedAt === item.updatedAt && !pending.has(key))
        this.changed.delete(key);
    }
    this.rebuild(dirty);
    return dirty.size;
  }

  /** Applies an item if it is new or newer; records the campaigns it affects. */
  private apply(item: BudgetItem, dirty: Set<string>): boolean {
    if (item.updatedAt > this.watermark) this.watermark = item.updatedAt;
    const key = itemKey(item);
    const held = this.items.get(key);
    if (held && held.version > item.version) return false;
    if (held && held.version === item.version && held.updatedAt >= item.updatedAt) return false;
    this.items.set(key, item);
    this.changed.set(key, item);
    this.removed.delete(key);
    const accountId = String(item.accountId);
    if (item.type === 'campaign') {
      const campaignId = String(item.campaignId);
      const before = held?.accountId === undefined ? undefined : String(held.accountId);
      if (before !== undefined && before !== accountId) this.byAccount.get(before)?.delete(campaignId);
      const set = this.byAccount.get(accountId) ?? new Set<string>();
      this.byAccount.set(accountId, set);
      set.add(campaignId);
      dirty.add(campaignId);
    } else if (item.type === 'plan' && item.level !== 'account') {
      const campaignId = String(item.campaignId);
      const plans = this.plansByCampaign.get(campaignId) ?? new Map<string, BudgetItem>();
      this.plansByCampaign.set(campaignId, plans);
      plans.set(item.sk, item);
      dirty.add(campaignId);
    } else {
      // An account or account-plan change affects every campaign of the account.
      for (const c of this.byAccount.get(accountId) ?? []) dirty.add(c);
    }
    return true;
  }

  private rebuild(dirty: ReadonlySet<string>): void {
    if (dirty.size === 0) return;
    for (const campaignId of dirty) {
      const budgets = this.build(campaignId);
      if (budgets) this.derived.set(campaignId, budgets);
      else this.derived.delete(campaignId);
    }
    this.viewStale = true;
    this.generation++;
  }

  private build(campaignId: string): CampaignBudgets | undefined {
    const campaignItem = this.items.get(`CAMPAIGN#${campaignId}|CAMPAIGN`);
    if (!campaignItem) return undefined;
    const campaign = model<Campaign>(campaignItem);
    const accountItem = this.items.get(`ACCOUNT#${campaign.accountId}|ACCOUNT`);
    if (!accountItem) return undefined;
    const plans: BudgetPlan[] = [];
    const accountPlan = this.items.get(`ACCOUNT#${campaign.accountId}|PLAN#account`);
    if (accountPlan) plans.push(model<BudgetPlan>(accountPlan));
    for (const item of this.plansByCampaign.get(campaignId)?.values() ?? []) {
      plans.push(model<BudgetPlan>(item));
    }
    return campaignBudgets(model<Account>(accountItem), campaign, plans);
  }
}
