/**
 * Strict multi-region budgets (docs/pacing.md, "Many regions"): the pure allocation rule. Shares
 * (`shares.ts`) stay the soft split every region's controller aims at; **allocations** are the
 * hard cap each region's guards enforce (the lease script grants only while committed + grant ≤
 * min(E, a) and now ≤ ae, docs/spend.md). No I/O: the adapters are `allocation-authority.ts`
 * (home side), `region-allocations.ts` (region side) and `region-spend-items.ts` (the items), so
 * an in-memory replicated table can drive the same code (the simulator).
 *
 * Per plan-day with budget B, one **home** region keeps the authority entry (one writer):
 *   g_r  cumulative micros granted to region r      x_r  cumulative micros reclaimed from r
 *   rb_r the release counter the last reclaim of r accounted      ack_r  r may spend until then
 *   rs_r the release counter this authority has accounted (never goes back, a rehome keeps it)
 * Each region reports in its mailbox: rel_r (cumulative released), want_r, the g/x it applied
 * (seenG, seenX), the ack it holds and the (home, fence) it follows.
 *
 *   home view   a_r = g_r − x_r − rel_r        (rel_r lags, so a_r ≥ what r may really hold)
 *   invariant   Σ_r a_r ≤ B                     (a cut below Σ a_r grants nothing until releases)
 *   region cap  a = g^seen − rel − x^seen       (in Redis: ag − ar − ax; the lease script reads `a`)
 *
 * A reclaim sets a_r to what r provably spent (x_r += a_r − confirmed_r) once r cannot spend any
 * more (its ack expired more than skew + lease-ahead + T + replication margin ago). Releases r made
 * that no authority had seen are then void: the home records rb_r = the release counter it used
 * (at least rs_r: every release any authority regranted), counts any older report of r as rb_r,
 * and r, applying the reclaim, restarts its counter at rb_r (`syncAllocation`: (x, rel) compared
 * as a pair).
 */

import type { AllocationFields } from '../types.js';
import {
  type AllocationConfig,
  defaultAllocation,
  floorOf,
  keepOf,
  reclaimDelayMs,
} from './allocation-config.js';

export type { AllocationFields } from '../types.js';

/** The authority entry of one plan-day (written by its home only). Maps are by region. */
export interface AuthorityEntry {
  readonly fence: number;
  readonly g: Readonly<Record<string, number>>;
  readonly x: Readonly<Record<string, number>>;
  readonly rb: Readonly<Record<string, number>>;
  readonly ack: Readonly<Record<string, number>>;
  /** The release counter accounted (in the epoch of x). */
  readonly rs: Readonly<Record<string, number>>;
  /** When the entry was written (its item's writer clock), once read back from the table. */
  readonly writtenAtMs?: number;
}

/** What a region reported for one plan-day (its mailbox, written with its spend summary). */
export interface MailboxEntry {
  /** Committed spend (confirmed + in flight + leased) at the report. */
  readonly spent: number;
  /** Cumulative micros released (the region's `ar`). */
  readonly rel: number;
  /** The allocation total it asks for. */
  readonly want: number;
  /** The cumulative grant and reclaim it applied (`ag`, `ax`). */
  readonly seenG: number;
  readonly seenX: number;
  /** The instant until which it may grant (`ae`). */
  readonly ae: number;
  /** The home and fence it follows. */
  readonly home: string;
  readonly fence: number;
  /** When the report was written (the writer's clock). */
  readonly atMs: number;
}

const num = (m: Readonly<Record<string, number>>, r: string) => m[r] ?? 0;

/**
 * The release counter the home counts for r: a report made before r applied the last reclaim
 * (seenX < x_r) counts as the counter that reclaim accounted (rb_r): releases it holds beyond
 * that were reclaimed already.
 */
export function relEffective(entry: AuthorityEntry, region: string, mailbox?: MailboxEntry): number {
  const rb = num(entry.rb, region);
  // What this authority (or its predecessor) accounted never goes back: a newer home's replica
  // may hold an older report than the one a release was regranted from.
  const accounted = Math.max(rb, num(entry.rs, region));
  if (!mailbox) return accounted;
  if (mailbox.seenX < num(entry.x, region)) return Math.max(accounted, Math.min(mailbox.rel, rb));
  return Math.max(accounted, mailbox.rel);
}

