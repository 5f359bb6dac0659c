-- take.lua: what the scripts that move one entry or write a dead record share (Go puts this
-- file in front of each when it builds them): take for ack.lua, to_dead.lua and to_delayed.lua,
-- xadd_capped for the dead records of those and of promote.lua, read_intake.lua and reclaim.lua.

-- take acknowledges and deletes entry id of stream when it is pending in group for consumer,
-- and returns true; false when it is not (another consumer took it over, or it is done):
-- then nothing changed. Every script that moves an entry starts with it.
local function take(stream, group, id, consumer)
  local p = redis.call('XPENDING', stream, group, id, id, 1)
  if #p == 0 or p[1][2] ~= consumer then
    return false
  end
  redis.call('XACK', stream, group, id)
  redis.call('XDEL', stream, id)
  return true
end

-- xadd_capped appends fields to stream, with an approximate MAXLEN when cap > 0.
local function xadd_capped(stream, cap, fields)
  local args = {'XADD', stream}
  if tonumber(cap) > 0 then
    table.insert(args, 'MAXLEN')
    table.insert(args, '~')
    table.insert(args, cap)
  end
  table.insert(args, '*')
  for _, v in ipairs(fields) do
    table.insert(args, v)
  end
  return redis.call(unpack(args))
end
