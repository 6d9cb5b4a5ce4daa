/**
 * The budget guard for ad servers: `decide(bid)` answers "may this bid go out?" for every
 * budget plan that applies (account, campaign, experiment arm) without a Redis round trip per
 * bid — the rtbkit "slave banker" pattern:
 *
 * - each guard leases a small float of each plan's budget atomically (Lua, `spendLease`) from
 *   the allowance R(t) = E(t) − C(t), where C = confirmed + leased + weight × in-flight and E is
 *   the plan's pacing target curve over the advertiser's local day;
 * - `decide` spends the float locally (synchronous, no I/O) and records the bid as in-flight in
 *   its time slot; a bid goes out only if *every* plan's float covers it;
 * - the next lease call (prefetched when the float drops below F, or every `settleIntervalMs`)
 *   settles: the spent part of each lease moves to the in-flight slot of its bids, and float
 *   older than `leaseAheadMs` is returned;
 * - in-flight amounts expire by time slot after T (computed from the injected clock; TTLs only
 *   reclaim memory); win/loss notices release them earlier (track-spend).
 *
 * A lease is recorded in the slot of (grant time + leaseAheadMs) and the guard spends a lease
 * only within leaseAheadMs of its grant, so every bid stays counted for ≥ T even if the guard
 * stalls before settling. Overshoot bound and derivation: docs/spend.md.
 */
import { type DayWindows, isOpenAt, planDayWindows } from '../budget/daypart.js';
import { type CampaignBudgets, planOnDay, plansForBid, type ResolvedPlan } from '../budget/model.js';
import { defaultCurve, type TargetCurve } from '../budget/pacing.js';
import { type DayWindow, dayWindow } from '../budget/time-zone.js';
import {
  type AllocationConfig,
  defaultAllocation,
  regionalReleaseCap,
} from '../pacing/regions/allocation-config.js';
import { type Lease, PlanDay } from './guard-plan-day.js';
import type { BudgetGuardOptions, Decision, GuardBid, GuardStats } from './guard-types.js';
import { InvalidGuardOptionsError, SlotMismatchError } from './guard-types.js';
import { firstLiveSlot, planDayKeys } from './keys.js';
import { type LeaseReply, type SpendScripts, spendScripts } from './live-counters.js';
import { DEFAULT_MEMORY_RETENTION_MS, defaultInFlight, type InFlightConfig, keepFor } from './reconcile.js';
import { DEFAULT_RELEASE_CAP, releaseCapMicros } from './release.js';

export type { BudgetGuardOptions, Decision, GuardBid, GuardStats } from './guard-types.js';
export { InvalidGuardOptionsError, SlotMismatchError } from './guard-types.js';

interface CampaignEntry {
  readonly budgets: CampaignBudgets;
  dayEndMs: number;
  common: PlanDay[];
  byArm: Map<string, PlanDay[]>;
}

