-- ppClaim (shared/pacing/publisher.ts): claims a shard's tick for a publisher, fenced by (g, o, e),
-- and logs the attempt.
-- KEYS: claim, log. ARGV: g, o, e, tick, publisher, nowMs, logMaxLen.
-- Reply: {accepted 1|0, reason ok|fence|tick, previous g, o, e, tick, publisher} ('' = none).
local cur = redis.call('HMGET', KEYS[1], 'g', 'o', 'e', 't', 'p')
local g, o, e, t = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local why = 'ok'
if cur[1] then
  local cg, co, ce, ct = tonumber(cur[1]) or -1, tonumber(cur[2]) or -1, tonumber(cur[3]) or -1, tonumber(cur[4]) or -1
  if g < cg or (g == cg and (o < co or (o == co and e < ce))) then why = 'fence'
  elseif t <= ct then why = 'tick' end
end
local ok = 0
if why == 'ok' then
  ok = 1
  redis.call('HSET', KEYS[1], 'g', ARGV[1], 'o', ARGV[2], 'e', ARGV[3], 't', ARGV[4], 'p', ARGV[5], 'at', ARGV[6])
end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[7], '*', 'k', 'claim', 'ok', ok, 'why', why, 'by', ARGV[5],
  'f', ARGV[1] .. '.' .. ARGV[2] .. '.' .. ARGV[3], 't', ARGV[4], 'at', ARGV[6])
return {ok, why, cur[1] or '', cur[2] or '', cur[3] or '', cur[4] or '', cur[5] or ''}
