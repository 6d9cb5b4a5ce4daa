/**
 * In flight without loss notices (docs/spend.md): many exchanges send no loss notice, so a lost bid
 * stays in flight until T and holds its allowance. Each plan-day learns, from the in-flight slots
 * that died, the share of a bid that no notice ever resolves (ρ = rf / rb, decayed sums over the
 * dead slots of what was still in flight at T and of what was bid), and the guards and the pacer
 * count in-flight less ρ × the live slots' bids — at most a cap (a fraction of the budget), which
 * is what the release can add to the overshoot bound. Pure: the lease script
 * (shared/redis/scripts/spend-lease.lua, which receives these constants from the script registry)
 * computes the same in Lua, and the pacer's and the contract's readers with these functions.
 */

/**
 * Decay per dead slot of the release statistics (`rf`, `rb`, `rn`): about the last 10 slots that
 * had bids weigh in, so the share follows the market within T.
 */
export const RELEASE_DECAY = 0.9;
/** Dead slots with bids (decayed) the statistics need before anything is released. */
export const RELEASE_MIN_SLOTS = 3;
/**
 * Slots a lease call steps its running sums over (the dead slots since the last call, each one
 * HMGET of its fields, folded into the release statistics); past this many (a plan-day idle for a
 * long time) it sums the hash's fields instead and the dead slots' statistics are not learned.
 * The lease script (`--@const MAX_SLOT_STEPS`) and the readers that mirror it use this value.
 */
export const MAX_SLOT_STEPS = 16;
/**
 * Default cap of the release, as a fraction of a plan's daily budget: the most the guards and the
 * controller count less than every live in-flight amount, and so the most it adds to the
 * overshoot bound (docs/spend.md).
 */
export const DEFAULT_RELEASE_CAP = 0.0025;

/** A state hash's release statistics (`rf`, `rb`, `rn`: decayed sums over dead slots). */
export interface ReleaseStats {
  rf: number;
  rb: number;
  rn: number;
}

/** Folds one dead slot (its last in-flight amount `f`, its bids `b`) into the statistics, as the lease script does. */
export function stepReleaseStats(s: ReleaseStats, f: number, b: number): void {
  if (!(b > 0)) return;
  const fv = f < 0 ? 0 : f > b ? b : f;
  s.rf = Math.floor(s.rf * RELEASE_DECAY) + fv;
  s.rb = Math.floor(s.rb * RELEASE_DECAY) + b;
  s.rn = Math.floor(s.rn * RELEASE_DECAY) + 1000;
}

/** What of `bids` (the live slots' bids) no notice is expected to resolve, as the lease script computes it. */
export function releasableOf(s: ReleaseStats, bids: number): number {
  return s.rn >= RELEASE_MIN_SLOTS * 1000 && s.rb > 0 && bids > 0 ? Math.floor((s.rf / s.rb) * bids) : 0;
}

/**
 * The most of a plan-day's in-flight amount a lease call (or the controller) may count less:
 * `cap` × the budget, plus — where one region's curve is the only cap, `headroom` — the budget's
 * headroom over E(t), max(0, budget − expected). A guard grants only while what it counts stays
 * within E(t), so what it commits for real is at most E(t) + this, which is at most the budget
 * plus cap × budget: the overshoot bound grows by that and no more, whatever ρ turns out to be
 * (docs/spend.md, "In flight without loss notices"). Mid-day the headroom lets the learned release
 * work in full; it shrinks to nothing as E(t) reaches the budget at the day's end. Strict
 * allocations cap each region by its allocation, not by E alone: no headroom there. A cap of 0
 * releases nothing.
 */
export function releaseCapMicros(
  budgetMicros: number,
  expectedMicros: number,
  cap: number,
  headroom: boolean,
): number {
  if (!(cap > 0) || !(budgetMicros > 0)) return 0;
  const room = headroom && Number.isFinite(expectedMicros) ? Math.max(0, budgetMicros - expectedMicros) : 0;
  return Math.floor(cap * budgetMicros + room);
}

/** In-flight counted against a plan: the live amount less what may be released, at most `capMicros`. */
export function countedInFlight(inFlightMicros: number, releasableMicros: number, capMicros: number): number {
  return Math.max(0, inFlightMicros - Math.min(releasableMicros, Math.max(0, capMicros)));
}
