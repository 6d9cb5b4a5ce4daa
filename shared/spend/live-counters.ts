/**
 * Live spend counters in Redis (ElastiCache): one state hash per plan-day (schema in keys.ts).
 * Every mutation is one Lua script in the plan's hash slot, so it is atomic and costs one
 * round trip:
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
import { RawScriptCaller, rawScript } from '../redis/raw-script.js';
import {
  RELEASE_DECAY,
  RELEASE_MIN_SLOTS,
  type ReleaseStats,
  releasableOf,
  stepReleaseStats,
} from './release.js';

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

/** Shared by the scripts: sum live l:/f:/b: fields, delete dead ones (memory only). */
const SUM_LIVE = `
local function sumLive(h, kmin)
  local all = redis.call('HGETALL', h)
  local c, L, F, B = 0, 0, 0, 0
  local dead = {}
  local byte = string.byte
  -- Slot fields are l:<k> / f:<k>, k a non-negative integer in plain decimal (no sign, no leading
  -- zero). For those, k < kmin iff the field is shorter than the same prefix + kmin, or as long and
  -- smaller byte by byte: no substring cut and no number parsed per field (most of this script's
  -- time when it did). With kmin <= 0 no slot is dead.
  -- All three prefixes are one letter and ':', so one length n serves them.
  local lmin, fmin, bmin = 'l:' .. kmin, 'f:' .. kmin, 'b:' .. kmin
  local n = kmin > 0 and #lmin or -1
  for i = 1, #all, 2 do
    local f = all[i]
    local b1, b2 = byte(f, 1, 2)
    if b2 == 58 and (b1 == 108 or b1 == 102 or b1 == 98) then
      local m = #f
      if m < n or (m == n and f < (b1 == 108 and lmin or (b1 == 102 and fmin or bmin))) then dead[#dead + 1] = f
      elseif b1 == 108 then L = L + tonumber(all[i + 1])
      elseif b1 == 102 then F = F + tonumber(all[i + 1])
      else B = B + tonumber(all[i + 1]) end
    elseif f == 'c' then c = tonumber(all[i + 1]) end
  end
  if #dead > 0 then redis.call('HDEL', h, unpack(dead)) end
  return c, L, F, B
end
`;

const APPLY_LUA = `
local h, n = KEYS[1], KEYS[2]
local meta = redis.call('HMGET', h, 'r', 'q', 't', 'nc', 'sk', 'sl', 'sf')
if not meta[1] then return -1 end
-- The state and the notice-dedup hash are one group: 'nc' counts the fields the dedup hash must
-- hold. If it lost them (evicted, deleted), dedup is void and a redelivered win would count twice:
-- drop the sentinel instead, so the caller rebuilds the plan-day from the ledger.
local hlen = redis.call('HLEN', n)
if not meta[4] then
  -- state written before 'nc' existed: adopt the dedup hash as it is
  redis.call('HSET', h, 'nc', hlen)
elseif tonumber(meta[4]) ~= hlen then
  redis.call('HDEL', h, 'r')
  return -1
end
local field, kind = ARGV[2], ARGV[3]
local prev = redis.call('HGET', n, field)
if prev == 'W' or (kind == 'L' and prev) then return 0 end
if not prev then redis.call('HINCRBY', h, 'nc', 1) end
local now, q, t = tonumber(ARGV[1]), tonumber(meta[2]), tonumber(meta[3])
-- R = restored from the ledger by a rebuild: confirmed already counts it, the release may not.
if kind == 'W' and prev ~= 'R' then redis.call('HINCRBY', h, 'c', ARGV[4]) end
local reply = 1
if prev ~= 'L' then
  -- release the bid's in-flight amount only while its slot is live (else it already expired)
  local k = math.floor(tonumber(ARGV[6]) / q)
  if k >= math.floor((now - t) / q) then
    -- Running sums (see the lease script): a slot below sk is dead already, not written; sf follows
    -- f:k. Without all three sums' fields the next lease sums the fields anyway.
    local sk = tonumber(meta[5])
    if sk and meta[6] and meta[7] then
      if k >= sk then
        redis.call('HINCRBY', h, 'f:' .. k, -tonumber(ARGV[5]))
        redis.call('HINCRBY', h, 'sf', -tonumber(ARGV[5]))
      end
    else
      redis.call('HINCRBY', h, 'f:' .. k, -tonumber(ARGV[5]))
    end
  else
    reply = 2
  end
end
redis.call('HSET', n, field, kind)
redis.call('PEXPIRE', h, ARGV[7])
redis.call('PEXPIRE', n, ARGV[7])
return reply
`;

/**
 * Slots a lease call steps its running sums over (the dead slots since the last call, each one
 * HMGET of its two fields); past this many (a plan-day idle for a long time) it sums the hash's
 * fields instead.
 */
