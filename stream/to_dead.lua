-- to_dead.lua: move an intake or lane entry to the dead stream.
--
-- KEYS[1] source stream
-- KEYS[2] dead stream
-- KEYS[3] sent mark of the job (sent:<id>; any key of the shard when the id is unknown)
-- ARGV[1] consumer group
-- ARGV[2] source entry id
-- ARGV[3] consumer that must own the entry
-- ARGV[4] dead stream cap (approximate MAXLEN; 0 = none)
-- ARGV[5..] the dead record as field, value pairs
-- Returns 1 when moved (or when the job's sent mark says another attempt was accepted and
-- recorded: then the entry is only acked, so the job keeps exactly one terminal record);
-- 0 when the entry is not pending for ARGV[3] (nothing changed).
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[3] then
  return 0
end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
if redis.call('EXISTS', KEYS[3]) == 1 then
  return 1
end
local args = {'XADD', KEYS[2]}
if tonumber(ARGV[4]) > 0 then
  table.insert(args, 'MAXLEN')
  table.insert(args, '~')
  table.insert(args, ARGV[4])
end
table.insert(args, '*')
for i = 5, #ARGV do
  table.insert(args, ARGV[i])
end
redis.call(unpack(args))
return 1
