/**
 * The home side of strict allocations (docs/pacing.md, "Many regions"): every tick, the pacer
 * instance holding a shard's lease in a region runs {@link authorityStep} for every plan-day of
 * the shard whose home is this region — as its own replica of the budgets table says, so a home
 * whose fence was moved (rehome) stops allocating — from the mailboxes the regions wrote into the
 * `region-spend` global table, and writes the authority items (sk `alloc#<home>[#part]`),
 * conditional on the tick increasing and its lease epoch not being below the stored item's.
 *
 * Reclaiming a lost region's allocation needs what it provably spent: its confirmed spend in the
 * replicated ledger (`confirmedOf`), asked once per plan-day, region and ack once the reclaim is
 * due. Regions reach the authority only through the replicated table: no synchronous
 * cross-region call on a tick's path.
 */
import { type CampaignBudgets, planOnDay, type ResolvedPlan } from '../../budget/model.js';
import { type DayWindow, dayWindow } from '../../budget/time-zone.js';
import { planField } from '../keys.js';
import { plansOfCampaign } from '../pacer.js';
import { type AllocationConfig, fenceOf, homeOf } from './allocation-config.js';
import { type AuthorityEntry, authorityStep, type MailboxEntry } from './allocations.js';
import { partSk, type RegionSpendStore, type RegionSpendView, splitParts } from './region-spend-items.js';

/** Options of {@link AllocationAuthority}. */
export interface AllocationAuthorityOptions {
  readonly store: RegionSpendStore;
  /** This region: the home it allocates as. */
  readonly region: string;
  /** The shard's pk (`<N>:<shard>`). */
  readonly pk: string;
  readonly config: AllocationConfig;
  /** The shard's budgets (the own pacer's cache: refreshed every tick). */
  readonly budgets: { campaigns(): readonly CampaignBudgets[] };
  /**
   * What `region` confirmed of a plan-day, from the replicated ledger (its entries only). Absent:
   * nothing is reclaimed (a lost region's allocation stays reserved).
   */
  readonly confirmedOf?: (region: string, plan: ResolvedPlan, day: string) => Promise<number>;
}

/** What one authority tick did. */
export interface AuthorityTickOutcome {
  /** Plan-days this region is home of. */
  readonly plans: number;
  /** Every part written (false: refused by a newer tick or epoch, or failed). */
  readonly written: boolean;
  readonly grantedMicros: number;
  readonly reclaimedMicros: number;
  /** Reclaims made, for logs and tests. */
  readonly reclaims: readonly { readonly key: string; readonly region: string; readonly micros: number }[];
  readonly error?: string;
}

interface HomePlanDay {
  readonly key: string;
  readonly plan: ResolvedPlan;
  readonly day: DayWindow;
}

/** The home step of one shard in one region (module comment). */
export class AllocationAuthority {
  /** Confirmed figures asked for, by `key|region|ack` (one ledger read per lost region and ack). */
  private readonly confirmed = new Map<string, number>();

  constructor(private readonly options: AllocationAuthorityOptions) {}

