#!lua flags=allow-oom
-- ack.lua: acknowledge and delete a lane entry without writing anything else (a redelivered job
-- that was accepted already: its first attempt already wrote the ledger record). It runs when Redis
-- is out of memory: it only frees memory.
--
-- KEYS[1] source stream (a lane)
-- KEYS[2] jobs index of the shard (HASH job id -> provider)
-- ARGV[1] consumer group
-- ARGV[2] source entry id
-- ARGV[3] consumer that must own the entry
-- ARGV[4] job id
-- Returns 1 when removed; 0 when the entry is not pending for ARGV[3] (nothing changed).
if not take(KEYS[1], ARGV[1], ARGV[2], ARGV[3]) then
  return 0
end
redis.call('HDEL', KEYS[2], ARGV[4])
return 1
