/**
 * Time is injected everywhere (DESIGN.md requirement 6): domain code never calls `Date.now()`
 * directly, so a simulated day can run in minutes against the real code and real Redis, and
 * tests can stand on minute/hour/day boundaries exactly.
 */

/** A source of the current time in epoch milliseconds. */
export interface Clock {
  /** Current time, epoch milliseconds (UTC). */
  now(): number;
}

/** The wall clock. */
export const systemClock: Clock = { now: () => Date.now() };

/** A clock that moves only when told to; for tests and the simulator. */
export class ManualClock implements Clock {
  constructor(private current = 0) {}
  now(): number {
    return this.current;
  }
  /** Sets the time (epoch ms). */
  set(ms: number): void {
    this.current = ms;
  }
  /** Moves the time forward by `ms`. */
  advance(ms: number): void {
    this.current += ms;
  }
}

/** Clock that reads an offset wall clock: runs a scenario "as if" at another instant, at real speed. */
export function offsetClock(offsetMs: number, base: Clock = systemClock): Clock {
  return { now: () => base.now() + offsetMs };
}

export const MINUTE_MS = 60_000;
export const HOUR_MS = 60 * MINUTE_MS;
export const DAY_MS = 24 * HOUR_MS;
