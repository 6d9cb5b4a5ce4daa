-- Fragment (included with `--@include counting-days.lua`, not a script of its own): the day
-- summary of a user's key group (docs/counting.md, "Long windows: the day summary").
--
-- The summary indexes a prefix of the log (its first `prefix` bytes, as they stood at the last
-- maintenance) by UTC day, without moving any byte of it; members appended since form the
-- suffix. Two keys:
--   `<tag>:days`, the day table (small: cap checks read it first), big-endian:
--     [format u8 = 3][prefix u32][aggregates length u32][live aggregate bytes u32][runs u16]
--     [aggregated days u16], then
--     runs: [day u32][start u32][end u32]: runs of consecutive members of one day, 0-based
--       byte offsets of the log, end exclusive, ascending by day then start;
--     aggregated days: [day u32][start u32][end u32]: that day's aggregates in `<tag>:agg`,
--       ascending by day;
--   `<tag>:agg`, the aggregates: per day, each distinct member without timestamp and insertion
--     id once, written as such a member whose timestamp is the day's first millisecond and whose
--     insertion id holds its count (u32, then 12 zero bytes).
--
-- Maintenance parses only the suffix: its members extend the ranges, and each day they touch
-- gets its aggregates again (the old ones plus the new members, appended to `<tag>:agg`; the
-- old bytes become garbage, rewritten away when they outweigh the live ones). Days past the
-- retention leave the table; their bytes leave the log with its compaction, which deletes the
-- summary (rebuilt by the same maintenance from the whole log). A log whose members arrived far
-- out of time order (a backfill) is rewritten grouped by day once its runs outnumber its days.
--
-- Derived data: the log stays complete (I2), so readers that find the day table missing, or
-- ranges that no longer match it, read the whole log. Every rewrite of the log deletes both keys.

local DAY_MS = 86400000

-- The 8 bytes of a u64 below 2^53.
local function u64(x)
  local b = {0, 0, 0, 0, 0, 0, 0, 0}
  for i = 8, 1, -1 do b[i] = x % 256; x = (x - b[i]) / 256 end
  return string.char(unpack(b))
end

-- Timestamp of the member at p of buf (bytes p+1 .. p+8); -1 when wider than 48 bits.
local function tsAt(buf, p)
  local a, b, c, d, e, f, g, i = string.byte(buf, p + 1, p + 8)
  if a ~= 0 or b ~= 0 then return -1 end
  return ((((c * 256 + d) * 256 + e) * 256 + f) * 256 + g) * 256 + i
end

-- The day table's header: [format u8 = 3][prefix u32][aggregates length u32][live aggregate
-- bytes u32][runs u16][aggregated days u16], then the runs and the aggregated days, 12 bytes each.
local HEAD, ENTRY = 17, 12

-- Parses a day table's header: prefix, live aggregate bytes, the runs' and the aggregated days'
-- entries as strings; nil when absent, of another format, or not matching the log's and the
-- aggregates' lengths.
local function parseDays(s, logLen, aggLen)
  if not s or #s < HEAD then return nil end
  local format, prefix, aggBytes, live, nr, na = struct.unpack('>BI4I4I4I2I2', s)
  if format ~= 3 or prefix > logLen or aggBytes ~= aggLen or #s ~= HEAD + ENTRY * (nr + na) then return nil end
  local runsEnd = HEAD + ENTRY * nr
  return prefix, live, string.sub(s, HEAD + 1, runsEnd), string.sub(s, runsEnd + 1)
end

