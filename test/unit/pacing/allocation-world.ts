/**
 * An in-memory world of several regions running the pure allocation rule (shared/pacing/regions/
 * allocations.ts) against each other through lagged replicas: each region's allocation fields
 * (the Redis merge `syncAllocation`, lowering to max(target, committed)), its committed spend
 * (leases only within the cap, while its ack lasts), its mailbox, the home's authority entries and
 * the plan's (home, fence) as each region's replica of the budgets table shows them — every read
 * of another region's write lagging by a random delay up to `maxLagMs`, never going back.
 *
 * Faults: a region killed (it stops spending and writing) and revived, a Redis reset (allocation
 * fields lost), a budget cut, a rehome. The invariant checked after every step: what all regions
 * can ever spend — a live region's max(cap, committed) while it may lease, else its committed —
 * stays within the budget (or, after a cut, within what was committed or allocated at the cut).
 */
import { type AllocationConfig, allocationConfig } from '../../../shared/pacing/regions/allocation-config.js';
import {
  type AuthorityEntry,
  authorityStep,
  type MailboxEntry,
  regionStep,
  syncAllocation,
} from '../../../shared/pacing/regions/allocations.js';
import type { AllocationFields } from '../../../shared/pacing/types.js';
import type { Random } from '../../../shared/random/prng.js';

const TICK = 10_000;

/** Versions of one item as written, read by others with lag. */
class Replicated<T> {
  private readonly versions: { atMs: number; value: T }[] = [];
  private readonly seen = new Map<string, number>();

  write(atMs: number, value: T): void {
    this.versions.push({ atMs, value });
  }

  /** Writes after this instant do not replicate (a partition), until it is cleared. */
  cutoffMs = Number.POSITIVE_INFINITY;

  /** The newest version written ≥ lag ago (never older than this reader's previous read). */
  read(reader: string, nowMs: number, lagMs: number): T | undefined {
    let i = this.versions.length - 1;
    const until = Math.min(nowMs - lagMs, this.cutoffMs);
    while (i >= 0 && (this.versions[i] as { atMs: number }).atMs > until) i--;
    const last = this.seen.get(reader) ?? -1;
    if (i < last) i = last;
    if (i < 0) return undefined;
    this.seen.set(reader, i);
    return (this.versions[i] as { value: T }).value;
  }

  latest(): T | undefined {
    return this.versions.at(-1)?.value;
  }
}

interface PlanView {
  readonly home: string;
  readonly fence: number;
  readonly settle: number;
}

interface RegionState {
  readonly name: string;
  alive: boolean;
  reviveAt: number;
  fields: AllocationFields;
  /** Committed spend: confirmed (the ledger) + pending (floats and bids not resolved yet). */
  committed: number;
  confirmed: number;
  /** Leased amounts resolving at `at` (a win with probability `winRate`, else released). */
  pending: { at: number; micros: number }[];
  winRate: number;
  /** The region's mailbox does not replicate until then (a partition; it keeps running). */
  partitionedUntil: number;
  /** False after a Redis reset until its guards lease again (committed unknown to a lowering). */
  initialised: boolean;
  /** Demand, micros per second; measured after two ticks. */
  demand: number;
  readonly mailbox: Replicated<MailboxEntry>;
  readonly authority: Replicated<AuthorityEntry>;
}

/** What a run measured. */
export interface WorldOutcome {
  readonly violations: string[];
  readonly grants: number;
  readonly reclaims: number;
  readonly releases: number;
  readonly rehomes: number;
  readonly cuts: number;
  readonly spent: number;
  readonly bound: number;
}

