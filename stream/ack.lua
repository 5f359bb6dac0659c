-- ack.lua: acknowledge and delete an entry without writing anything else (a redelivered job
-- whose sent mark exists: its first attempt already wrote the ledger record).
--
-- KEYS[1] source stream
-- ARGV[1] consumer group
-- ARGV[2] source entry id
-- ARGV[3] consumer that must own the entry
-- Returns 1 when removed; 0 when the entry is not pending for ARGV[3] (nothing changed).
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[3] then
  return 0
end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
return 1
