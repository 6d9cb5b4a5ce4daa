-- spendAlloc (shared/spend/allocation-script.ts): merges the pacer's allocation target into a
-- plan-day's allocation fields and optionally lowers the cap, never below what is committed now.
-- KEYS: state. ARGV: liveAtMs, ag, ax, ar, ae, lowerTo (-1 = no lowering), first (1|0), keepMs.
-- Reply: {a, ag, ar, ax, ae, released}.
--@include live-held.lua
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
      L, F = liveHeld(L, F)
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