  /** One tick, as lease holder `writer` with lease `epoch`. Never throws. */
  async step(input: {
    readonly nowMs: number;
    readonly tick: number;
    readonly view: RegionSpendView;
    readonly epoch: number;
    readonly writer: string;
  }): Promise<AuthorityTickOutcome> {
    const { config, region } = this.options;
    const { nowMs, view } = input;
    const mine = this.homePlanDays(nowMs);
    const entries: [string, AuthorityEntry][] = [];
    const reclaims: { key: string; region: string; micros: number }[] = [];
    let granted = 0;
    let reclaimed = 0;
    let error: string | undefined;
    for (const p of mine) {
      const fence = fenceOf(p.plan);
      const current = view.authorities.get(region)?.plans.get(p.key);
      const prior: AuthorityEntry[] = [];
      for (const [home, record] of view.authorities) {
        const e = record.plans.get(p.key);
        if (e && (home !== region || e.fence !== fence)) prior.push(e);
      }
      const mailboxes = new Map<string, MailboxEntry>();
      for (const [r, record] of view.regions) {
        const mb = record.plans.get(p.key)?.mailbox;
        if (mb) mailboxes.set(r, mb);
      }
      const base = {
        nowMs,
        budgetMicros: p.plan.dailyBudgetMicros,
        home: region,
        fence,
        settleUntilMs: p.plan.allocSettleUntil ?? 0,
        ...(current ? { current } : {}),
        prior,
        mailboxes,
      };
      let decision = authorityStep(base, config);
      if (decision.reclaimable.length > 0 && this.options.confirmedOf) {
        const confirmed = new Map<string, number>();
        for (const r of decision.reclaimable) {
          const memo = `${p.key}|${r}|${decision.entry.ack[r] ?? 0}`;
          let c = this.confirmed.get(memo);
          if (c === undefined) {
            try {
              c = await this.options.confirmedOf(r, p.plan, p.day.day);
              this.confirmed.set(memo, c);
            } catch (e) {
              error ??= `ledger read for the reclaim of ${r}: ${(e as Error).message}`;
              continue;
            }
          }
          confirmed.set(r, c);
        }
        if (confirmed.size > 0) decision = authorityStep({ ...base, confirmed }, config);
      }
      for (const v of Object.values(decision.granted)) granted += v;
      for (const [r, v] of Object.entries(decision.reclaimed)) {
        reclaimed += v;
        reclaims.push({ key: p.key, region: r, micros: v });
      }
      entries.push([p.key, decision.entry]);
    }
    let written = true;
    try {
      written = await this.write(entries, input);
    } catch (e) {
      written = false;
      error ??= (e as Error).message;
    }
    if (this.confirmed.size > 4 * mine.length + 64) this.confirmed.clear();
    return {
      plans: mine.length,
      written,
      grantedMicros: granted,
      reclaimedMicros: reclaimed,
      reclaims,
      ...(error ? { error } : {}),
    };
  }

  /** The shard's plan-days whose home is this region (active campaigns, as the pacer paces). */
  private homePlanDays(nowMs: number): HomePlanDay[] {
    const out: HomePlanDay[] = [];
    const seen = new Set<string>();
    for (const b of this.options.budgets.campaigns()) {
      if (b.campaign.status !== 'active') continue;
      for (const plan of plansOfCampaign(b)) {
        const field = planField(plan);
        if (seen.has(field)) continue;
        seen.add(field);
        if (homeOf(plan, this.options.config) !== this.options.region) continue;
        const day = dayWindow(nowMs, plan.timeZone);
        out.push({ key: `${field}|${day.day}`, plan: planOnDay(plan, day.day), day });
      }
    }
    return out;
  }

  /** Writes the entries in parts; false when a part was refused (a newer tick or epoch). */
  private async write(
    entries: readonly [string, AuthorityEntry][],
    input: { readonly nowMs: number; readonly tick: number; readonly epoch: number; readonly writer: string },
  ): Promise<boolean> {
    if (entries.length === 0) return true;
    const regionSet = new Set<string>(this.options.config.regions);
    for (const [, e] of entries) for (const r of Object.keys(e.g)) regionSet.add(r);
    const regions = [...regionSet];
    const json = entries.map(([key, e]) => {
      const col = (m: Readonly<Record<string, number>>) => regions.map((r) => m[r] ?? 0);
      return `${JSON.stringify(key)}:${JSON.stringify([e.fence, col(e.g), col(e.x), col(e.rb), col(e.ack), col(e.rs)])}`;
    });
    const parts = splitParts(entries.map(([key], i) => [key, (json[i] as string).length] as const));
    const base = `alloc#${this.options.region}`;
    const results = await Promise.all(
      parts.map((indexes, part) =>
        this.options.store.put(
          {
            pk: this.options.pk,
            sk: partSk(base, part, parts.length),
            regions,
            plans: `{${indexes.map((i) => json[i]).join(',')}}`,
            tick: input.tick,
            atMs: input.nowMs,
            epoch: input.epoch,
            writer: input.writer,
            parts: parts.length,
          },
          { epoch: input.epoch },
        ),
      ),
    );
    return results.every(Boolean);
  }
}
