-- spendInit (shared/spend/live-counters.ts, called by shared/spend/reconcile.ts): (re)initialises a
-- plan-day from the ledger's staging hash, unless another rebuild initialised it first.
-- KEYS: state, notices, staging. ARGV: epoch, confirmedMicros, slotMs, ttlMs, keepMs,
-- graceUntilMs (no leases before it; 0 = none). Reply: 1 initialised, 0 someone else initialised
-- first (staging dropped).
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
