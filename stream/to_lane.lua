-- to_lane.lua: move an intake entry to its provider's lane (attempt 0), unless a job with its
-- id is already in the gateway's hands or was accepted within the sent-mark window: then the
-- entry is acknowledged with no record of its own (the first copy's record is the job's).
--
-- KEYS[1] source stream (the intake stream)
-- KEYS[2] lane stream of the provider
-- KEYS[3] jobs index of the shard (HASH job id -> provider id): every job in a lane, in flight
--         or waiting to retry
-- KEYS[4] sent mark of the job (sent:<id>)
-- ARGV[1] consumer group
-- ARGV[2] source entry id
-- ARGV[3] consumer that must own the entry
-- ARGV[4] job (raw JSON as received)
-- ARGV[5] provider id
-- ARGV[6] enqueued_at, unix ms
-- ARGV[7] job id
-- The lane's consumer group exists (Setup, or Store.ToLane before its first use of a lane).
-- Returns 1 when moved; 2 when acknowledged as a copy of a job already here or sent; 0 when the
-- entry is not pending for ARGV[3] (nothing changed).
--
-- The XADD is the first write on purpose: when Redis is out of memory it refuses the whole
-- script there, so new work waits in the intake and nothing is half done.
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[3] then
  return 0
end
if redis.call('HEXISTS', KEYS[3], ARGV[7]) == 1 or redis.call('EXISTS', KEYS[4]) == 1 then
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
  redis.call('XDEL', KEYS[1], ARGV[2])
  return 2
end
redis.call('XADD', KEYS[2], '*', 'job', ARGV[4], 'provider', ARGV[5], 'attempt', '0', 'enqueued_at', ARGV[6])
redis.call('HSET', KEYS[3], ARGV[7], ARGV[5])
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
return 1
