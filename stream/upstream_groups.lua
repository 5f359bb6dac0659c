-- upstream_groups.lua: the consumer groups an upstream reads the record streams of one shard
-- with (the ledger, gone and dead streams), their lag and pending counts, in one round trip: a
-- constant number of commands per group, never a walk of a stream.
--
-- KEYS[1..n] record streams
-- Returns, for each stream in order, {length, {{name, pending, lag, estimated}, ...}}.
--
-- XINFO GROUPS leaves a group's lag empty (nil) when Redis cannot count it: when an entry was
-- deleted past the group's last delivered id (a dead record replayed or purged, an XDEL of the
-- upstream's) or its entries-read counter is not known. The lag is then worked out here:
--   * nothing past the last delivered id (it is at or past the last id added): 0, exact;
--   * the last delivered id before the first entry (the stream was trimmed past the group):
--     every entry the stream holds is unread, the length, exact;
--   * otherwise entries-added minus entries-read (the deletions past the group counted as
--     unread), at most the length, and marked estimated; the length when entries-read is
--     unknown too.
local function id_less(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  return am < bm or (am == bm and as < bs)
end

local function fields(flat)
  local f = {}
  for i = 1, #flat, 2 do
    f[flat[i]] = flat[i + 1]
  end
  return f
end

local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 0 then
    out[i] = {0, {}}
  else
    local s = fields(redis.call('XINFO', 'STREAM', key))
    local len = tonumber(s['length'])
    local added = tonumber(s['entries-added'])
    local first = nil
    if type(s['first-entry']) == 'table' then
      first = s['first-entry'][1]
    end
    local rows = {}
    for _, g in ipairs(redis.call('XINFO', 'GROUPS', key)) do
      local f = fields(g)
      local last = f['last-delivered-id']
      local lag, estimated = tonumber(f['lag']), 0
      if lag == nil then
        if first == nil or not id_less(last, s['last-generated-id']) then
          lag = 0
        elseif id_less(last, first) then
          lag = len
        else
          estimated = 1
          local read = tonumber(f['entries-read'])
          if read ~= nil and added ~= nil then
            lag = math.min(math.max(added - read, 0), len)
          else
            lag = len
          end
        end
      end
      table.insert(rows, {f['name'], tonumber(f['pending']), lag, estimated})
    end
    out[i] = {len, rows}
  end
end
return out
