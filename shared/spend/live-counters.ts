/**
 * Live spend counters in Redis (ElastiCache): one state hash per plan-day (schema in keys.ts).
 * Every mutation is one Lua script in the plan's hash slot (shared/redis/scripts/spend-*.lua, through
 * the script registry), so it is atomic and costs one round trip:
 *
 * - `spendApply`  — a win/loss notice: dedup on the bid + add the clearing price to confirmed
 *                   + release the bid's in-flight amount, exactly once (track-spend);
 * - `spendLease`  — a guard settles what it spent (lease → in-flight by bid slot), returns
 *                   expired float and leases a new float from the allowance E(t) − C(t);
 * - `spendInit`   — (re)initialises a plan-day from the ledger (start of day, after a Redis reset
 *                   or eviction, or an operator's reconcile).
 *
 * The reset sentinel is field `r` (epoch id) of the state hash: apply and lease refuse to touch
 * a hash without it (reply −1, "needs init"), so counters are never built on top of nothing. The
 * caller then rebuilds from the ledger (reconcile.ts) and retries. Time comes from the caller's
 * injected clock (ARGV); TTLs only reclaim memory. They are relative (PEXPIRE of day end +
 * retention − now, on the caller's clock), so a simulated clock far from Redis's wall clock cannot
 * delete live state.
 */
import type { Result } from 'ioredis';
import type { RedisClient } from '../redis/connect.js';
import { RawScriptCaller } from '../redis/resp/script-caller.js';
import { defineScripts, rawScriptOf } from '../redis/scripts/registry.js';
import { MAX_SLOT_STEPS, type ReleaseStats, releasableOf, stepReleaseStats } from './release.js';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /**
     * KEYS: state, notices. ARGV: now, noticeField, kind (W|L), clearingMicros, bidPriceMicros,
     * bidAt, keepMs. Reply: −1 needs init, 0 duplicate, 1 applied, 2 applied but the in-flight
     * amount had already expired (late notice).
     */
    spendApply(
      state: string,
      notices: string,
      now: number,
      field: string,
      kind: 'W' | 'L',
      clearingMicros: number,
      bidPriceMicros: number,
      bidAt: number,
      keepMs: number,
    ): Result<number, Context>;
    /**
     * KEYS: state. ARGV: now, epoch, expectedMicros, requestMicros, minGrantMicros,
     * weightPermille, keepMs, leaseAheadMs, releaseCapMicros, strict (`1`: no grant beyond the
     * allocation `a`), defaultCap, defaultUntilMs (strict, while no `a` is stored: the region's
     * floor until its default lease ends, else nothing), then field/delta pairs (`l:<k>`/`f:<k>`).
     * Reply: [grant, epoch, confirmed, committed, leaseSlot, slotMs, ttlMs, held]; grant −1 = needs
     * init, −2 = epoch changed (caller must rejoin); held 1 = the allocation, not E, held it back.
     */
    spendLease(
      state: string,
      ...args: (string | number)[]
    ): Result<[number, string, number, number, number, number, number, number], Context>;
    /**
     * KEYS: state, notices, staging. ARGV: epoch, confirmedMicros, slotMs, ttlMs, keepMs,
     * graceUntilMs (no leases granted before it; 0 = none).
     * Reply 1 = initialised, 0 = someone else initialised first (staging dropped).
     */
    spendInit(
      state: string,
      notices: string,
      staging: string,
      epoch: string,
      confirmedMicros: number,
      slotMs: number,
      ttlMs: number,
      keepMs: number,
      graceUntilMs: number,
    ): Result<number, Context>;
  }
}

/** Registers the spend scripts on a client (idempotent: same scripts, same names). */
export function defineSpendCommands(redis: RedisClient): void {
  defineScripts(redis, 'spendApply', 'spendLease', 'spendInit');
}

/** The lease script's reply: [grant, epoch, confirmed, committed, leaseSlot, slotMs, ttlMs, held]. */
export type LeaseReply = [number, string, number, number, number, number, number, number];

/**
 * How the hot callers reach the lease and apply scripts: the same Lua, the same replies, either
 * through ioredis (`client`: `defineCommand`) or over the raw connections of
 * shared/redis/resp/script-caller.ts (`raw`: about 2.5× less of the caller's CPU per call; see
 * docs/spend.md, "Script calls").
 */
export type ScriptTransport = 'raw' | 'client';

/** The lease and apply scripts as the guard and track-spend call them. */
export interface SpendScripts {
  /** `spendLease` (ARGV as documented on it). */
  lease(state: string, args: readonly (string | number)[]): Promise<LeaseReply>;
  /** `spendApply` (ARGV as documented on it). */
  apply(state: string, notices: string, args: readonly (string | number)[]): Promise<number>;
}

/** Coerces a lease reply (either transport) to its typed form. */
function leaseReply(reply: readonly unknown[]): LeaseReply {
  return [
    Number(reply[0]),
    String(reply[1]),
    Number(reply[2]),
    Number(reply[3]),
    Number(reply[4]),
    Number(reply[5]),
    Number(reply[6]),
    Number(reply[7] ?? 0),
  ];
}

/**
 * The spend scripts over `transport` (raw: the connections shared by every caller on `redis`,
 * so the guard's and the tracker's calls keep the order they were issued in).
 */
