-- campaign_hold.lua: put a lane entry of a paused campaign's recipient back at the head of the
-- campaign's list for its provider, unsent and with no record: it is expanded again once the
-- campaign resumes.
--
-- KEYS[1] lane stream
-- KEYS[2] jobs index of the shard
-- KEYS[3] the campaign's list for the provider
-- KEYS[4] the campaign's hash
-- ARGV[1] consumer group
-- ARGV[2] the entry's id
-- ARGV[3] consumer that must own the entry
-- ARGV[4] the job's id
-- ARGV[5] the recipient as the list keeps it ("<n>\t<recipient>\t<subscription>")
-- Returns 1 held back; 0 the entry is not pending for ARGV[3] (nothing changed).
if not take(KEYS[1], ARGV[1], ARGV[2], ARGV[3]) then
  return 0
end
redis.call('HDEL', KEYS[2], ARGV[4])
redis.call('LPUSH', KEYS[3], ARGV[5])
redis.call('HINCRBY', KEYS[4], 'expanded', -1)
return 1
