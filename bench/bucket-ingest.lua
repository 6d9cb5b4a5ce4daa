-- The alternative layout `npm run bench -- counting` compares with (bench/counting.ts): one set per
-- user and day / hour / minute bucket, member = event bytes.
-- KEYS: the day, hour and minute sets. ARGV: ttlMs, member. Reply: 1 if the minute set gained it.
local added = 0
for i = 1, #KEYS do
  local r = redis.call('SADD', KEYS[i], ARGV[2])
  if i == 3 then added = r end
  redis.call('PEXPIRE', KEYS[i], ARGV[1])
end
return added
