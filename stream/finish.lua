-- finish.lua: record a terminal outcome and remove the lane entry.
--
-- KEYS[1] source stream (a lane)
-- KEYS[2] results (ledger) stream
-- KEYS[3] gone stream
-- KEYS[4] sent mark of the job (sent:<id>)
-- KEYS[5] gone mark of the endpoint (gonemark:<hash>)
-- ARGV[1]  consumer group
-- ARGV[2]  source entry id
-- ARGV[3]  consumer that must own the entry
-- ARGV[4]  "1" to set the sent mark
-- ARGV[5]  sent mark TTL, ms
-- ARGV[6]  "1" to set the gone mark and write the gone stream
-- ARGV[7]  gone mark TTL, ms
-- ARGV[8]  results cap (approximate MAXLEN; 0 = none)
-- ARGV[9]  gone cap (approximate MAXLEN; 0 = none)
-- ARGV[10] number of ledger field/value arguments that follow (n)
-- ARGV[11 .. 10+n] ledger record, field/value pairs
-- ARGV[11+n ..]    gone record, field/value pairs
-- Returns 1 when recorded; 0 when the entry is not pending for ARGV[3] (nothing changed).
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[3] then
  return 0
end

local function xadd(key, cap, first, last)
  local args = {'XADD', key}
  if tonumber(cap) > 0 then
    table.insert(args, 'MAXLEN')
    table.insert(args, '~')
    table.insert(args, cap)
  end
  table.insert(args, '*')
  for i = first, last do
    table.insert(args, ARGV[i])
  end
  redis.call(unpack(args))
end

local n = tonumber(ARGV[10])
if ARGV[4] == '1' then
  redis.call('SET', KEYS[4], '1', 'PX', ARGV[5])
end
if ARGV[6] == '1' then
  redis.call('SET', KEYS[5], '1', 'PX', ARGV[7])
  xadd(KEYS[3], ARGV[9], 11 + n, #ARGV)
end
xadd(KEYS[2], ARGV[8], 11, 10 + n)
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
return 1
