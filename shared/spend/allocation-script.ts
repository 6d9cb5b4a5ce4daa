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
 * One script (`spendAlloc`) merges a target into them and, optionally, lowers the cap. The merge
 * never lowers `ag` or `ae` and compares (`ax`, `ar`) as a pair (`syncAllocation` in
 * shared/pacing/regions/allocations.ts is its TypeScript twin), so a paused pacer writing an older
 * view cannot raise a cap above a release. Lowering sets a = max(target, U) where U is what is
 * committed now (confirmed + live leases + live in-flight at weight 1, the lease script's count):
 * what guards already hold is never released. No release before the state is initialised (U is
 * unknown after a reset) unless `u` says nothing was ever leased, nor during a rejoin grace.
 */
import type { RedisClient } from '../redis/connect.js';
import { RawScriptCaller, rawScript } from '../redis/raw-script.js';

const ALLOC_LUA = `
local h = KEYS[1]
local m = redis.call('HMGET', h, 'ag', 'ar', 'ax', 'ae', 'r', 'q', 't', 'g', 'c', 'sk', 'u')
local ag = tonumber(m[1] or '0')
local tg = tonumber(ARGV[2])
if tg > ag then ag = tg end
local ar, ax = tonumber(m[2] or '0'), tonumber(m[3] or '0')
local tx, tr = tonumber(ARGV[3]), tonumber(ARGV[4])
if tx > ax or (tx == ax and tr > ar) then ax, ar = tx, tr end
local ae = tonumber(m[4] or '0')
local te = tonumber(ARGV[5])
if te > ae then ae = te end
local a = ag - ar - ax
local lowerTo = tonumber(ARGV[6])
local released = 0
if lowerTo >= 0 and a > lowerTo then
  local U
  local now = tonumber(ARGV[1])
  if m[5] then
    if now >= tonumber(m[8] or '0') then
      -- committed now, read only (the lease script owns the running sums and the deletions):
      -- slot k counts iff k >= max(kmin, sk)
      local q, t = tonumber(m[6]), tonumber(m[7])
      local lo = math.floor((now - t) / q)
      local sk = tonumber(m[10])
      if sk and sk > lo then lo = sk end
      local all = redis.call('HGETALL', h)
      local L, F = 0, 0
      for i = 1, #all, 2 do
        local f = all[i]
        local b1, b2 = string.byte(f, 1, 2)
        if b2 == 58 and (b1 == 108 or b1 == 102) and tonumber(string.sub(f, 3)) >= lo then
          if b1 == 108 then L = L + tonumber(all[i + 1]) else F = F + tonumber(all[i + 1]) end
        end
      end
      if L < 0 then L = 0 end
      if F < 0 then F = 0 end
      U = tonumber(m[9] or '0') + L + F
    end
  elseif m[11] then
    U = 0
  end
  if U then
    local target = lowerTo
    if U > target then target = U end
    if a > target then
      released = a - target
      ar = ar + released
      a = target
    end
  end
end
redis.call('HSET', h, 'ag', ag, 'ar', ar, 'ax', ax, 'ae', ae, 'a', a)
if ARGV[7] == '1' and not m[1] and not m[5] then redis.call('HSET', h, 'u', '1') end
if redis.call('PTTL', h) < 0 then redis.call('PEXPIRE', h, ARGV[8]) end
return {a, ag, ar, ax, ae, released}
`;

// An emptied hash disappears (Redis drops empty hashes): a state the pacer alone created is gone.
const CLEAR_LUA = `return redis.call('HDEL', KEYS[1], 'a', 'ae', 'ag', 'ar', 'ax', 'ac', 'aw', 'u')`;

const ALLOC_SCRIPT = rawScript('spendAlloc', ALLOC_LUA, 1);
const CLEAR_SCRIPT = rawScript('spendAllocClear', CLEAR_LUA, 1);

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
  return {
    async write(stateKey, w) {
      const reply = (await raw.call(
        ALLOC_SCRIPT,
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
      await raw.call(CLEAR_SCRIPT, [stateKey], []);
    },
  };
}
