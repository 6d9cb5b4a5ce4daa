/**
 * A guard's local view of one plan-day (guard.ts): the leases it holds, the float left, and the
 * amounts spent but not yet settled to Redis. Synchronous and local: `decide` runs on it without
 * I/O; the lease call settles it.
 */
import type { ResolvedPlan } from '../budget/model.js';
import type { DayWindow } from '../budget/time-zone.js';
import { type PlanDayKeys, planDayKeys } from './keys.js';

/** A float leased from the plan-day's allowance, spent locally. */
export interface Lease {
  /** Redis slot the grant is recorded in (`l:<slot>`). */
  readonly slot: number;
  readonly granted: number;
  used: number;
  /** Spent but not yet moved to in-flight slots in Redis. */
  unsettled: number;
  /** Last instant the lease may be spent. */
  readonly spendUntil: number;
  expired: boolean;
}

/** The local state of one plan-day in one guard. */
export class PlanDay {
  readonly keys: PlanDayKeys;
  epoch = '';
  leases: Lease[] = [];
  float = 0;
  nextExpiry = Number.POSITIVE_INFINITY;
  /** Spent amounts by bid slot not yet settled. */
  pending = new Map<number, number>();
  /** Every amount this guard put in flight by bid slot (live window), re-registered on rejoin. */
  ring = new Map<number, number>();
  /** The first live slot when `ring` was last swept of dead slots. */
  ringSweptAt = Number.NEGATIVE_INFINITY;
  busy = false;
  /** A bid did not fit the float: the next lease call asks for F whatever the float. */
  short = false;
  /** The last lease call that asked for a float got less because of the allocation (`held`). */
  allocationHeld = false;
  /** The largest recent bid (decays by 2 % a bid), for `floatSizing: 'bids'`. */
  bidMax = 0;
  /** The price of a bid that did not fit since the last lease call. */
  shortPrice = 0;
  backoffUntil = 0;
  lastSettle: number;
  retiring = false;

  constructor(
    public plan: ResolvedPlan,
    readonly day: DayWindow,
    public slotMs: number,
    now: number,
  ) {
    this.keys = planDayKeys(plan, day.day);
    this.lastSettle = now;
  }

  available(now: number): number {
    if (now >= this.nextExpiry) this.expire(now);
    return this.float;
  }

  expire(now: number): void {
    let next = Number.POSITIVE_INFINITY;
    for (const l of this.leases) {
      if (l.expired) continue;
      if (l.spendUntil <= now) {
        l.expired = true;
        this.float -= l.granted - l.used;
      } else if (l.spendUntil < next) next = l.spendUntil;
    }
    this.nextExpiry = next;
  }

  consume(price: number, now: number): void {
    let rest = price;
    for (const l of this.leases) {
      if (l.expired) continue;
      const take = Math.min(rest, l.granted - l.used);
      if (take <= 0) continue;
      l.used += take;
      l.unsettled += take;
      rest -= take;
      if (rest === 0) break;
    }
    this.float -= price;
    this.bidMax = Math.max(price, this.bidMax * 0.98);
    const slot = Math.floor(now / this.slotMs);
    this.pending.set(slot, (this.pending.get(slot) ?? 0) + price);
  }
}