/** The home's view of r's allocation: g − x − rel (never below 0). */
export function allocatedOf(entry: AuthorityEntry, region: string, mailbox?: MailboxEntry): number {
  return Math.max(0, num(entry.g, region) - num(entry.x, region) - relEffective(entry, region, mailbox));
}

/** Whether r is provably not spending at `nowMs` (its ack expired long enough ago). */
export function reclaimDue(
  entry: AuthorityEntry,
  region: string,
  nowMs: number,
  config: AllocationConfig,
): boolean {
  return nowMs > num(entry.ack, region) + reclaimDelayMs(config);
}

/** Inputs of {@link authorityStep} for one plan-day whose home is this region. */
export interface AuthorityInput {
  readonly nowMs: number;
  readonly budgetMicros: number;
  /** This region (the plan's home). */
  readonly home: string;
  /** The plan's fence (its entry must carry it) and settle instant after a rehome. */
  readonly fence: number;
  readonly settleUntilMs: number;
  /** This home's entry for the plan-day, if any (of any fence: another fence is ignored). */
  readonly current?: AuthorityEntry;
  /** Entries of other homes or fences (a rehome starts from the best of them). */
  readonly prior: readonly AuthorityEntry[];
  /** Every region's last report (as replicated here). */
  readonly mailboxes: ReadonlyMap<string, MailboxEntry>;
  /**
   * What each region due for a reclaim provably spent (the replicated ledger's confirmed spend of
   * the region, or more); a due region without a figure is not reclaimed this tick.
   */
  readonly confirmed?: ReadonlyMap<string, number>;
}

/** What {@link authorityStep} decided. */
export interface AuthorityDecision {
  readonly entry: AuthorityEntry;
  readonly granted: Readonly<Record<string, number>>;
  readonly reclaimed: Readonly<Record<string, number>>;
  /** Regions whose reclaim is due and need a confirmed figure. */
  readonly reclaimable: readonly string[];
  /** Σ a_r after the step (home view). */
  readonly allocatedMicros: number;
  /** The entry was created this step (first tick or after a rehome). */
  readonly created: boolean;
}

/** The first entry of a fence: every region at its floor, acked for a lease from now. */
function initialEntry(input: AuthorityInput, config: AllocationConfig): AuthorityEntry {
  const g: Record<string, number> = {};
  const x: Record<string, number> = {};
  const rb: Record<string, number> = {};
  const ack: Record<string, number> = {};
  const rs: Record<string, number> = {};
  const regions = new Set([...config.regions, ...input.mailboxes.keys()]);
  for (const e of input.prior) for (const r of Object.keys(e.g)) regions.add(r);
  for (const r of regions) {
    // A region may have applied its floor before seeing any entry: never start below it.
    g[r] = floorOf(input.budgetMicros, r, config);
    x[r] = 0;
    rb[r] = 0;
    rs[r] = 0;
    ack[r] = input.prior.length === 0 ? input.nowMs + config.ackLeaseMs : 0;
  }
  return { fence: input.fence, g, x, rb, ack, rs };
}

/**
 * A rehome's new home: everything the previous authority did (its latest entry as it replicates
 * here; final once that home saw the new fence, by the settle time) and every lease a region
 * reports holding. Only the
 * latest authority (highest fence) counts for grants and reclaims: it accounted every grant of
 * the older ones that regions applied, and an older entry's grants it superseded were never
 * applied and must not come back.
 */