-- Entries (12 bytes each, ascending by day) as {day, a, b}, and back.
local function decode(entries)
  local out, pos = {}, 1
  while pos <= #entries do
    local d, a, b
    d, a, b, pos = struct.unpack('>I4I4I4', entries, pos)
    out[#out + 1] = {d, a, b}
  end
  return out
end
local function encode(list)
  local out = {}
  for i, e in ipairs(list) do out[i] = struct.pack('>I4I4I4', e[1], e[2], e[3]) end
  return table.concat(out)
end

-- Splits entries at the first whose day is at least `day`, scanning from the front.
local function firstFrom(entries, day)
  local pos = 1
  while pos <= #entries and struct.unpack('>I4', entries, pos) < day do pos = pos + ENTRY end
  return string.sub(entries, 1, pos - 1), string.sub(entries, pos)
end

-- Splits entries at the first whose day is at least `day`, scanning from the back (for days
-- near the end: the usual maintenance touches the last one or two).
local function lastFrom(entries, day)
  local pos = #entries - ENTRY + 1
  while pos >= 1 and struct.unpack('>I4', entries, pos) >= day do pos = pos - ENTRY end
  return string.sub(entries, 1, pos + ENTRY - 1), string.sub(entries, pos + ENTRY)
end

-- Adds `m`'s count (1 for a member, its count for an aggregate) under its key.
local function tally(counts, keys, buf, p, len, count)
  local key = string.sub(buf, p, p) .. string.sub(buf, p + 25, p + len - 1)
  local c = counts[key]
  if c == nil then
    keys[#keys + 1] = key
    counts[key] = count
  else
    counts[key] = c + count
  end
end

-- A day's aggregates: its old ones (bytes of `<tag>:agg`, or '') plus the members `added`.
local function aggregate(day, old, added, lengths)
  local counts, keys = {}, {}
  local q = 1
  while q <= #old do
    local len = lengths[string.byte(old, q)]
    tally(counts, keys, old, q, len, struct.unpack('>I4', old, q + 9))
    q = q + len
  end
  for _, m in ipairs(added) do tally(counts, keys, m, 1, #m, 1) end
  local out, stamp, pad = {}, u64(day * DAY_MS), string.rep('\0', 12)
  for i, key in ipairs(keys) do
    out[i] = string.sub(key, 1, 1) .. stamp .. struct.pack('>I4', counts[key]) .. pad .. string.sub(key, 2)
  end
  return table.concat(out)
end

-- Extends the summary of `log` (keys `days`, `aggKey`) to the whole log, dropping days older than
-- `trim`'s. Its cost is the suffix's and the touched days' (and, rarely, a rewrite's: of the
-- aggregates when garbage outweighs them, of the log after a backfill). Returns whether it
-- rewrote the log (the regrouping after a backfill); deletes the summary when the log holds a
-- layout `lengths` does not know.
local function summarize(log, days, aggKey, lengths, trim)
  local rewrote = false
  local logLen = redis.call('STRLEN', log)
  local aggLen = redis.call('STRLEN', aggKey)
  local prefix, live, runs, aggs = parseDays(redis.call('GET', days), logLen, aggLen)
  if not prefix then
    -- No usable summary: one from the whole log.
    prefix, live, runs, aggs = 0, 0, '', ''
    if aggLen > 0 then redis.call('DEL', aggKey) end
    aggLen = 0
  end
  local trimDay = math.floor(trim / DAY_MS)
  -- Days past the retention leave the table (their bytes stay garbage until compaction).
  local gone
  runs = select(2, firstFrom(runs, trimDay))
  gone, aggs = firstFrom(aggs, trimDay)
  for _, e in ipairs(decode(gone)) do live = live - (e[3] - e[2]) end
  -- The suffix, regrouped by day in place (same bytes, so SETRANGE: the cost is the suffix's):
  -- members past the retention first (garbage, in no run), then each day's in ascending order,
  -- one run per day. A day continued by the next maintenance's suffix meets its earlier run, so
  -- time-ordered traffic keeps about one run per day.
  local tail = prefix < logLen and redis.call('GETRANGE', log, prefix, -1) or ''
  local touched, order, expired = {}, {}, {}
  local p, n = 1, #tail
  while p <= n do
    local len = lengths[string.byte(tail, p)]
    if not len then
      redis.call('DEL', days, aggKey)
      return false
    end
    local ts = tsAt(tail, p)
    local m = string.sub(tail, p, p + len - 1)
    if ts >= trim then
      local day = math.floor(ts / DAY_MS)
      local list = touched[day]
      if not list then
        list = {}
        touched[day] = list
        order[#order + 1] = day
      end
      list[#list + 1] = m
    else
      expired[#expired + 1] = m
    end
    p = p + len
  end
  table.sort(order)
  local grouped = {table.concat(expired)}
  local offset = prefix + #grouped[1]
  local added = {}
  for _, day in ipairs(order) do
    local bytes = table.concat(touched[day])
    grouped[#grouped + 1] = bytes
    added[#added + 1] = {day, offset, offset + #bytes}
    offset = offset + #bytes
  end
  local regrouped = table.concat(grouped)
  if regrouped ~= tail then redis.call('SETRANGE', log, prefix, regrouped) end
  -- The runs: the new ones after the kept ones from the first touched day on (decoded), merged
  -- where one day's runs meet.
  if #added > 0 then
    local head, rest = lastFrom(runs, added[1][1])
    local list = decode(rest)
    for _, r in ipairs(added) do list[#list + 1] = r end
    table.sort(list, function(x, y) return x[1] < y[1] or (x[1] == y[1] and x[2] < y[2]) end)
    local merged = {}
    for _, r in ipairs(list) do
      local last = merged[#merged]
      if last and last[1] == r[1] and last[3] == r[2] then last[3] = r[3] else merged[#merged + 1] = r end
    end
    runs = head .. encode(merged)
  end
  -- The touched days' aggregates: the old ones plus the new members, appended.
  local appended, at = {}, aggLen
  if #order > 0 then
    local head, rest = lastFrom(aggs, order[1])
    local byDay, list = {}, decode(rest)
    for _, e in ipairs(list) do byDay[e[1]] = e end
    for _, day in ipairs(order) do
      local old = byDay[day]
      local bytes = old and redis.call('GETRANGE', aggKey, old[2], old[3] - 1) or ''
      local blob = aggregate(day, bytes, touched[day], lengths)
      appended[#appended + 1] = blob
      live = live + #blob - (old and old[3] - old[2] or 0)
      if old then
        old[2], old[3] = at, at + #blob
      else
        list[#list + 1] = {day, at, at + #blob}
      end
      at = at + #blob
    end
    table.sort(list, function(x, y) return x[1] < y[1] end)
    aggs = head .. encode(list)
  end
  if #appended > 0 then redis.call('APPEND', aggKey, table.concat(appended)) end
  local nr, na = #runs / ENTRY, #aggs / ENTRY
  -- Fragmented (a backfill or a replay far out of time order): the log is rewritten grouped by
  -- day, one run per day (members past the retention dropped, as compaction drops them).
  if nr > na + 16 then
    local parts, grouped2, pos = {}, {}, 0
    for _, r in ipairs(decode(runs)) do
      local bytes = redis.call('GETRANGE', log, r[2], r[3] - 1)
      parts[#parts + 1] = bytes
      local last = grouped2[#grouped2]
      if last and last[1] == r[1] then last[3] = last[3] + #bytes
      else grouped2[#grouped2 + 1] = {r[1], pos, pos + #bytes} end
      pos = pos + #bytes
    end
    redis.call('SET', log, table.concat(parts))
    runs, logLen, nr = encode(grouped2), pos, #grouped2
    rewrote = true
  end
  -- Garbage (aggregates replaced or past the retention) over half the key: rewritten.
  if at > 2 * live + 4096 then
    local parts, list, pos = {}, decode(aggs), 0
    for i, e in ipairs(list) do
      parts[i] = redis.call('GETRANGE', aggKey, e[2], e[3] - 1)
      e[2], e[3] = pos, pos + #parts[i]
      pos = pos + #parts[i]
    end
    redis.call('SET', aggKey, table.concat(parts))
    aggs, at, live = encode(list), pos, pos
  end
  if nr == 0 or nr > 65535 or na > 65535 then
    -- Nothing inside the retention, or more runs than the table counts: no summary.
    redis.call('DEL', days, aggKey)
    return rewrote
  end
  redis.call('SET', days, struct.pack('>BI4I4I4I2I2', 3, logLen, at, live, nr, na) .. runs .. aggs)
  return rewrote
end