/** One random world of `ticks` ticks. */
export function runWorld(random: Random, ticks: number): WorldOutcome {
  const n = 2 + Math.floor(random() * 3);
  const names = Array.from({ length: n }, (_, i) => `r${i}`);
  const maxLagMs = Math.floor(random() * 25_000);
  const T = 30_000;
  const leaseAhead = 20_000;
  const config: AllocationConfig = allocationConfig(names, {
    inFlightTtlMs: T,
    maxLeaseAheadMs: leaseAhead,
    replicationMarginMs: maxLagMs,
    ackLeaseMs: 120_000,
    ackFreshMs: 60_000,
    skewMarginMs: 2_000,
    horizonMs: 60_000,
  });
  let budget = 1_000_000 + Math.floor(random() * 100_000_000);
  let bound = budget;
  const F = Math.max(1_000, Math.floor(budget / 500));
  const regions = names.map(
    (name): RegionState => ({
      name,
      alive: true,
      reviveAt: 0,
      fields: {},
      committed: 0,
      confirmed: 0,
      pending: [],
      winRate: random() < 0.5 ? 1 : random(),
      partitionedUntil: 0,
      initialised: true,
      demand: random() * (budget / 300),
      mailbox: new Replicated(),
      authority: new Replicated(),
    }),
  );
  const plan = new Replicated<PlanView>();
  plan.write(Number.NEGATIVE_INFINITY, { home: names[0] as string, fence: 0, settle: 0 });
  const lag = () => Math.floor(random() * (maxLagMs + 1));
  const byName = new Map(regions.map((r) => [r.name, r]));
  const out = { violations: [] as string[], grants: 0, reclaims: 0, releases: 0, rehomes: 0, cuts: 0 };
  const dayStart = 0;
  /** Σ a_r of each home's latest step. */
  const allocatedBy = new Map<string, number>();
  for (let t = 0; t < ticks; t++) {
    const now = (t + 1) * TICK;
    faults(random, regions, now, t);
    for (const r of regions) {
      // Floats and bids resolve within lease-ahead + T of their lease: a win is confirmed spend.
      r.pending = r.pending.filter((p) => {
        if (p.at > now) return true;
        if (random() < r.winRate) r.confirmed += p.micros;
        return false;
      });
      r.committed = r.confirmed + r.pending.reduce((a, p) => a + p.micros, 0);
      r.mailbox.cutoffMs = now < r.partitionedUntil ? r.mailbox.cutoffMs : Number.POSITIVE_INFINITY;
    }
    if (random() < 0.01) {
      const next = Math.floor(budget * (0.3 + 0.7 * random()));
      // Grants made before the cut may still be applied after it: the bound is what the homes had
      // allocated (Σ a_r, which covers every region's cap) or what regions could reach then.
      bound = Math.max(next, effectiveTotal(regions, now), ...allocatedBy.values());
      budget = next;
      out.cuts++;
    }
    if (random() < 0.01) {
      const current = plan.latest() as PlanView;
      const candidates = regions.filter((r) => r.alive && r.name !== current.home);
      const to = candidates[Math.floor(random() * candidates.length)];
      if (to && now >= current.settle) {
        plan.write(now, { home: to.name, fence: current.fence + 1, settle: now + 2 * maxLagMs + 2 * TICK });
        out.rehomes++;
      }
    }
    // Spending between ticks: leases within the cap while the ack lasts.
    for (const r of regions) {
      if (!r.alive) continue;
      for (let want = r.demand * (TICK / 1000); want > 0; want -= F) {
        const g = Math.min(F, Math.ceil(want));
        const a = r.fields.a;
        if (a === undefined || now > (r.fields.ae ?? 0) || r.committed + g > a) break;
        r.committed += g;
        r.pending.push({ at: now + Math.floor(random() * (leaseAhead + T)), micros: g });
        r.initialised = true;
      }
    }
    // Region steps (the publishing pacer of each live region).
    for (const r of regions) {
      if (!r.alive) continue;
      const view = plan.read(r.name, now, lag()) as PlanView;
      const entry = byName.get(view.home)?.authority.read(r.name, now, lag());
      const d = regionStep(
        {
          nowMs: now,
          budgetMicros: budget,
          region: r.name,
          ...(entry && entry.fence === view.fence ? { entry } : {}),
          ...(r.mailbox.latest() ? { ownMailbox: r.mailbox.latest() as MailboxEntry } : {}),
          fields: r.fields,
          spentMicros: r.committed,
          ...(t >= 2 ? { demandMicrosPerSec: r.demand } : {}),
          expectedAtHorizonMicros: random() < 0.5 ? budget : r.committed + r.demand * 60,
          dayStartMs: dayStart,
        },
        config,
      );
      let f = syncAllocation(r.fields, d.target);
      if (d.lowerTo !== undefined && r.initialised) {
        const target = Math.max(d.lowerTo, r.committed);
        if (f.a > target) {
          f = { ...f, ar: f.ar + (f.a - target), a: target };
          out.releases++;
        }
      }
      r.fields = f;
      r.mailbox.write(now, {
        spent: r.committed,
        rel: f.ar,
        want: d.want,
        seenG: f.ag,
        seenX: f.ax,
        ae: f.ae,
        home: view.home,
        fence: view.fence,
        atMs: now,
      });
    }
    // Home steps: a live region that its own replica names home.
    for (const h of regions) {
      if (!h.alive) continue;
      const view = plan.read(`${h.name}:home`, now, lag()) as PlanView;
      if (view.home !== h.name) continue;
      const current = h.authority.latest();
      const prior: AuthorityEntry[] = [];
      for (const o of regions) {
        const e = o === h ? current : o.authority.read(`${h.name}:prior`, now, lag());
        if (e && (o !== h || e.fence !== view.fence)) prior.push(e);
      }
      const mailboxes = new Map<string, MailboxEntry>();
      for (const r of regions) {
        const mb = r === h ? r.mailbox.latest() : r.mailbox.read(`${h.name}:mb`, now, lag());
        if (mb) mailboxes.set(r.name, mb);
      }
      const input = {
        nowMs: now,
        budgetMicros: budget,
        home: h.name,
        fence: view.fence,
        settleUntilMs: view.settle,
        ...(current ? { current } : {}),
        prior,
        mailboxes,
      };
      let decision = authorityStep(input, config);
      if (decision.reclaimable.length > 0) {
        // The replicated ledger: what the lost region confirmed (replicated within the margin).
        const confirmed = new Map(
          decision.reclaimable.map((r) => [r, (byName.get(r) as RegionState).confirmed]),
        );
        decision = authorityStep({ ...input, confirmed }, config);
      }
      if ((globalThis as { DEBUG_WORLD?: boolean }).DEBUG_WORLD)
        console.log(
          `t${t} home ${h.name} f${view.fence} B=${budget} granted ${JSON.stringify(decision.granted)} reclaimed ${JSON.stringify(decision.reclaimed)} alloc ${decision.allocatedMicros} mb ${JSON.stringify([...mailboxes].map(([k, m]) => [k, m.rel, m.seenG, m.seenX, m.want, m.fence]))} entry g ${JSON.stringify(decision.entry.g)} x ${JSON.stringify(decision.entry.x)} rb ${JSON.stringify(decision.entry.rb)}`,
        );
      out.grants += Object.keys(decision.granted).length;
      out.reclaims += Object.keys(decision.reclaimed).length;
      h.authority.write(now, decision.entry);
      allocatedBy.set(h.name, decision.allocatedMicros);
    }
    const total = effectiveTotal(regions, now);
    if ((globalThis as { DEBUG_WORLD?: boolean }).DEBUG_WORLD)
      console.log(
        `t${t} total ${total} bound ${bound} ` +
          regions
            .map(
              (r) =>
                `${r.name} ${r.alive ? 'up' : 'down'} a=${r.fields.a} ag=${r.fields.ag} ar=${r.fields.ar} ax=${r.fields.ax} ae=${r.fields.ae} U=${r.committed}`,
            )
            .join('; '),
      );
    if (total > bound) {
      out.violations.push(
        `tick ${t}: regions can spend ${total} > ${bound} (budget ${budget}, lag ≤ ${maxLagMs} ms, ${n} regions): ` +
          regions
            .map(
              (r) =>
                `${r.name} ${r.alive ? 'up' : 'down'} a=${r.fields.a} ae=${r.fields.ae} U=${r.committed}`,
            )
            .join('; '),
      );
      break;
    }
  }
  return { ...out, spent: regions.reduce((s, r) => s + r.committed, 0), bound };
}

