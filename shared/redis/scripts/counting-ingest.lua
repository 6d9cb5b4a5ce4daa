#!lua flags=allow-cross-slot-keys
--@const CAP_LOG_MIN_LOG_BYTES
-- countingIngest (shared/counting/store.ts): records a batch of users' action events, exactly
-- once per identity and dedup window, keeping each user's key group (set + log) whole.
-- KEYS: the first user's set and log. ARGV: trim point, settings, key prefix, packed arrivals
-- (described below). Reply: {added, restamped, repaired, migrated}.
--
-- One script call per batch of users (per cluster node), not per user: a call's fixed cost
-- (ioredis builds a command, five promises and a buffer per call; Redis looks the script up and
-- sets up Lua per call) was most of an event's cost, because a batch rarely holds two events of
-- one user. All of a call's data is one packed argument: an argument costs the client far more
-- than its bytes. The hot path of an arrival is ZADD NX of its identity (new identity: counted)
-- + APPEND; only an identity already present costs a ZSCORE (and, when the arrival is a window
-- or more *before* the latest occurrence, a ZRANGEBYSCORE of the occurrences near it).
--
-- Keys of several users in one call (several hash slots) need Redis ≥ 7.0 and the script flag
-- `allow-cross-slot-keys`; in a cluster they must all be on the receiving node. The script first
-- runs `EXISTS set log` for every user (the I3 check below): a key another node owns fails that
-- command, so a call routed with a stale slot map fails before it writes anything, and the store
-- retries its users one call each (each routed, and redirected, by its own keys).
--
-- Invariants of a user's key group (checked on every call; docs/counting.md):
--  I1 every member of the set is one counted occurrence: per identity at most one identity-form
--     member (the latest occurrence, score = its timestamp) and earlier occurrences as full
--     members (score = their timestamp); two occurrences of an identity are ≥ window apart;
--  I2 the log is the full members of exactly those occurrences, each once (plus members older
--     than the trim point until the next compaction), so STRLEN(log) ≥ ZCARD × member length;
--  I3 both keys exist or neither does (same TTL, written together). Redis loses whole keys
--     (eviction, expiry, a stray DEL), never parts of one, so I3 is what a fault breaks: a
--     missing key is rebuilt from the other before anything is counted — a lost set would
--     otherwise make every redelivery count again, a lost log would under-count.
-- Expired members stay in the log until it is compacted (readers skip them by timestamp): a
-- rewrite when ≥ 25 % of it is garbage keeps compaction amortised O(1) per event.
--
-- Helpers of the rare paths (a repair, a v1 import, a compaction, an arrival a window or more
-- from its identity's latest occurrence), built per user only when one is taken.
local function helpers(set, log, window, lengths)
  local h = {}
  local near = window > 0 and window - 1 or 0
  for _, n in pairs(lengths) do
    if not h.shortest or n < h.shortest then h.shortest = n end
  end
  -- Timestamp of a full member: u64 at bytes 2..9; wider than 48 bits is never valid (-1).
  local function tsOf(m)
    local a, b, c, d, e, f, g, i = string.byte(m, 2, 9)
    if a ~= 0 or b ~= 0 then return -1 end
    return ((((c * 256 + d) * 256 + e) * 256 + f) * 256 + g) * 256 + i
  end
  local function identityOf(m) return string.sub(m, 1, 1) .. string.sub(m, 10) end
  local function isFull(x) return #x == lengths[string.byte(x, 1)] end
  local function fullOf(id, ts)
    local b = {0, 0, 0, 0, 0, 0, 0, 0}
    for i = 8, 3, -1 do b[i] = ts % 256; ts = (ts - b[i]) / 256 end
    return string.sub(id, 1, 1) .. string.char(unpack(b)) .. string.sub(id, 2)
  end
  h.tsOf, h.isFull, h.fullOf = tsOf, isFull, fullOf
  -- Calls fn(member, ts) for each member of a packed log; false at a layout it does not know.
  function h.walk(buf, fn)
    local p, n = 1, #buf
    while p <= n do
      local len = lengths[string.byte(buf, p)]
      if not len then return false end
      local m = string.sub(buf, p, p + len - 1)
      fn(m, tsOf(m))
      p = p + len
    end
    return true
  end
  -- An arrival a window or more from its identity's latest occurrence s.
  function h.beyond(m, id, ts, s)
    if ts > s then
      -- The new latest: the previous one becomes a full member.
      redis.call('ZADD', set, s, fullOf(id, s))
      redis.call('ZADD', set, ts, id)
      return 0
    end
    -- Earlier: compare with the earlier occurrences less than a window from it.
    for _, x in ipairs(redis.call('ZRANGEBYSCORE', set, ts - near, ts + near)) do
      if isFull(x) and identityOf(x) == id then
        if x == m then return 1 end
        return 2
      end
    end
    redis.call('ZADD', set, ts, m)
    return 0
  end
  -- An arrival: 0 = counted (recorded in the set), 1 = the same bytes again, 2 = the same
  -- identity less than a window from a counted occurrence (re-stamped).
  function h.arrive(m, ts)
    local id = identityOf(m)
    if redis.call('ZADD', set, 'NX', ts, id) == 1 then return 0 end
    local s = tonumber(redis.call('ZSCORE', set, id))
    if ts == s then return 1 end
    if math.abs(ts - s) < window then return 2 end
    return h.beyond(m, id, ts, s)
  end
  -- Records an occurrence already known to be counted (rebuilding the set from the log).
  function h.record(m, ts)
    local id = identityOf(m)
    if redis.call('ZADD', set, 'NX', ts, id) == 1 then return end
    local s = tonumber(redis.call('ZSCORE', set, id))
    if ts > s then
      redis.call('ZADD', set, s, fullOf(id, s))
      redis.call('ZADD', set, ts, id)
    elseif ts < s then
      redis.call('ZADD', set, ts, m)
    end
  end
  return h
end

--@include counting-days.lua
--@include counting-caplog.lua

-- ARGV: trim point (now − retention − window), settings (`<ttl ms> <window ms> <import v1 0|1>
-- <day summary 0|1> <version:member length,…>`), key prefix, packed arrivals: per user
-- [flags u8: 1 = maintain][user id length u8][user id][arrival count u32 BE][members back to
-- back, each delimited by its version's length]. A user flagged for maintenance (the first call
-- of the day for it; the client keeps count) is also trimmed, compacted, its day summary extended
-- (with day summaries: counting-days.lua), given its TTLs, and on
-- its first v2 write its v1 keys are imported.
local trim, settings, prefix, packed = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
local ttl, window, importV1, withDays = string.match(settings, '^(%d+) (%d+) ([01]) ([01]) ')
if not ttl then return redis.error_reply('ERR countingIngest: malformed settings argument') end
window = tonumber(window)
local lengths = {}
for version, n in string.gmatch(string.match(settings, ' ([%d:,]*)$'), '(%d+):(%d+)') do
  lengths[tonumber(version)] = tonumber(n)
end

-- Pass 1, before any write: parse the users and check every key group (EXISTS set log). In a
-- cluster a key this node does not own fails here, so a misrouted call writes nothing.
local users, pos, size = {}, 1, #packed
while pos <= size do
  local flags, idLength = string.byte(packed, pos, pos + 1)
  local uid = string.sub(packed, pos + 2, pos + 1 + idLength)
  local c1, c2, c3, c4 = string.byte(packed, pos + 2 + idLength, pos + 5 + idLength)
  if not c4 or idLength == 0 then return redis.error_reply('ERR countingIngest: malformed arrivals argument') end
  local count = ((c1 * 256 + c2) * 256 + c3) * 256 + c4
  pos = pos + 6 + idLength
  local first = pos
  for _ = 1, count do
    local len = lengths[string.byte(packed, pos) or -1]
    if not len then return redis.error_reply('ERR countingIngest: unknown layout version in arrivals') end
    pos = pos + len
  end
  if pos > size + 1 then return redis.error_reply('ERR countingIngest: truncated arrivals argument') end
  local tag = prefix .. ':v2:{' .. uid .. '}'
  local set, log = tag, tag .. ':log'
  users[#users + 1] = {set, log, flags, uid, first, count, redis.call('EXISTS', set, log)}
end
if #users == 0 or users[1][1] ~= KEYS[1] or users[1][2] ~= KEYS[2] then
  return redis.error_reply('ERR countingIngest: KEYS must be the first user\'s set and log')
end

local added, restamped, repaired, migrated = 0, 0, 0, 0
for ui = 1, #users do
  local u = users[ui]
  local set, log, maintain, present, p = u[1], u[2], u[3] % 2 == 1, u[7], u[5]
  local H
  -- rebuild: the log was rewritten (or rebuilt) in this call, so its cap log is rebuilt from it.
  -- A group this call creates gets a new cap log too: one left over from keys lost before
  -- (the set and the log evicted, the cap log not) holds events this group no longer records.
  local touched, counted, rebuild = false, {}, present == 0
  if present == 1 then
    -- I3 broken: rebuild the missing key from the other before judging any arrival.
    H = helpers(set, log, window, lengths)
    repaired, touched = repaired + 1, true
    if redis.call('EXISTS', set) == 1 then
      local parts, all = {}, redis.call('ZRANGE', set, 0, -1, 'WITHSCORES')
      for i = 1, #all, 2 do
        local x = all[i]
        parts[#parts + 1] = H.isFull(x) and x or H.fullOf(x, tonumber(all[i + 1]))
      end
      redis.call('SET', log, table.concat(parts))
      -- The rebuilt log is in set order: the day summary no longer describes it.
      redis.call('DEL', set .. ':days', set .. ':agg')
      rebuild = true
    else
      H.walk(redis.call('GET', log), function(m, ts) if ts >= trim then H.record(m, ts) end end)
    end
  elseif present == 0 and maintain and importV1 == '1' then
    -- First v2 write for a user with v1 keys: replay them through the v2 rule, then drop them.
    local oldTag = prefix .. ':v1:{' .. u[4] .. '}'
    local oldSet, oldLog = oldTag, oldTag .. ':log'
    if redis.call('EXISTS', oldSet, oldLog) > 0 then
      H = helpers(set, log, window, lengths)
      migrated, touched = migrated + 1, true
      local function take(m, ts)
        if ts >= trim and H.arrive(m, ts) == 0 then counted[#counted + 1] = m end
      end
      if redis.call('EXISTS', oldLog) == 1 then
        H.walk(redis.call('GET', oldLog), take)
      else
        for _, m in ipairs(redis.call('ZRANGE', oldSet, 0, -1)) do take(m, H.tsOf(m)) end
      end
      redis.call('UNLINK', oldSet, oldLog)
    end
  end

  local imported = #counted
  for _ = 1, u[6] do
    local len = lengths[string.byte(packed, p)]
    local m = string.sub(packed, p, p + len - 1)
    local t1, t2, t3, t4, t5, t6 = string.byte(packed, p + 3, p + 8)
    local ts = ((((t1 * 256 + t2) * 256 + t3) * 256 + t4) * 256 + t5) * 256 + t6
    p = p + len
    local id = string.sub(m, 1, 1) .. string.sub(m, 10)
    local r = 0
    -- The hot path: a new identity is counted (ZADD NX of the identity, APPEND of the member).
    -- The score as an integer string: a Lua number would be formatted as a float (%.17g), a
    -- measurable share of Redis's time per event.
    if redis.call('ZADD', set, 'NX', string.format('%d', ts), id) == 0 then
      local s = tonumber(redis.call('ZSCORE', set, id))
      if ts == s then
        r = 1
      elseif math.abs(ts - s) < window then
        r = 2
      else
        H = H or helpers(set, log, window, lengths)
        r = H.beyond(m, id, ts, s)
      end
    end
    if r == 0 then
      counted[#counted + 1] = m
    elseif r == 2 then
      restamped = restamped + 1
    end
  end
  added = added + #counted - imported
  -- One APPEND per user: the log order is the arrival order all the same.
  if #counted > 0 then
    local logLength = redis.call('APPEND', log, table.concat(counted))
    if not rebuild and capAppend(set, counted, lengths, logLength, CAP_LOG_MIN_LOG_BYTES) then touched = true end
  end

  -- Trimming only reclaims memory (readers and the dedup rule ignore what is past the trim
  -- point), so once a day per user is enough; a group this call created holds nothing to trim
  -- (arrivals and imported v1 members are past the trim point). Outside maintenance a pure
  -- redelivery changes nothing.
  local gone = false
  local days, agg = set .. ':days', set .. ':agg'
  if maintain and present ~= 0 and redis.call('ZREMRANGEBYSCORE', set, '-inf', '(' .. string.format('%d', trim)) > 0 then
    local card = redis.call('ZCARD', set)
    if card == 0 then
      redis.call('DEL', set, log, days, agg, set .. ':cap', set .. ':tix')
      gone = true
    else
      H = H or helpers(set, log, window, lengths)
      local len = redis.call('STRLEN', log)
      if (len - card * H.shortest) * 4 > len then
        local kept = {}
        if H.walk(redis.call('GET', log), function(m, ts) if ts >= trim then kept[#kept + 1] = m end end) then
          redis.call('SET', log, table.concat(kept))
          redis.call('DEL', days, agg)
          touched, rebuild = true, true
        end
      end
    end
  end
  -- With day summaries, maintenance extends the user's summary over what arrived since
  -- (counting-days.lua): a cap check over a long window then reads whole old days as counts.
  if maintain and withDays == '1' and not gone and redis.call('EXISTS', log) == 1 then
    if summarize(log, days, agg, lengths, trim) then rebuild = true end
  end
  -- The cap log follows every rewrite of the log; maintenance also heals one lost alone.
  if not gone and (rebuild or (maintain and capBroken(set, CAP_LOG_MIN_LOG_BYTES))) then
    capBuild(set, lengths, CAP_LOG_MIN_LOG_BYTES)
    touched = true
  end
  -- The keys get the TTL together (I3): at maintenance, and whenever a key is new, rebuilt or
  -- rewritten (SET drops a TTL). The TTL has a day of slack over what it must cover, and the
  -- client maintains each user it writes at least once a day. (The summary is derived data:
  -- losing it alone costs speed, not counts.)
  if not gone and (maintain or touched or (present ~= 2 and #counted > 0)) then
    redis.call('PEXPIRE', set, ttl)
    redis.call('PEXPIRE', log, ttl)
    redis.call('PEXPIRE', days, ttl)
    redis.call('PEXPIRE', agg, ttl)
    redis.call('PEXPIRE', set .. ':cap', ttl)
    redis.call('PEXPIRE', set .. ':tix', ttl)
  end
end
return {added, restamped, repaired, migrated}