/** The budget guard (one per ad-server process; not shared across processes). */
export class BudgetGuard {
  readonly stats: GuardStats = {
    leaseCalls: 0,
    inits: 0,
    rejoins: 0,
    allocationHolds: 0,
    allocationRefusals: 0,
    windowRefusals: 0,
  };
  private readonly inFlight: InFlightConfig;
  private readonly curve: TargetCurve;
  private readonly floatFraction: number;
  private readonly minFloat: number;
  private readonly weightPermille: number;
  private readonly releaseCap: number;
  private readonly leaseAheadMs: number;
  private readonly settleIntervalMs: number;
  private readonly backoffMs: number;
  private readonly prefetchBelow: number;
  private readonly bidSized: boolean;
  private readonly memoryRetentionMs: number;
  private readonly scripts: SpendScripts;
  private readonly strict: string;
  private readonly defaults: { readonly config: AllocationConfig; readonly region: string } | undefined;
  private readonly campaigns = new Map<string, CampaignEntry>();
  private readonly planDays = new Map<string, PlanDay>();
  private readonly inProgress = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: BudgetGuardOptions) {
    this.inFlight = options.inFlight ?? defaultInFlight;
    this.curve = options.curve ?? defaultCurve;
    this.floatFraction = options.floatFraction ?? 0.0002;
    this.minFloat = options.minFloatMicros ?? 1000;
    const w = options.inFlightWeight ?? 1;
    if (!(w > 0 && w <= 1)) throw new InvalidGuardOptionsError(`inFlightWeight ${w} must be in (0, 1].`);
    this.weightPermille = Math.round(w * 1000);
    this.releaseCap = options.releaseCap ?? DEFAULT_RELEASE_CAP;
    if (!(this.releaseCap >= 0 && this.releaseCap <= 0.05))
      throw new InvalidGuardOptionsError(
        `releaseCap ${options.releaseCap} must be a fraction of the budget in [0, 0.05].`,
      );
    this.leaseAheadMs = options.leaseAheadMs ?? Math.floor(this.inFlight.ttlMs / 4);
    if (this.leaseAheadMs > this.inFlight.ttlMs)
      throw new InvalidGuardOptionsError(
        `leaseAheadMs ${this.leaseAheadMs} exceeds the in-flight TTL (${this.inFlight.ttlMs} ms): give at most the TTL (default TTL / 4).`,
      );
    this.settleIntervalMs = options.settleIntervalMs ?? this.inFlight.slotMs;
    this.prefetchBelow = options.prefetchBelow ?? 0.5;
    this.bidSized = options.floatSizing === 'bids';
    if (!(this.prefetchBelow > 0 && this.prefetchBelow <= 1)) {
      throw new InvalidGuardOptionsError(
        `prefetchBelow is ${options.prefetchBelow}: give a fraction of F in (0, 1] (default 0.5).`,
      );
    }
    this.backoffMs = options.noAllowanceBackoffMs ?? Math.max(1, Math.floor(this.inFlight.slotMs / 10));
    this.memoryRetentionMs = options.memoryRetentionMs ?? DEFAULT_MEMORY_RETENTION_MS;
    this.scripts = spendScripts(options.redis, options.scriptTransport);
    const a = options.allocations ?? 'off';
    const mode = typeof a === 'string' ? a : a.config.mode;
    if (mode !== 'strict' && mode !== 'off')
      throw new InvalidGuardOptionsError(
        `allocations is ${String(mode)}: give strict (several regions) or off.`,
      );
    this.strict = mode === 'strict' ? '1' : '0';
    this.defaults = typeof a === 'string' || mode === 'off' ? undefined : a;
    // Several regions: each region releases its part of the cap (the regions' count unknown —
    // a region outside the deployment's list — releases nothing), so Σ stays within the cap.
    if (mode === 'strict')
      this.releaseCap = this.defaults
        ? regionalReleaseCap(this.releaseCap, mode, this.defaults.config.regions.length)
        : 0;
  }

  /** The floor and its lease a strict guard leases within while no allocation is stored. */
  private defaultAllocation(s: PlanDay, now: number): [number, number] {
    if (!this.defaults) return [0, 0];
    const { config, region } = this.defaults;
    const d = defaultAllocation(s.plan.dailyBudgetMicros, region, config, s.day, s.plan.createdAt, now);
    return [d.cap, d.untilMs];
  }

  /** Float left when the next one is fetched, micros. */
  private prefetchAt(s: PlanDay): number {
    const at = this.floatOf(s.plan) * this.prefetchBelow;
    return this.sizedByBids(s) ? Math.min(at, s.bidMax) : at;
  }

  /** What a lease call asks for when the float is low: F, or two recent largest bids (`floatSizing: 'bids'`). */
  private leaseSize(s: PlanDay): number {
    const F = this.floatOf(s.plan);
    return this.sizedByBids(s) ? Math.min(F, Math.ceil(2 * Math.max(s.bidMax, s.shortPrice))) : F;
  }

  /** The plan's float is sized by its bids: `floatSizing: 'bids'`, F is the minimum float, bids seen. */
  private sizedByBids(s: PlanDay): boolean {
    return this.bidSized && s.bidMax > 0 && this.floatOf(s.plan) <= this.minFloat;
  }

  /** Float size F of a plan, micros. */
  floatOf(plan: ResolvedPlan): number {
    return Math.max(this.minFloat, Math.floor(plan.dailyBudgetMicros * this.floatFraction));
  }

  /**
   * Registers or replaces a campaign's budgets (e.g. refreshed from BudgetRepository). A changed
   * budget applies from the next lease: spend is kept, the remainder derived.
   */
  setBudgets(budgets: CampaignBudgets): void {
    this.campaigns.delete(budgets.campaign.campaignId);
    this.campaigns.set(budgets.campaign.campaignId, {
      budgets,
      dayEndMs: Number.NEGATIVE_INFINITY,
      common: [],
      byArm: new Map(),
    });
  }

  /** Decides one bid (synchronous; no I/O). A `bid` decision records the price as in-flight. */
  decide(bid: GuardBid): Decision {
    const now = this.options.clock.now();
    const entry = this.campaigns.get(bid.campaignId);
    if (!entry) return 'unknown-campaign';
    if (entry.budgets.campaign.status !== 'active') return 'paused';
    if (now >= entry.dayEndMs) this.roll(entry, now);
    let states = entry.common;
    if (bid.armId !== undefined) states = entry.byArm.get(bid.armId) ?? this.armStates(entry, bid.armId, now);
    const price = bid.priceMicros;
    // A dayparted plan bids only inside its windows, whatever its floats hold.
    for (let i = 0; i < states.length; i++) {
      const s = states[i] as PlanDay;
      if (s.plan.daypart && !isOpenAt(planDayWindows(s.plan, s.day) as DayWindows, now)) {
        this.stats.windowRefusals++;
        return 'no-budget';
      }
    }
    let ok = true;
    let byAllocation = false;
    for (let i = 0; i < states.length; i++) {
      const s = states[i] as PlanDay;
      if (s.available(now) < price) {
        ok = false;
        byAllocation ||= s.allocationHeld;
        s.short = true;
        if (price > s.shortPrice) s.shortPrice = price;
        // A refused bid counts as seen: the floats after it cover bids of its size.
        if (price > s.bidMax) s.bidMax = price;
        this.refill(s, now);
      }
    }
    if (!ok) {
      if (byAllocation) this.stats.allocationRefusals++;
      return 'no-budget';
    }
    for (let i = 0; i < states.length; i++) {
      const s = states[i] as PlanDay;
      s.consume(price, now);
      if (s.float < this.prefetchAt(s) || now - s.lastSettle >= this.settleIntervalMs) this.refill(s, now);
    }
    return 'bid';
  }

  /**
   * Leases the first float of every plan a campaign's bids need (account, campaign, and the arm
   * plans of `armIds`, default every arm with a plan) and resolves once the leases are back. A
   * guard answers from local floats only, so without this the first `decide` of a known campaign
   * answers `no-budget` while its lease is in flight. Initialises (rebuilds) the plan-day from the
   * ledger when needed. Does nothing for unknown or paused campaigns. Lease failures go to
   * `onError` (the guard then says no-budget and retries, as usual).
   */
  async warmUp(campaignId: string, armIds?: readonly string[]): Promise<void> {
    const now = this.options.clock.now();
    const entry = this.campaigns.get(campaignId);
    if (entry?.budgets.campaign.status !== 'active') return;
    if (now >= entry.dayEndMs) this.roll(entry, now);
    const states = new Set<PlanDay>(entry.common);
    for (const arm of armIds ?? [...entry.budgets.arms.keys()]) {
      for (const s of entry.byArm.get(arm) ?? this.armStates(entry, arm, now)) states.add(s);
    }
    for (const s of states) if (s.available(now) < this.floatOf(s.plan)) this.refill(s, now, true);
    await this.idle();
  }

  /**
   * Background upkeep for idle periods: settles pending in-flight amounts, returns expired float
   * and retires finished days. {@link start} runs it on a timer.
   */
  async maintain(): Promise<void> {
    const now = this.options.clock.now();
    for (const s of this.planDays.values()) {
      if (now >= s.day.endMs) s.retiring = true;
      s.expire(now);
      const hasWork = s.pending.size > 0 || s.leases.some((l) => l.expired || l.unsettled > 0);
      if (s.retiring && !hasWork && !s.busy) {
        this.planDays.delete(s.keys.state);
        continue;
      }
      if (hasWork && now - s.lastSettle >= this.settleIntervalMs) this.refill(s, now, true);
    }
    await this.idle();
  }

  /** Runs {@link maintain} every `intervalMs` of real time (unref'd timer). */
  start(intervalMs = 1000): void {
    this.timer ??= setInterval(() => {
      this.maintain().catch((e) => this.options.onError?.(e));
    }, intervalMs);
    this.timer.unref();
  }

  /** Waits until no lease call is in progress. */
  async idle(): Promise<void> {
    while (this.inProgress.size > 0) await Promise.allSettled([...this.inProgress]);
  }

  /** Stops the timer, settles everything and returns all unused float. */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.idle();
    for (const s of this.planDays.values()) {
      for (const l of s.leases) {
        if (!l.expired) {
          l.expired = true;
          s.float -= l.granted - l.used;
        }
      }
      s.retiring = true;
      this.refill(s, this.options.clock.now(), true);
    }
    await this.idle();
  }

  /** Local view of a plan-day (tests, metrics). */
  localState(
    plan: ResolvedPlan,
    day: string,
  ): { float: number; leases: number; pending: number } | undefined {
    const s = this.planDays.get(planDayKeys(plan, day).state);
    if (!s) return undefined;
    let pending = 0;
    for (const v of s.pending.values()) pending += v;
    return { float: s.float, leases: s.leases.filter((l) => !l.expired).length, pending };
  }

  private roll(entry: CampaignEntry, now: number): void {
    const b = entry.budgets;
    const day = dayWindow(now, b.account.timeZone);
    entry.dayEndMs = day.endMs;
    entry.common = b.common.map((p) => this.planDay(p, day, now));
    entry.byArm = new Map();
  }

  private armStates(entry: CampaignEntry, armId: string, now: number): PlanDay[] {
    const plans = plansForBid(entry.budgets, armId);
    const states =
      plans.length === entry.common.length
        ? entry.common
        : [
            ...entry.common,
            this.planDay(
              plans[plans.length - 1] as ResolvedPlan,
              dayWindow(now, entry.budgets.account.timeZone),
              now,
            ),
          ];
    entry.byArm.set(armId, states);
    return states;
  }

  private planDay(stored: ResolvedPlan, day: DayWindow, now: number): PlanDay {
    // A flight plan leases as a daily plan of the day's budget (shared/budget/flight.ts).
    const plan = planOnDay(stored, day.day);
    const key = planDayKeys(plan, day.day).state;
    let s = this.planDays.get(key);
    if (!s) {
      s = new PlanDay(plan, day, this.inFlight.slotMs, now);
      this.planDays.set(key, s);
    } else {
      // Budget changes arrive as new plan objects: the next lease uses the new budget (and may
      // find allowance where the old budget had none, so stop backing off).
      if (s.plan !== plan) s.backoffUntil = 0;
      s.plan = plan;
    }
    return s;
  }

  private refill(s: PlanDay, now: number, force = false): void {
    if (s.busy || (!force && now < s.backoffUntil)) return;
    s.busy = true;
    const p = this.leaseCall(s)
      .catch((error) => {
        s.backoffUntil = this.options.clock.now() + this.backoffMs;
        this.options.onError?.(error);
      })
      .finally(() => {
        s.busy = false;
        this.inProgress.delete(p);
      });
    this.inProgress.add(p);
  }

  /** One lease/settle round trip (plus init/rejoin when the plan-day was reset). */
  private async leaseCall(s: PlanDay): Promise<void> {
    const clock = this.options.clock;
    const now = clock.now();
    s.expire(now);
    // Take the deltas out; on failure they are put back, so nothing is settled twice or lost.
    const taken: { lease: Lease; unsettled: number; returned: number }[] = [];
    const args: (string | number)[] = [];
    for (const l of s.leases) {
      const returned = l.expired ? l.granted - l.used : 0;
      const d = l.unsettled + returned;
      if (d === 0 && !l.expired) continue;
      taken.push({ lease: l, unsettled: l.unsettled, returned });
      l.unsettled = 0;
      if (d !== 0) args.push(`l:${l.slot}`, -d);
    }
    const pending = s.pending;
    s.pending = new Map();
    for (const [slot, amount] of pending) args.push(`f:${slot}`, amount);
    const restore = () => {
      for (const t of taken) t.lease.unsettled += t.unsettled;
      for (const [slot, amount] of pending) s.pending.set(slot, (s.pending.get(slot) ?? 0) + amount);
    };
    // Prefetch while a float is left: a guard holds < (1 + prefetchBelow) F ≤ 2F per plan (K = 2
    // in the bound); a bid that did not fit asks for F (or, sized by bids, for at least its price)
    // even above the prefetch point.
    const low = s.float < this.prefetchAt(s) || s.short;
    const size = this.leaseSize(s);
    s.short = false;
    s.shortPrice = 0;
    const want = s.retiring || now >= s.day.endMs || !low ? 0 : size;
    let reply: LeaseReply;
    try {
      reply = await this.lease(s, now, want, args);
      if (reply[0] === -1 || reply[0] === -2) {
        // The plan-day was reset (or not started): rebuild from the ledger, then rejoin with
        // everything this guard has in flight; leases of the old epoch are void.
        if (reply[0] === -1) {
          this.stats.inits++;
          await this.options.initPlanDay(s.plan, s.day.day);
        }
        if (s.epoch !== '') this.stats.rejoins++;
        for (const [slot, amount] of pending) s.ring.set(slot, (s.ring.get(slot) ?? 0) + amount);
        s.leases = [];
        s.float = 0;
        s.nextExpiry = Number.POSITIVE_INFINITY;
        s.epoch = '';
        const kmin = firstLiveSlot(now, s.slotMs, this.inFlight.ttlMs);
        const rejoin: (string | number)[] = [];
        for (const [slot, amount] of s.ring) if (slot >= kmin) rejoin.push(`f:${slot}`, amount);
        reply = await this.lease(s, now, s.retiring ? 0 : size, rejoin);
        if (reply[0] < 0) throw new Error(`Plan-day ${s.keys.state} still not initialised after a rebuild.`);
        taken.length = 0;
        s.leases = [];
      } else {
        for (const [slot, amount] of pending) s.ring.set(slot, (s.ring.get(slot) ?? 0) + amount);
      }
    } catch (error) {
      restore();
      throw error;
    }
    const [grant, epoch, , , leaseSlot, slotMs, , held] = reply;
    s.epoch = epoch;
    if (held === 1) this.stats.allocationHolds++;
    if (want > 0) s.allocationHeld = held === 1;
    if (slotMs !== s.slotMs) {
      throw new SlotMismatchError(
        `Plan-day ${s.keys.state} uses ${slotMs} ms slots but this guard is configured for ${s.slotMs} ms: ` +
          'give every guard and track-spend the same InFlightConfig.',
      );
    }
    s.lastSettle = now;
    // Drop only leases whose return was in this call; one that expired meanwhile settles next time.
    if (taken.length > 0) {
      const settled = new Set(
        taken.filter((t) => t.returned > 0 || t.lease.granted === t.lease.used).map((t) => t.lease),
      );
      if (settled.size > 0)
        s.leases = s.leases.filter((l) => !(l.expired && settled.has(l) && l.unsettled === 0));
    }
    const kmin = firstLiveSlot(now, s.slotMs, this.inFlight.ttlMs);
    // Swept once per slot (kmin moves every slotMs; iterating the map on every call was a third of
    // this function's time). A dead slot added in between is only memory: a rejoin filters by kmin.
    if (kmin !== s.ringSweptAt) {
      s.ringSweptAt = kmin;
      for (const slot of s.ring.keys()) if (slot < kmin) s.ring.delete(slot);
    }
    if (grant > 0) {
      const spendUntil = now + this.leaseAheadMs;
      s.leases.push({ slot: leaseSlot, granted: grant, used: 0, unsettled: 0, spendUntil, expired: false });
      s.float += grant;
      if (spendUntil < s.nextExpiry) s.nextExpiry = spendUntil;
    } else if (want > 0) {
      s.backoffUntil = now + this.backoffMs;
    }
  }

  private async lease(
    s: PlanDay,
    now: number,
    want: number,
    deltas: (string | number)[],
  ): Promise<LeaseReply> {
    this.stats.leaseCalls++;
    // A curve backed by a cache (the published E(t)) reads what it lacks first: a cache miss must
    // not lease from a fallback curve (the linear fail-safe is far above a traffic-shaped E at night).
    if (this.curve.prepare) await this.curve.prepare(s.plan, s.day, now);
    const expected = this.curve.expectedMicros(s.plan, s.day, now);
    return this.scripts.lease(s.keys.state, [
      now,
      s.epoch,
      expected,
      want,
      Math.max(1, Math.min(want, Math.floor(this.floatOf(s.plan) / 4))),
      this.weightPermille,
      keepFor(s.day.endMs, now, this.memoryRetentionMs),
      this.leaseAheadMs,
      releaseCapMicros(s.plan.dailyBudgetMicros, expected, this.releaseCap, this.strict === '0'),
      this.strict,
      ...this.defaultAllocation(s, now),
      ...deltas,
    ]);
  }
}