/** What every region can still reach: its cap while it may lease, else what it committed. */
function effectiveTotal(regions: readonly RegionState[], now: number): number {
  let total = 0;
  for (const r of regions) {
    const canLease = r.alive && r.fields.a !== undefined && now <= (r.fields.ae ?? 0);
    total += canLease ? Math.max(r.fields.a as number, r.committed) : r.committed;
  }
  return total;
}

/** Kills, revives, Redis resets and demand shifts. */
function faults(random: Random, regions: RegionState[], now: number, t: number): void {
  for (const r of regions) {
    if (!r.alive && now >= r.reviveAt) {
      r.alive = true;
      r.initialised = true;
    }
    if (r.alive && random() < 0.01 && regions.filter((q) => q.alive).length > 1) {
      r.alive = false;
      r.reviveAt = now + TICK * (5 + Math.floor(random() * 40));
    }
    if (r.alive && random() < 0.01) {
      r.fields = {};
      r.initialised = false;
    }
    if (r.alive && now >= r.partitionedUntil && random() < 0.005) {
      r.partitionedUntil = now + TICK * (5 + Math.floor(random() * 30));
      r.mailbox.cutoffMs = now;
    }
    if (t % 20 === 0 && random() < 0.3) r.demand = random() * 5_000;
  }
}
