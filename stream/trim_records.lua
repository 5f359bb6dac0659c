#!lua flags=allow-oom
-- trim_records.lua: keep the record streams of a shard (the ledger, gone and dead streams)
-- near their bounds, never removing an entry that a consumer group of an upstream has not read
-- and acknowledged. It runs when Redis is out of memory: it only frees memory.
--
-- KEYS[1..n] record streams
-- ARGV[1..n] the bound of each, in entries (0 = none)
-- Returns, for each stream, how many entries it held over its bound before the trim.
--
-- A stream no group reads is trimmed to about its bound (XTRIM MAXLEN ~: whole nodes only, so
-- it keeps a few more). One that groups read is trimmed only below what every group has read:
-- the lower of its oldest pending entry and its last delivered one (MINID ~), and
-- no more entries than it holds over its bound (LIMIT).
local function id_less(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  return am < bm or (am == bm and as < bs)
end

local out = {}
for i, key in ipairs(KEYS) do
  local bound = tonumber(ARGV[i])
  local over = 0
  if bound > 0 then
    over = redis.call('XLEN', key) - bound
  end
  out[i] = math.max(over, 0)
  if over > 0 then
    local groups = redis.call('XINFO', 'GROUPS', key)
    if #groups == 0 then
      redis.call('XTRIM', key, 'MAXLEN', '~', bound, 'LIMIT', over)
    else
      local safe = nil
      for _, g in ipairs(groups) do
        local f = {}
        for j = 1, #g, 2 do
          f[g[j]] = g[j + 1]
        end
        -- What the group has not read starts after its last delivered id; what it has read and
        -- not acknowledged, at its oldest pending entry. A group set back (XGROUP SETID, to read
        -- again) may have the former below the latter: the lower of the two holds.
        local read = f['last-delivered-id']
        if tonumber(f['pending']) > 0 then
          local oldest = redis.call('XPENDING', key, f['name'])[2]
          if id_less(oldest, read) then
            read = oldest
          end
        end
        if safe == nil or id_less(read, safe) then
          safe = read
        end
      end
      redis.call('XTRIM', key, 'MINID', '~', safe, 'LIMIT', over)
    end
  end
end
return out