function mergePrevious(
  entry: {
    g: Record<string, number>;
    x: Record<string, number>;
    rb: Record<string, number>;
    ack: Record<string, number>;
    rs: Record<string, number>;
  },
  input: AuthorityInput,
  config: AllocationConfig,
): void {
  // A predecessor that saw the new fence stopped by the settle time: what it wrote later is a
  // stale home still writing (cut off), never adopted — else its grants would reach every region.
  const prior = input.prior.filter(
    (e) => e.writtenAtMs === undefined || e.writtenAtMs <= input.settleUntilMs,
  );
  let latest = -1;
  for (const e of prior) if (e.fence < input.fence) latest = Math.max(latest, e.fence);
  const regions = new Set([...Object.keys(entry.g), ...input.mailboxes.keys()]);
  for (const e of prior) for (const r of Object.keys(e.g)) regions.add(r);
  for (const r of regions) {
    let ackr = num(entry.ack, r);
    // Older leases are honoured (a longer ack only delays a reclaim).
    for (const e of prior) ackr = Math.max(ackr, num(e.ack, r));
    for (const e of prior) {
      if (e.fence !== latest) continue;
      entry.g[r] = Math.max(num(entry.g, r), num(e.g, r));
      const ex = num(e.x, r);
      if (ex > num(entry.x, r) || (ex === num(entry.x, r) && num(e.rb, r) > num(entry.rb, r))) {
        entry.x[r] = ex;
        entry.rb[r] = num(e.rb, r);
        entry.rs[r] = num(e.rb, r);
      }
      if (ex === num(entry.x, r)) entry.rs[r] = Math.max(num(entry.rs, r), num(e.rs, r));
    }
    // Honour the lease the region holds, whoever granted it.
    const mb = input.mailboxes.get(r);
    if (mb && mb.ae > 0) ackr = Math.max(ackr, mb.ae + config.skewMarginMs);
    entry.ack[r] = ackr === 0 ? input.nowMs + config.ackLeaseMs : ackr;
  }
}

/**
 * One home tick for one plan-day (module comment): keep g_r ≥ what r applied, renew the acks of
 * regions that reported recently, reclaim from regions provably not spending, then grant what
 * regions want from B − Σ a_r (in proportion to need when it does not fit). During a rehome's
 * settle time it only gathers what the previous authority did and the leases regions hold: no
 * grant, no reclaim, no renewed ack. Pure.
 */
