#!lua flags=allow-oom
-- to_dead.lua: move an intake or lane entry to the dead stream. It runs when Redis is out of
-- memory: a dead record is the outcome of a job, and writing it frees the entry.
--
-- KEYS[1] source stream
-- KEYS[2] dead stream
-- KEYS[3] jobs index of the shard (HASH job id -> provider, or "accepted")
-- KEYS[4] the duplicate-suppression window of the shard (window.lua)
-- ARGV[1] consumer group
-- ARGV[2] source entry id
-- ARGV[3] consumer that must own the entry
-- ARGV[4] dead stream cap (approximate MAXLEN; 0 = none)
-- ARGV[5] job id to remove from the jobs index ("" for an intake entry: only a lane entry's
--         job is indexed, and an invalid copy must not unindex a valid job with its id)
-- ARGV[6] the job's window field
-- ARGV[7] the window's TTL, ms
-- ARGV[8..] the dead record as field, value pairs
-- Returns 1 when moved (or when the job is marked accepted, or in the window: another attempt
-- was accepted and recorded, and the entry is only acked, so the job keeps exactly one terminal
-- record);
-- 0 when the entry is not pending for ARGV[3] (nothing changed).
if not take(KEYS[1], ARGV[1], ARGV[2], ARGV[3]) then
  return 0
end
local flagged = false
if ARGV[5] ~= '' then
  flagged = redis.call('HGET', KEYS[3], ARGV[5]) == 'accepted'
  redis.call('HDEL', KEYS[3], ARGV[5])
end
if flagged or w_seen(KEYS[4], ARGV[6], w_now(), tonumber(ARGV[7])) then
  return 1
end
local record = {unpack(ARGV, 8)}
xadd_capped(KEYS[2], ARGV[4], record)
camp_count(camp_base(KEYS[2]), record_campaign(record), record_field(record, 'code'))
return 1
