/**
 * The allocation fields of a plan-day state hash (docs/spend.md, "Allocations"), written only by
 * the pacer publishing into the region's cache, read by the lease script (`a`, `ae`):
 *
 * - `ag` cumulative grant applied, `ar` cumulative released, `ax` cumulative reclaimed applied;
 * - `a` = ag − ar − ax, the cap the lease script enforces; `ae` grants stop after this instant;
 * - `u` set while nothing ever leased from the plan-day since the pacer first wrote it (its
 *   committed spend is then exactly 0, so an idle region can give its floor back);
 * - `ac`, written by the lease script: when the allocation (not E) last held a lease back, so the
 *   pacer knows the region's spend since then does not show its demand; `aw`, what that lease
 *   asked for (a guard's float), so the region's allocation makes room for one.
 *
 * One script (`spendAlloc`, shared/redis/scripts/spend-alloc.lua) merges a target into them and,
 * optionally, lowers the cap. The merge never lowers `ag` or `ae` and compares (`ax`, `ar`) as a
 * pair (`syncAllocation` in shared/pacing/regions/allocations.ts is its TypeScript twin), so a
 * paused pacer writing an older view cannot raise a cap above a release. Lowering sets a = max(target, U) where U is what is
 * committed now (confirmed + live leases + live in-flight at weight 1, the lease script's count):
 * what guards already hold is never released. No release before the state is initialised (U is
 * unknown after a reset) unless `u` says nothing was ever leased, nor during a rejoin grace.
 */
import type { RedisClient } from '../redis/connect.js';
import { RawScriptCaller } from '../redis/resp/script-caller.js';
import { rawScriptOf } from '../redis/scripts/registry.js';

/** One merge (and optional lowering) of a plan-day's allocation fields. */
export interface AllocationWrite {
  /** Clock of the committed-spend count: the pacer's, less the skew margin (counts more as live). */
  readonly liveAtMs: number;
  readonly ag: number;
  readonly ax: number;
  readonly ar: number;
  readonly ae: number;
  /** Lower the cap to max(this, committed now); undefined: no lowering. */
  readonly lowerTo?: number;
  /** The pacer never wrote this plan-day's fields before (a missing hash is not a reset). */
  readonly first: boolean;
  /** Memory TTL for a hash the write creates, ms. */
  readonly keepMs: number;
}

/** The fields after a write, and what it released. */
export interface AllocationWritten {
  readonly a: number;
  readonly ag: number;
  readonly ar: number;
  readonly ax: number;
  readonly ae: number;
  readonly released: number;
}

/** The allocation script calls (raw RESP connections shared per client, as the guard's). */
export interface AllocationScripts {
  write(stateKey: string, w: AllocationWrite): Promise<AllocationWritten>;
  /** Removes the allocation fields (a deployment back to one region: no stale cap survives). */
  clear(stateKey: string): Promise<void>;
}

/** The allocation scripts on `redis`. */
export function allocationScripts(redis: RedisClient): AllocationScripts {
  const raw = RawScriptCaller.of(redis);
  const allocScript = rawScriptOf('spendAlloc');
  const clearScript = rawScriptOf('spendAllocClear');
  return {
    async write(stateKey, w) {
      const reply = (await raw.call(
        allocScript,
        [stateKey],
        [w.liveAtMs, w.ag, w.ax, w.ar, w.ae, w.lowerTo ?? -1, w.first ? '1' : '0', w.keepMs],
      )) as unknown[];
      return {
        a: Number(reply[0]),
        ag: Number(reply[1]),
        ar: Number(reply[2]),
        ax: Number(reply[3]),
        ae: Number(reply[4]),
        released: Number(reply[5]),
      };
    },
    async clear(stateKey) {
      await raw.call(clearScript, [stateKey], []);
    },
  };
}