export function authorityStep(input: AuthorityInput, config: AllocationConfig): AuthorityDecision {
  const { nowMs } = input;
  const budget = Math.max(0, input.budgetMicros);
  const current = input.current?.fence === input.fence ? input.current : undefined;
  const base = current ?? initialEntry(input, config);
  const g = { ...base.g };
  const x = { ...base.x };
  const rb = { ...base.rb };
  const ack = { ...base.ack };
  const rs = { ...base.rs };
  const settled = nowMs >= input.settleUntilMs;
  // Every step, not only while settling: a home that was down during its settle time would
  // otherwise miss the predecessor's final entry (a reclaim it regranted, grants regions applied).
  if (input.prior.length > 0) mergePrevious({ g, x, rb, ack, rs }, input, config);
  const regions = new Set([...config.regions, ...Object.keys(g), ...input.mailboxes.keys()]);
  for (const r of regions) {
    const mb = input.mailboxes.get(r);
    if (mb) {
      // Never below what the region applied (a rehome's predecessor may have granted more than
      // the prior entries show); a newer reclaim epoch the region applied is adopted as it is.
      g[r] = Math.max(num(g, r), mb.seenG);
      if (mb.seenX > num(x, r)) {
        x[r] = mb.seenX;
        rb[r] = mb.rel;
        rs[r] = mb.rel;
      }
      // No renewal before a rehome settled: the predecessor may have reclaimed the region (its
      // lease had expired), and a renewed lease without that reclaim would revive what it regranted.
      if (settled && nowMs - mb.atMs <= config.ackFreshMs)
        ack[r] = Math.max(num(ack, r), nowMs + config.ackLeaseMs);
    }
    g[r] = num(g, r);
    x[r] = num(x, r);
    rb[r] = num(rb, r);
    ack[r] = num(ack, r);
    rs[r] = num(rs, r);
  }
  const entry = (): AuthorityEntry => ({ fence: input.fence, g, x, rb, ack, rs });
  // The release counter accounted from now on (the basis of every grant below).
  for (const r of regions) rs[r] = relEffective(entry(), r, input.mailboxes.get(r));
  const granted: Record<string, number> = {};
  const reclaimed: Record<string, number> = {};
  const reclaimable: string[] = [];
  if (settled) {
    for (const r of regions) {
      const e = entry();
      if (!reclaimDue(e, r, nowMs, config)) continue;
      const mb = input.mailboxes.get(r);
      const a = allocatedOf(e, r, mb);
      if (a <= (mb?.spent ?? 0)) continue; // nothing to take back beyond what it reported committed
      const c = input.confirmed?.get(r);
      if (c === undefined) {
        reclaimable.push(r);
        continue;
      }
      const provable = Math.max(c, mb?.spent ?? 0);
      if (a > provable) {
        const rel = relEffective(e, r, mb);
        x[r] = num(x, r) + (a - provable);
        rb[r] = rel;
        rs[r] = rel;
        reclaimed[r] = a - provable;
      }
    }
  }
  let allocated = 0;
  const views = new Map<string, number>();
  for (const r of regions) {
    // What a region reported committed counts even above its allocation (a win booked after its
    // in-flight amount expired, a rebuild): never hand it out again.
    const mb = input.mailboxes.get(r);
    const a = Math.max(allocatedOf(entry(), r, mb), mb?.spent ?? 0);
    views.set(r, a);
    allocated += a;
  }
  if (settled && allocated < budget) {
    const needs = new Map<string, number>();
    let total = 0;
    for (const r of regions) {
      const mb = input.mailboxes.get(r);
      // Only a region that follows this home and fence applies what it is granted, and only one
      // still acked spends it.
      if (!mb || mb.fence !== input.fence || mb.home !== input.home || num(ack, r) < nowMs) continue;
      const need = Math.max(0, Math.min(budget, mb.want) - (views.get(r) as number));
      if (need > 0) {
        needs.set(r, need);
        total += need;
      }
    }
    const free = budget - allocated;
    for (const [r, need] of needs) {
      const grant = total <= free ? need : Math.floor((free * need) / total);
      if (grant <= 0) continue;
      g[r] = num(g, r) + grant;
      granted[r] = grant;
      allocated += grant;
    }
  }
  return { entry: entry(), granted, reclaimed, reclaimable, allocatedMicros: allocated, created: !current };
}

/** A target of the allocation fields (the script merges it with what is stored). */
export interface AllocationTarget {
  readonly ag: number;
  readonly ax: number;
  readonly ar: number;
  readonly ae: number;
}

/**
 * The merge the allocation script applies (TypeScript twin of the Lua, for the in-memory table
 * and tests): ag and ae never go down, (ax, ar) is compared as a pair, a = ag − ar − ax. A writer
 * with an older view (a paused pacer) can therefore never raise the cap back above a release.
 */
export function syncAllocation(
  current: AllocationFields,
  target: AllocationTarget,
): Required<Omit<AllocationFields, 'ac' | 'aw'>> {
  const ag = Math.max(current.ag ?? 0, target.ag);
  let ax = current.ax ?? 0;
  let ar = current.ar ?? 0;
  if (target.ax > ax || (target.ax === ax && target.ar > ar)) {
    ax = target.ax;
    ar = target.ar;
  }
  const ae = Math.max(current.ae ?? 0, target.ae);
  return { ag, ar, ax, ae, a: ag - ar - ax };
}

/** Inputs of {@link regionStep} for one plan-day in one (cache) region. */
export interface RegionInput {
  readonly nowMs: number;
  readonly budgetMicros: number;
  readonly region: string;
  /** The authority entry of the plan's home and fence, once visible here. */
  readonly entry?: AuthorityEntry;
  /** This region's last report as the table holds it (restores a Redis that lost its fields). */
  readonly ownMailbox?: Pick<MailboxEntry, 'rel' | 'seenX' | 'seenG' | 'ae'>;
  /** The fields as the spend read returned them. */
  readonly fields: AllocationFields;
  /** Committed spend (confirmed + in flight + leased). */
  readonly spentMicros: number;
  /** Full-speed demand; undefined until measured. */
  readonly demandMicrosPerSec?: number;
  /** The region's published E(t) at now + horizon (what its controller lets it reach). */
  readonly expectedAtHorizonMicros: number;
  /** Start of the plan-day, and when the plan was created if later (the default ack's base). */
  readonly dayStartMs: number;
  readonly createdAtMs?: number;
}

