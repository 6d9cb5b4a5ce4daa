-- Fragment (included with `--@include sum-live.lua`, not a script of its own): sums the live
-- l: / f: / b: slot fields of a plan-day state hash and deletes the dead ones (memory only).
-- Returns c (confirmed), L (leased), F (in flight), B (bid) of the slots >= kmin.
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
