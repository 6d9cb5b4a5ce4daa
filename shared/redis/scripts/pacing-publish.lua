-- ppPublish (shared/pacing/publisher.ts): one fenced batch of a tick's publish (campaign
-- parameters, shard state, forecasts, budgets snapshot); refused unless the claim is still this
-- publisher's. KEYS and ARGV: see ppPublish in publisher.ts (the key count is the caller's).
-- Reply: {accepted 1|0, claim g, o, e, tick, publisher} ('' = none).
local cur = redis.call('HMGET', KEYS[1], 'g', 'o', 'e', 't', 'p')
local g, o, e, t, by, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local fence = g .. '.' .. o .. '.' .. e
local n = tonumber(ARGV[12])
if cur[1] ~= g or cur[2] ~= o or cur[3] ~= e or cur[4] ~= t or cur[5] ~= by then
  redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[7], '*', 'k', 'publish', 'ok', 0, 'why', 'claim', 'by', by,
    'f', fence, 't', t, 'at', now, 'n', n)
  return {0, cur[1] or '', cur[2] or '', cur[3] or '', cur[4] or '', cur[5] or ''}
end
-- splits one packed argument (parts joined by the unit separator, 31) into f[1..nf]
local function split(packed)
  local f, nf, pos = {}, 0, 1
  if packed == '' then return f, 0 end
  while true do
    local sep = string.find(packed, '\31', pos, true)
    nf = nf + 1
    if not sep then
      f[nf] = string.sub(packed, pos)
      return f, nf
    end
    f[nf] = string.sub(packed, pos, sep - 1)
    pos = sep + 1
  end
end
if ARGV[9] == '1' then redis.call('DEL', KEYS[4]) end
local i = 13
for c = 1, n do
  local key = KEYS[5 + c]
  -- one argument per campaign: mode, then field, value, …
  local f, nf = split(ARGV[i])
  i = i + 1
  local mode = f[1]
  if mode == 'F' then redis.call('DEL', key) end
  if mode == 'P' then
    -- a continuing publisher: version, fence and publisher are already this publish's
    redis.call('HSET', key, 't', t, 'at', now, unpack(f, 2, nf))
  else
    redis.call('HSET', key, 'v', '2', 't', t, 'at', now, 'f', fence, 'by', by, unpack(f, 2, nf))
    redis.call('PEXPIRE', key, ARGV[8])
  end
end
for h = 2, 4 do
  local f, nf = split(ARGV[i])
  i = i + 1
  -- HSET in slices: unpack has a stack limit
  for s = 1, nf, 4000 do redis.call('HSET', KEYS[h], unpack(f, s, math.min(nf, s + 3999))) end
end
for h = 2, 4 do
  local f, nf = split(ARGV[i])
  i = i + 1
  for s = 1, nf, 4000 do redis.call('HDEL', KEYS[h], unpack(f, s, math.min(nf, s + 3999))) end
end
if ARGV[10] == '1' then
  -- the whole publish of tick t has landed (batches run in order on the shard's one node, and a
  -- claim never returns once replaced, so every earlier batch was accepted): readers take the
  -- shard's freshness from here (contract v2)
  redis.call('HSET', KEYS[1], 'pt', t, 'pat', now, 'rp', ARGV[11])
end
redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[7], '*', 'k', 'publish', 'ok', 1, 'why', 'ok', 'by', by,
  'f', fence, 't', t, 'at', now, 'n', n)
return {1, cur[1], cur[2], cur[3], cur[4], cur[5]}
