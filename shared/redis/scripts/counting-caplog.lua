-- Fragment (included with `--@include counting-caplog.lua`, not a script of its own): the cap log
-- of a user's key group, the compact copy of its events that cap checks read (docs/counting.md,
-- "The cap log"). Two keys:
--   `<tag>:cap`, a string: [format u8] then records, big-endian:
--     a tuple:  [0xFFFF][version u8][the member's bytes from its first entity id on]
--               (the entity ids of that layout version: ad … advertiser, then the identities);
--               tuples are numbered 0, 1, … in the order they appear;
--     an event: [tuple u16 < 0xFFFF][action u8][view type u8][timestamp u48] (10 bytes);
--     format 1 = kept; format 0 = not kept (more than 65,535 tuples, or a layout this script
--     does not know): readers read the log;
--   `<tag>:tix`, a hash: tuple bytes → tuple number (what an append needs to reuse a tuple).
-- A user's events share a few hundred entity tuples, so an event costs 10 bytes plus its share
-- of its tuple's, against the member's 59–83: a check reads and scans a fraction of the bytes,
-- and probes its id tables once per tuple instead of once per event.
--
-- Only a log of `minLog` bytes or more gets a cap log (the including script's --@const
-- CAP_LOG_MIN_LOG_BYTES, passed to each function: a fragment holds no directives):
-- readers take a shorter log whole from the prefix they read beside the cap log
-- (shared/counting/store.ts), and most users' logs are short — a cap log of a few events would
-- cost more memory and ingest time than it saves.
--
-- Derived data, like the day summary: the log stays the record. Invariant C: when the cap log
-- is kept, its events at or after the trim point are the log's members at or after it (as a
-- multiset: the day summary reorders the log's bytes, counting does not depend on order).
-- Every write of a member to the log writes it here in the same script; every rewrite of the
-- log (repair, compaction, the day summary's regrouping) rebuilds both keys from it; a key lost
-- alone (eviction) is rebuilt at the user's next counted event or maintenance. Readers that find
-- no cap log read the log.

local CAP_KEPT, CAP_NOT_KEPT = '\1', '\0'
local CAP_MAX_TUPLES = 65535

-- Appends the records of `members` (full members, in order) to `out`, numbering new tuples from
-- `n` in `tix`; returns the new tuple count, or nil when it would pass CAP_MAX_TUPLES.
local function capRecords(tix, members, n, out)
  for _, m in ipairs(members) do
    local t = string.sub(m, 1, 1) .. string.sub(m, 28)
    local i = redis.call('HGET', tix, t)
    if i then
      i = tonumber(i)
    else
      if n >= CAP_MAX_TUPLES then return nil end
      i, n = n, n + 1
      redis.call('HSET', tix, t, i)
      out[#out + 1] = '\255\255' .. t
    end
    -- Tuple, action and view type, and the timestamp's low 6 bytes (its top two are zero).
    out[#out + 1] = string.char(math.floor(i / 256), i % 256) .. string.sub(m, 26, 27) .. string.sub(m, 4, 9)
  end
  return n
end

-- Marks the cap log not kept (readers read the log) and drops its index.
local function capNotKept(cap, tix)
  redis.call('DEL', tix)
  redis.call('SET', cap, CAP_NOT_KEPT)
end

-- Rebuilds the cap log of `tag` from its log (`lengths`: member length by layout version); none
-- for a log shorter than `minLog` bytes.
local function capBuild(tag, lengths, minLog)
  local cap, tix = tag .. ':cap', tag .. ':tix'
  redis.call('DEL', cap, tix)
  local buf = redis.call('GET', tag .. ':log')
  if not buf or #buf < minLog then return end
  local members, p, size = {}, 1, #buf
  while p <= size do
    local len = lengths[string.byte(buf, p)]
    if not len then
      capNotKept(cap, tix)
      return
    end
    members[#members + 1] = string.sub(buf, p, p + len - 1)
    p = p + len
  end
  local out = {CAP_KEPT}
  if capRecords(tix, members, 0, out) then
    redis.call('SET', cap, table.concat(out))
  else
    capNotKept(cap, tix)
  end
end

-- The state of the cap log of `tag`: 'off' (not kept), 'none' (no cap log), 'lost' (kept, its
-- index lost alone) or 'kept', and its tuple count. A kept cap log holds a tuple (it is built from
-- a log of minLog bytes or more), so an empty index (an empty hash does not exist) is a lost one.
local function capState(tag)
  local head = redis.call('GETRANGE', tag .. ':cap', 0, 0)
  if head == CAP_NOT_KEPT then return 'off', 0 end
  if head ~= CAP_KEPT then return 'none', 0 end
  local n = redis.call('HLEN', tag .. ':tix')
  return n > 0 and 'kept' or 'lost', n
end

-- After `members` were appended to the log of `tag`, now `logLength` bytes: appends them to its
-- cap log, or builds the cap log from the log when the log has none (or has lost its index) and
-- is long enough for one. Returns true when it (re)wrote the keys whole (SET drops a TTL: the
-- caller gives them the group's again).
local function capAppend(tag, members, lengths, logLength, minLog)
  local state, n = capState(tag)
  if state == 'off' or (state == 'none' and logLength < minLog) then return false end
  if state == 'kept' then
    local cap, tix = tag .. ':cap', tag .. ':tix'
    local out = {}
    n = capRecords(tix, members, n, out)
    if n then
      redis.call('APPEND', cap, table.concat(out))
      return false
    end
    capNotKept(cap, tix)
    return true
  end
  capBuild(tag, lengths, minLog)
  return true
end

-- Whether the cap log of `tag` is missing (its log long enough for one) or has lost its index (a
-- key evicted alone).
local function capBroken(tag, minLog)
  local state = capState(tag)
  if state == 'none' then return redis.call('STRLEN', tag .. ':log') >= minLog end
  return state == 'lost'
end
