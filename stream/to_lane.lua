-- to_lane.lua: move an intake entry to its provider's lane (attempt 0).
--
-- KEYS[1] source stream (the intake stream)
-- KEYS[2] lane stream of the provider
-- ARGV[1] consumer group
-- ARGV[2] source entry id
-- ARGV[3] consumer that must own the entry
-- ARGV[4] job (raw JSON as received)
-- ARGV[5] provider id
-- ARGV[6] enqueued_at, unix ms
-- The lane's consumer group exists (Setup, or Store.ToLane before its first use of a lane).
-- Returns 1 when moved; 0 when the entry is not pending for ARGV[3] (nothing changed).
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[3] then
  return 0
end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('XADD', KEYS[2], '*', 'job', ARGV[4], 'provider', ARGV[5], 'attempt', '0', 'enqueued_at', ARGV[6])
return 1