/** What {@link regionStep} decided. */
export interface RegionDecision {
  readonly target: AllocationTarget;
  /** The merged fields differ from what was read: the script must write them. */
  readonly write: boolean;
  /** Lower the cap to max(this, committed now); undefined: keep it. */
  readonly lowerTo?: number;
  /** The allocation total to ask for. */
  readonly want: number;
  readonly headroom: number;
}

/**
 * One region tick for one plan-day: the cap from the authority entry (floor and default ack
 * before one is visible), the headroom it expects to need within the horizon — what its own
 * published curve lets it reach, at most its measured demand, at least its keep and at least the
 * float a guard asked for when the allocation last held it back within the horizon — and a
 * release when it holds more than headroom × (1 + hysteresis). Pure.
 */
export function regionStep(input: RegionInput, config: AllocationConfig): RegionDecision {
  const { region, entry, fields } = input;
  const budget = Math.max(0, input.budgetMicros);
  let target: AllocationTarget;
  if (entry) {
    target = {
      ag: num(entry.g, region),
      ax: num(entry.x, region),
      ar: num(entry.rb, region),
      ae: num(entry.ack, region) - config.skewMarginMs,
    };
  } else {
    const d = defaultAllocation(
      budget,
      region,
      config,
      { startMs: input.dayStartMs },
      input.createdAtMs,
      input.nowMs,
    );
    target = { ag: d.cap, ax: 0, ar: 0, ae: d.untilMs };
  }
  const own = input.ownMailbox;
  if (own) {
    // What this region reported it had applied is never lost with a Redis reset.
    target = { ...target, ag: Math.max(target.ag, own.seenG), ae: Math.max(target.ae, own.ae) };
    if (own.seenX > target.ax || (own.seenX === target.ax && own.rel > target.ar)) {
      target = { ...target, ax: own.seenX, ar: own.rel };
    }
  }
  const merged = syncAllocation(fields, target);
  const write =
    fields.ag !== merged.ag ||
    fields.ar !== merged.ar ||
    fields.ax !== merged.ax ||
    fields.ae !== merged.ae ||
    fields.a !== merged.a;
  const spent = Math.max(0, input.spentMicros);
  const paced = Math.max(0, input.expectedAtHorizonMicros - spent);
  const demand =
    input.demandMicrosPerSec === undefined
      ? Number.POSITIVE_INFINITY
      : Math.max(0, input.demandMicrosPerSec) * (config.horizonMs / 1000);
  // A guard the allocation held back within the horizon asked for a float (aw): the headroom lets
  // one such float through, else a small plan — whose pace over the horizon is below one float —
  // could never bid in this region however much of its budget is free.
  const heldWant =
    fields.ac !== undefined && fields.aw !== undefined && input.nowMs - fields.ac <= config.horizonMs
      ? fields.aw
      : 0;
  const headroom = Math.max(
    keepOf(budget, region, config),
    Math.floor(Math.min(paced, demand)),
    Math.min(heldWant, budget),
  );
  const want = Math.min(budget, spent + headroom);
  // Holding more than the headroom (plus hysteresis) above the spend, or above a cut budget —
  // not while its guards may still lease the floor without a stored cap (a reset then would let
  // them lease what was released).
  const defaultUntil = defaultAllocation(
    budget,
    region,
    config,
    { startMs: input.dayStartMs },
    input.createdAtMs,
    input.nowMs,
  ).untilMs;
  const lower = input.nowMs > defaultUntil && merged.a > want + headroom * config.hysteresis;
  return {
    target: { ag: merged.ag, ax: merged.ax, ar: merged.ar, ae: merged.ae },
    write,
    ...(lower ? { lowerTo: want } : {}),
    want,
    headroom,
  };
}
