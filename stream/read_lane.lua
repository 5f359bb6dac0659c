-- read_lane.lua: read new entries of a provider's two lanes for this consumer, in one call, as
-- many as the caller has slots and tokens for: bulk first up to its owed share, then the
-- transactional lane, then bulk with what transactional jobs left, within bulk's own limit.
--
-- KEYS[1] the provider's transactional lane
-- KEYS[2] its bulk lane
-- ARGV[1] consumer group
-- ARGV[2] this consumer
-- ARGV[3] at most this many entries in all
-- ARGV[4] bulk entries to read first (bulk's owed share; 0 when it is not owed)
-- ARGV[5] at most this many bulk entries in all
-- Returns {n_tx, n_bulk, last_tx, last_bulk, id, {field, value, ...}, ...}: how many entries of
-- each lane follow (transactional first); the group's last delivered id of each lane when the
-- read left the lanes drained (the caller then waits for what comes after them), '' otherwise;
-- then the entries.
local total, bulkFirst, bulkMax = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])

local function read(lane, count)
  if count <= 0 then
    return {}
  end
  local r = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', count, 'STREAMS', lane, '>')
  if not r then
    return {}
  end
  return r[1][2]
end

local bulk = read(KEYS[2], math.min(bulkFirst, bulkMax, total))
local tx = read(KEYS[1], total - #bulk)
local more = read(KEYS[2], math.min(bulkMax, total - #tx) - #bulk)
for _, e in ipairs(more) do
  table.insert(bulk, e)
end

-- last_delivered is the group's last delivered id on lane.
local function last_delivered(lane)
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', lane)) do
    local f = {}
    for i = 1, #g, 2 do
      f[g[i]] = g[i + 1]
    end
    if f['name'] == ARGV[1] then
      return f['last-delivered-id']
    end
  end
  return '0-0'
end

local lastTx, lastBulk = '', ''
if #tx + #bulk == 0 then
  lastTx, lastBulk = last_delivered(KEYS[1]), last_delivered(KEYS[2])
end
local out = {#tx, #bulk, lastTx, lastBulk}
for _, e in ipairs(tx) do
  table.insert(out, e[1])
  table.insert(out, e[2])
end
for _, e in ipairs(bulk) do
  table.insert(out, e[1])
  table.insert(out, e[2])
end
return out
