-- spendApply (shared/spend/live-counters.ts): a win/loss notice, exactly once — dedup on the bid,
-- add the clearing price to confirmed, release the bid's in-flight amount.
-- KEYS: state, notices. ARGV: now, noticeField, kind (W|L), clearingMicros, bidPriceMicros, bidAt,
-- keepMs. Reply: -1 needs init, 0 duplicate, 1 applied, 2 applied but the in-flight amount had
-- already expired (late notice).
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