export const MAX_SLOT_STEPS = 16;

const LEASE_LUA = `${SUM_LIVE}
local h = KEYS[1]
local meta = redis.call('HMGET', h, 'r', 'q', 't', 'g', 'c', 'sk', 'sl', 'sf', 'sb', 'rf', 'rb', 'rn', 'a', 'ae')
local r = meta[1]
if not r then return {-1, '', 0, 0, 0, 0, 0, 0} end
if ARGV[2] ~= '' and ARGV[2] ~= r then return {-2, r, 0, 0, 0, 0, 0, 0} end
local now, q, t = tonumber(ARGV[1]), tonumber(meta[2]), tonumber(meta[3])
local kmin = math.floor((now - t) / q)
-- Running sums (docs/spend.md, "Running sums"): sl / sf = the l: / f: fields of slots >= sk, and
-- no slot field below sk exists. A call steps sk up to its kmin, taking the slots that died out
-- of the sums and the hash; without sums (a state hash from before them, a rebuild) or after a
-- long idle it sums the fields. A caller whose clock is behind (kmin < sk) sees the slots below sk
-- as dead: once dead, a slot stays dead.
-- Release (docs/spend.md, "In flight without loss notices"): b:<k> holds the bids settled into
-- slot k, sb their sum from sk up; rf / rb / rn are decayed sums, over the slots that died, of
-- what was still in flight at T (never resolved by a notice), of what was bid, and of the count
-- of such slots (x 1000). rho = rf / rb is the share of a bid that no notice ever resolves.
local c, L, F, B
local rf, rb, rn = tonumber(meta[10] or '0'), tonumber(meta[11] or '0'), tonumber(meta[12] or '0')
local sk = tonumber(meta[6])
if sk and meta[7] and meta[8] and kmin - sk <= ${MAX_SLOT_STEPS} then
  c, L, F, B = tonumber(meta[5] or '0'), tonumber(meta[7]), tonumber(meta[8]), tonumber(meta[9] or '0')
  if kmin > sk then
    local names = {}
    for k = sk, kmin - 1 do
      names[#names + 1] = 'l:' .. k
      names[#names + 1] = 'f:' .. k
      names[#names + 1] = 'b:' .. k
    end
    local values = redis.call('HMGET', h, unpack(names))
    local dead = {}
    for i = 1, #names, 3 do
      local l, f, b = values[i], values[i + 1], values[i + 2]
      if l then dead[#dead + 1] = names[i]; L = L - tonumber(l) end
      if f then dead[#dead + 1] = names[i + 1]; F = F - tonumber(f) end
      if b then
        dead[#dead + 1] = names[i + 2]
        local bv = tonumber(b)
        B = B - bv
        if bv > 0 then
          local fv = tonumber(f or '0')
          if fv < 0 then fv = 0 elseif fv > bv then fv = bv end
          rf = math.floor(rf * ${RELEASE_DECAY}) + fv
          rb = math.floor(rb * ${RELEASE_DECAY}) + bv
          rn = math.floor(rn * ${RELEASE_DECAY}) + 1000
        end
      end
    end
    if #dead > 0 then redis.call('HDEL', h, unpack(dead)) end
    sk = kmin
  end
else
  c, L, F, B = sumLive(h, kmin)
  sk = kmin
end
for i = 13, #ARGV, 2 do
  local f = ARGV[i]
  local k = string.sub(f, 3)
  if tonumber(k) >= sk then
    local d = tonumber(ARGV[i + 1])
    redis.call('HINCRBY', h, f, d)
    if string.byte(f, 1) == 108 then L = L + d
    else
      F = F + d
      -- A guard's settle adds its bids to their slot: what was bid there.
      if d > 0 then
        redis.call('HINCRBY', h, 'b:' .. k, d)
        B = B + d
      end
    end
  end
end
local Lc, Fc = L, F
if Lc < 0 then Lc = 0 end
if Fc < 0 then Fc = 0 end
-- In flight that no notice will resolve (rho of what was bid in the live slots), released up to
-- the caller's cap (ARGV[9]): the overshoot bound grows by that cap at most.
local release = 0
if rn >= ${RELEASE_MIN_SLOTS * 1000} and rb > 0 and B > 0 then release = math.floor(rf / rb * B) end
local releaseCap = tonumber(ARGV[9])
if release > releaseCap then release = releaseCap end
Fc = Fc - release
if Fc < 0 then Fc = 0 end
local committed = c + Lc + math.floor(Fc * tonumber(ARGV[6]) / 1000)
-- Several regions (docs/spend.md, "Allocations"): the region's allocation a caps E while its
-- authority's lease ae lasts; a strict guard grants nothing without one (a reset lost it: the
-- pacer writes it again within a tick). Without a and not strict: one region, E alone.
local cap = tonumber(ARGV[3])
local alloc = tonumber(meta[13])
local capped = false
if alloc then
  if now > tonumber(meta[14] or '0') then cap = -1 capped = true elseif alloc < cap then cap = alloc capped = true end
elseif ARGV[10] == '1' then
  -- No allocation written yet (a new plan-day, or a reset the pacer repairs within a tick): the
  -- region's floor while its default lease lasts, else nothing.
  local dcap = tonumber(ARGV[11])
  if now > tonumber(ARGV[12]) then cap = -1 elseif dcap < cap then cap = dcap end
  capped = true
end
local allowance = cap - committed
local want, minGrant = tonumber(ARGV[4]), tonumber(ARGV[5])
local grant = 0
local held = 0
-- rejoin grace after a mid-day rebuild: guards re-register their in-flight first, no grants
local grace = tonumber(meta[4] or '0')
if want > 0 and now >= grace then
  if allowance >= want then grant = want elseif allowance >= minGrant and allowance > 0 then grant = allowance end
  -- The allocation, not E, held this lease back: the region's spend no longer shows its demand
  -- (the pacer's demand estimate leaves this interval out), and its allocation must make room
  -- for at least the float asked for (aw).
  if grant < want and capped then
    redis.call('HSET', h, 'ac', now, 'aw', want)
    held = 1
  end
end
-- a lease lives in the slot of (now + leaseAhead): it stays counted until every bid made from
-- it (at most leaseAhead after the grant) is T old, even if the guard never settles.
local ks = math.floor((now + tonumber(ARGV[8])) / q)
if grant > 0 then
  redis.call('HINCRBY', h, 'l:' .. ks, grant)
  L = L + grant
end
redis.call('HSET', h, 'sk', sk, 'sl', L, 'sf', F, 'sb', B, 'rf', rf, 'rb', rb, 'rn', rn)
redis.call('PEXPIRE', h, ARGV[7])
return {grant, r, c, committed + grant, ks, q, t, held}
`;