export function spendScripts(redis: RedisClient, transport: ScriptTransport = 'raw'): SpendScripts {
  defineSpendCommands(redis);
  if (transport === 'client') {
    return {
      lease: async (state, args) => leaseReply(await redis.spendLease(state, ...args)),
      apply: async (state, notices, args) =>
        Number(
          await redis.spendApply(
            state,
            notices,
            ...(args as [number, string, 'W' | 'L', number, number, number, number]),
          ),
        ),
    };
  }
  const raw = RawScriptCaller.of(redis);
  const leaseScript = rawScriptOf('spendLease');
  const applyScript = rawScriptOf('spendApply');
  return {
    lease: async (state, args) => leaseReply((await raw.call(leaseScript, [state], args)) as unknown[]),
    apply: async (state, notices, args) => Number(await raw.call(applyScript, [state, notices], args)),
  };
}

/** A plan-day's live figures as a reader (pacer, dashboards, tests) sees them. */
export interface PlanDaySnapshot {
  /** Epoch id, or undefined when the plan-day is not initialised (reset / not started). */
  readonly epoch: string | undefined;
  readonly confirmedMicros: number;
  /** Live leased float, less the bids resolved before their guard settled them ({@link liveHeld}). */
  readonly leasedMicros: number;
  /** Live in-flight bids (clamped at 0). */
  readonly inFlightMicros: number;
  /**
   * Of the live in-flight amount, what no notice is expected to resolve (the share learned from
   * the slots that died, × what was bid in the live slots; docs/spend.md "In flight without loss
   * notices"). Uncapped: the guard and the pacer release at most their cap of it. 0 until learned.
   */
  readonly releasableMicros: number;
}

/** What guards hold of a plan-day beside its confirmed spend ({@link liveHeld}). */
export interface LiveHeld {
  readonly leasedMicros: number;
  readonly inFlightMicros: number;
}

/**
 * The live `l:` and `f:` sums of a state hash as the lease script counts them: each clamped at 0,
 * and a negative in-flight sum taken off the leased float first. A notice that lands before its
 * bid's guard has settled releases the bid's amount from `f:` (going negative) and adds its price
 * to `c`, while the amount is still inside the guard's `l:` lease until that settle; clamping the
 * in-flight sum alone would count the bid twice (price in `c`, amount in `l:`), raising what looks
 * held above what guards actually hold — most visibly in a day's first minute, where E is small.
 * The result is still ≥ the stored sum (docs/spend.md, "Derivation"), so no cap is lowered.
 */
export function liveHeld(leased: number, inFlight: number): LiveHeld {
  const l = Math.max(0, leased);
  if (inFlight >= 0) return { leasedMicros: l, inFlightMicros: inFlight };
  return { leasedMicros: Math.max(0, l + inFlight), inFlightMicros: 0 };
}

/** Reads a state hash without modifying it (live-slot rule applied client-side). */
export async function readPlanDay(
  redis: RedisClient,
  stateKey: string,
  nowMs: number,
): Promise<PlanDaySnapshot> {
  return planDaySnapshot(await redis.hgetall(stateKey), nowMs);
}

/**
 * A plan-day's live figures from its state hash (as HGETALL returns it), applying the live-slot
 * rule at `nowMs`. Pure: bulk readers (the pacer) fetch many hashes in one pipeline and parse here.
 */
export function planDaySnapshot(all: Readonly<Record<string, string>>, nowMs: number): PlanDaySnapshot {
  const q = Number(all.q);
  const t = Number(all.t);
  const kmin = Math.floor((nowMs - t) / q);
  let leased = 0;
  let inFlight = 0;
  let bids = 0;
  for (const field in all) {
    const prefix = field.slice(0, 2);
    if (prefix !== 'l:' && prefix !== 'f:' && prefix !== 'b:') continue;
    if (Number(field.slice(2)) < kmin) continue;
    if (prefix === 'l:') leased += Number(all[field]);
    else if (prefix === 'f:') inFlight += Number(all[field]);
    else bids += Number(all[field]);
  }
  const stats = releaseStatsOf(all, kmin);
  return {
    epoch: all.r,
    confirmedMicros: Number(all.c ?? 0),
    ...liveHeld(leased, inFlight),
    releasableMicros: releasableOf(stats, bids),
  };
}

/**
 * The release statistics a lease call at first live slot `kmin` would use: the stored ones, with
 * the dead slots the call would step over folded in (only with running sums at most
 * {@link MAX_SLOT_STEPS} behind, as the script does).
 */
function releaseStatsOf(all: Readonly<Record<string, string>>, kmin: number): ReleaseStats {
  const stats = { rf: Number(all.rf ?? 0), rb: Number(all.rb ?? 0), rn: Number(all.rn ?? 0) };
  const sk = Number(all.sk);
  if (all.sk === undefined || all.sl === undefined || all.sf === undefined || kmin - sk > MAX_SLOT_STEPS)
    return stats;
  for (let k = sk; k < kmin; k++) {
    const b = all[`b:${k}`];
    if (b !== undefined) stepReleaseStats(stats, Number(all[`f:${k}`] ?? 0), Number(b));
  }
  return stats;
}
