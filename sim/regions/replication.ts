/**
 * The `region-spend` global table in the simulator: one in-memory replica per region
 * (`MemoryRegionSpendStore`, with the DynamoDB store's conditions), and replication between them
 * as DynamoDB global tables do it — a write lands in the writer's replica at once and in every
 * other replica `lag` later (the writer region's lag), whole item, in write order; deletes too.
 * A cut (`home-region-unreachable`) holds everything to and from a region until it ends, then
 * delivers it in order. Every item has one writer (a region's summary and mailbox, a home's
 * authority entries), so no replica ever receives two writers' images of one item.
 */

import type { RawItem, RegionSpendStore } from '../../shared/pacing/regions/region-spend-items.js';
import { MemoryRegionSpendStore } from '../../shared/pacing/regions/region-spend-store.js';
import type { Clock } from '../../shared/time/clock.js';

type Change =
  | { readonly kind: 'put'; readonly item: RawItem }
  | { readonly kind: 'delete'; readonly pk: string; readonly sk: string };

interface InFlight {
  readonly dueMs: number;
  readonly from: string;
  readonly to: string;
  readonly change: Change;
}

/** Options of {@link ReplicatedTable}. */
export interface ReplicatedTableOptions {
  readonly regions: readonly string[];
  /** How long a region's writes take to reach the others. */
  readonly lagMsOf: (region: string) => number;
  /** True while replication to and from `region` is cut at `atMs`. */
  readonly cutAt?: (region: string, atMs: number) => boolean;
  readonly clock: Clock;
}

/** The replicas and the link between them (module comment). */
export class ReplicatedTable {
  private readonly replicas = new Map<string, MemoryRegionSpendStore>();
  /** Changes on their way, in write order (a region's lag is constant: due times ascend per link). */
  private queue: InFlight[] = [];
  /** Items replicated (tests, the report). */
  delivered = 0;

  constructor(private readonly options: ReplicatedTableOptions) {
    for (const r of options.regions) this.replicas.set(r, new MemoryRegionSpendStore());
  }

  /** The table as `region`'s pacer sees it (its own replica). */
  store(region: string): RegionSpendStore {
    const replica = this.replicas.get(region);
    if (!replica) throw new Error(`No replica of region ${region}.`);
    return {
      query: (pk) => replica.query(pk),
      put: async (item, options) => {
        const ok = await replica.put(item, options);
        if (ok) this.send(region, { kind: 'put', item: { ...item } });
        return ok;
      },
      delete: async (pk, sk) => {
        await replica.delete(pk, sk);
        this.send(region, { kind: 'delete', pk, sk });
      },
    };
  }

  /** Applies every change due by `nowMs` whose link is not cut (a held change keeps its place). */
  deliver(nowMs: number): void {
    const cut = this.options.cutAt;
    const kept: InFlight[] = [];
    // Per link, changes apply in order: once one is held, the later ones of that link wait too.
    const blocked = new Set<string>();
    for (const c of this.queue) {
      const link = `${c.from}>${c.to}`;
      const held =
        c.dueMs > nowMs ||
        blocked.has(link) ||
        (cut !== undefined && (cut(c.from, nowMs) || cut(c.to, nowMs)));
      if (held) {
        blocked.add(link);
        kept.push(c);
        continue;
      }
      const replica = this.replicas.get(c.to) as MemoryRegionSpendStore;
      if (c.change.kind === 'put') replica.replicate(c.change.item);
      else void replica.delete(c.change.pk, c.change.sk);
      this.delivered++;
    }
    this.queue = kept;
  }

  private send(from: string, change: Change): void {
    const dueMs = this.options.clock.now() + this.options.lagMsOf(from);
    for (const to of this.replicas.keys()) if (to !== from) this.queue.push({ dueMs, from, to, change });
  }
}
