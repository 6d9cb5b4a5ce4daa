-- spendLease (shared/spend/live-counters.ts): a guard settles what it spent (lease -> in flight by
-- bid slot), gets back its expired float and leases a new float from the allowance E(t) - C(t).
-- KEYS: state. ARGV: now, epoch, expectedMicros, requestMicros, minGrantMicros, weightPermille,
-- keepMs, leaseAheadMs, releaseCapMicros, strict (1: no grant beyond the allocation a),
-- defaultCap, defaultUntilMs, then field/delta pairs (l:<k> / f:<k>).
-- Reply: {grant, epoch, confirmed, committed, leaseSlot, slotMs, ttlMs, held}; grant -1 = needs
-- init, -2 = epoch changed (the caller rejoins); held 1 = the allocation, not E, held it back.
--@const MAX_SLOT_STEPS
--@const RELEASE_DECAY
--@const RELEASE_MIN_SLOTS
--@include sum-live.lua
--@include live-held.lua
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
if sk and meta[7] and meta[8] and kmin - sk <= MAX_SLOT_STEPS then
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
          rf = math.floor(rf * RELEASE_DECAY) + fv
          rb = math.floor(rb * RELEASE_DECAY) + bv
          rn = math.floor(rn * RELEASE_DECAY) + 1000
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
-- What guards hold, each bid once (live-held.lua).
local Lc, Fc = liveHeld(L, F)
-- In flight that no notice will resolve (rho of what was bid in the live slots), released up to
-- the caller's cap (ARGV[9]): the overshoot bound grows by that cap at most.
local release = 0
if rn >= RELEASE_MIN_SLOTS * 1000 and rb > 0 and B > 0 then release = math.floor(rf / rb * B) end
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
