-- was_sent.lua: whether a job was accepted: marked "accepted" in the jobs index (an attempt was
-- accepted while its entry was reclaimed, and the entry is still pending), or in the
-- duplicate-suppression window.
--
-- KEYS[1] jobs index of the shard (HASH job id -> provider, or "accepted")
-- KEYS[2] the duplicate-suppression window of the shard (window.lua)
-- ARGV[1] job id
-- ARGV[2] the job's window field
-- ARGV[3] the window's TTL, ms
-- Returns 1 when the job was accepted, 0 otherwise.
if redis.call('HGET', KEYS[1], ARGV[1]) == 'accepted' or w_seen(KEYS[2], ARGV[2], w_now(), tonumber(ARGV[3])) then
  return 1
end
return 0