const INIT_LUA = `
local h, n, s = KEYS[1], KEYS[2], KEYS[3]
if redis.call('HEXISTS', h, 'r') == 1 then
  redis.call('DEL', s)
  return 0
end
-- The allocation fields belong to the pacer, not to the spend state: they survive the rebuild.
local keep = redis.call('HMGET', h, 'a', 'ae', 'ag', 'ar', 'ax')
redis.call('DEL', h, n)
if redis.call('EXISTS', s) == 1 then redis.call('RENAME', s, n) end
redis.call('HSET', h, 'r', ARGV[1], 'c', ARGV[2], 'q', ARGV[3], 't', ARGV[4], 'g', ARGV[6], 'nc', redis.call('HLEN', n))
if keep[1] then
  redis.call('HSET', h, 'a', keep[1], 'ae', keep[2] or '0', 'ag', keep[3] or '0', 'ar', keep[4] or '0', 'ax', keep[5] or '0')
end
redis.call('PEXPIRE', h, ARGV[5])
if redis.call('EXISTS', n) == 1 then redis.call('PEXPIRE', n, ARGV[5]) end
return 1
`;

/** Registers the spend scripts on a client (idempotent: same scripts, same names). */
export function defineSpendCommands(redis: RedisClient): void {
  redis.defineCommand('spendApply', { numberOfKeys: 2, lua: APPLY_LUA });
  redis.defineCommand('spendLease', { numberOfKeys: 1, lua: LEASE_LUA });
  redis.defineCommand('spendInit', { numberOfKeys: 3, lua: INIT_LUA });
}

/** The lease script's reply: [grant, epoch, confirmed, committed, leaseSlot, slotMs, ttlMs, held]. */
export type LeaseReply = [number, string, number, number, number, number, number, number];

/**
 * How the hot callers reach the lease and apply scripts: the same Lua, the same replies, either
 * through ioredis (`client`: `defineCommand`) or over the raw connections of
 * shared/redis/raw-script.ts (`raw`: about 2.5× less of the caller's CPU per call; see
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

const LEASE_SCRIPT = rawScript('spendLease', LEASE_LUA, 1);
const APPLY_SCRIPT = rawScript('spendApply', APPLY_LUA, 2);

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
  return {
    lease: async (state, args) => leaseReply((await raw.call(LEASE_SCRIPT, [state], args)) as unknown[]),
    apply: async (state, notices, args) => Number(await raw.call(APPLY_SCRIPT, [state, notices], args)),
  };
}

/** A plan-day's live figures as a reader (pacer, dashboards, tests) sees them. */
export interface PlanDaySnapshot {
  /** Epoch id, or undefined when the plan-day is not initialised (reset / not started). */
  readonly epoch: string | undefined;
  readonly confirmedMicros: number;
  /** Live leased float. */
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
    leasedMicros: Math.max(0, leased),
    inFlightMicros: Math.max(0, inFlight),
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
