-- Fragment (included with `--@include live-held.lua`, not a script of its own): the live leased
-- float L and in-flight sum F of a plan-day as guards hold them (shared/spend/live-counters.ts
-- `liveHeld`, the same rule). Each is clamped at 0, and a negative in-flight sum comes off the
-- leased float first: it is bids a notice resolved before their guard settled them out of its
-- lease, whose amount is still inside l: and whose price is already in c, so each such bid counts
-- once (docs/spend.md, "Derivation": the sum stays >= the stored S).
local function liveHeld(L, F)
  if L < 0 then L = 0 end
  if F >= 0 then return L, F end
  L = L + F
  if L < 0 then L = 0 end
  return L, 0
end
