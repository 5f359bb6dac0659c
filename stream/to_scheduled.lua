#!lua
-- to_scheduled.lua: move an intake entry whose send_at is still to come to the delayed set, due
-- at its send_at, unless a job with its id is already in the gateway's hands (a lane, in flight,
-- the delayed set) or was accepted within the window: then the entry is acknowledged with no
-- record of its own, as to_lane.lua does. The promoter writes it to its class's lane when due,
-- attempt 0. Without allow-oom: out of memory, Redis refuses the whole script, so the job waits
-- in the intake and nothing is half done.
--
-- KEYS[1] intake stream
-- KEYS[2] jobs index of the shard (HASH job id -> provider)
-- KEYS[3] the duplicate-suppression window of the shard (window.lua)
-- KEYS[4] delayed ZSET
-- KEYS[5] delayed:data HASH
-- KEYS[6] delayed:scheduled ZSET (job id -> send_at, unix ms): which members of the delayed
--         set are scheduled jobs, for status; promote.lua drops the members that came due
-- ARGV[1]  consumer group
-- ARGV[2]  consumer that must own the entry
-- ARGV[3]  the window's TTL, ms
-- ARGV[4]  source entry id
-- ARGV[5]  job (raw JSON)
-- ARGV[6]  provider id
-- ARGV[7]  enqueued_at, unix ms
-- ARGV[8]  job id
-- ARGV[9]  the job's window field
-- ARGV[10] send_at, unix ms
-- ARGV[11] the job's class when it is not transactional ("bulk"), "" otherwise
-- ARGV[12] now, unix ms (queued_at)
-- A scheduled job neither counts toward nor is refused by the caps of the delayed set (a
-- provider's retries, a recipient's): those bound retries, and a scheduled job made no attempt.
-- Its data has no recipient (the rcpt count is of retries) and is marked scheduled.
-- Returns 0 the entry is not pending for ARGV[2] (nothing changed), 1 scheduled, 2 acknowledged
-- as a copy.
if not take(KEYS[1], ARGV[1], ARGV[4], ARGV[2]) then
  return 0
end
local id = ARGV[8]
if redis.call('HEXISTS', KEYS[2], id) == 1 or redis.call('ZSCORE', KEYS[4], id) then
  return 2
end
if w_seen(KEYS[3], ARGV[9], w_now(), tonumber(ARGV[3])) then
  return 2
end
redis.call('ZADD', KEYS[4], ARGV[10], id)
local data = {job = ARGV[5], provider = ARGV[6], attempt = 0, enqueued_at = ARGV[7], queued_at = ARGV[12],
  scheduled = true, send_at = ARGV[10]}
if ARGV[11] ~= '' then
  data.class = ARGV[11]
end
redis.call('HSET', KEYS[5], id, cjson.encode(data))
redis.call('ZADD', KEYS[6], ARGV[10], id)
redis.call('HSET', KEYS[2], id, ARGV[6])
return 1
