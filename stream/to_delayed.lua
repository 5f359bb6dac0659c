#!lua flags=allow-oom
-- to_delayed.lua: move a lane entry to the delayed set for a retry, or to the dead stream when
-- a cap refuses it. It runs when Redis is out of memory: where the job goes next is the outcome
-- of the attempt just made, and it must be written, or a replica that takes over the entry
-- sends it again at once.
--
-- KEYS[1] source stream (a lane)
-- KEYS[2] delayed ZSET (member job id, score due unix ms)
-- KEYS[3] delayed:data HASH (job id -> JSON of the lane entry to write when due)
-- KEYS[4] rcpt HASH (recipient -> jobs of that recipient in the delayed set)
-- KEYS[5] dead stream
-- KEYS[6] jobs index of the shard (HASH job id -> provider): a job dead-lettered here leaves it
-- KEYS[7] delayed:count HASH (provider -> retries of that provider in the delayed set that
--         were counted: those after an attempt; put-backs are not)
-- ARGV[1]  consumer group
-- ARGV[2]  source entry id
-- ARGV[3]  consumer that must own the entry
-- ARGV[4]  job id
-- ARGV[5]  provider id
-- ARGV[6]  recipient ("" = none)
-- ARGV[7]  due, unix ms
-- ARGV[8]  attempt number of the retry
-- ARGV[9]  job (raw JSON)
-- ARGV[10] enqueued_at, unix ms
-- ARGV[11] cap on one provider's retries in the delayed set (0 = none); put-backs are never
--          refused by it and do not count toward it
-- ARGV[12] cap per recipient (0 = none)
-- ARGV[13] now, unix ms (the dead record's "at")
-- ARGV[14] dead record code
-- ARGV[15] dead stream cap (approximate MAXLEN; 0 = none)
-- ARGV[16] code of the attempt that failed ("" for a put-back, which made none)
-- ARGV[17] that attempt's detail
-- ARGV[18] the job's class when it is not transactional ("bulk"), "" otherwise: the promoter
--          writes the job back to its class's lane
-- ARGV[19] the campaign whose message completes the job, "" for a whole job: the promoter
--          writes it back with the job (a campaign recipient's entry holds only its reference)
-- ARGV[20] "1" when the entry was read before (its lane looks whether its job was sent)
-- ARGV[21] the whole job, for the dead record a cap makes
-- The delayed data keeps the lane entry's fields (job, campaign, provider, attempt,
-- enqueued_at, recipient, deliveries) and, for the operator, queued_at (ARGV[13]) and, after an attempt, last_code and
-- last_detail; a retry after an attempt is marked counted, and promote.lua takes it off its
-- provider's count; promote.lua reads nothing else but the lane entry's fields.
-- Returns 0 not owner (nothing changed), 1 queued, 2 dead: the provider's cap, 3 dead: recipient cap,
-- 4 acknowledged: a copy of this job is already waiting to retry (that copy keeps the job).
if not take(KEYS[1], ARGV[1], ARGV[2], ARGV[3]) then
  return 0
end

local id, recipient = ARGV[4], ARGV[6]
local verdict, reason = 1, nil
local provider = ARGV[5]
local maxDelayed, maxPer = tonumber(ARGV[11]), tonumber(ARGV[12])
-- A retry after an attempt counts toward its provider's cap; a put-back (no attempt made: a
-- breaker open, a host or key throttled, a share full) waits for room it already had in the
-- lane, and neither counts nor is refused.
local counted = ARGV[16] ~= ''
if redis.call('ZSCORE', KEYS[2], id) then
  -- Members are job ids, and the waiting copy is the job: this one ends here, with no record
  -- of its own (its data would overwrite the waiting copy's).
  return 4
end
if counted and maxDelayed > 0 then
  -- The count is never taken above the set's size (a count an older promoter left behind
  -- cannot refuse retries the set has room for).
  local n = math.min(tonumber(redis.call('HGET', KEYS[7], provider) or '0'), redis.call('ZCARD', KEYS[2]))
  if n >= maxDelayed then
    verdict, reason = 2, 'delayed set is full for ' .. provider .. ' (' .. n .. ' retries waiting); not retried'
  end
end
if verdict == 1 and recipient ~= '' and maxPer > 0 then
  local n = tonumber(redis.call('HGET', KEYS[4], recipient) or '0')
  if n >= maxPer then
    verdict, reason = 3, 'recipient ' .. recipient .. ' has ' .. n .. ' jobs waiting to retry'
  end
end

if verdict ~= 1 then
  local dead = {'id', id, 'code', ARGV[14], 'reason', reason, 'from', KEYS[1], 'entry', ARGV[2],
    'provider', ARGV[5], 'attempt', tostring(tonumber(ARGV[8]) - 1), 'at', ARGV[13]}
  local campaign = job_campaign(ARGV[21])
  if campaign then
    table.insert(dead, 'campaign')
    table.insert(dead, campaign)
    if recipient ~= '' then
      table.insert(dead, 'recipient')
      table.insert(dead, recipient)
    end
    camp_count(camp_base(KEYS[5]), campaign, ARGV[14])
  end
  table.insert(dead, 'job')
  table.insert(dead, ARGV[21])
  xadd_capped(KEYS[5], ARGV[15], dead)
  redis.call('HDEL', KEYS[6], id)
  return verdict
end

redis.call('ZADD', KEYS[2], ARGV[7], id)
local data = {
  job = ARGV[9], provider = ARGV[5], attempt = ARGV[8], enqueued_at = ARGV[10], recipient = recipient,
  queued_at = ARGV[13],
}
if ARGV[18] ~= '' then
  data.class = ARGV[18]
end
if ARGV[19] ~= '' then
  data.campaign = ARGV[19]
end
if ARGV[20] == '1' then
  data.deliveries = 1
end
if counted then
  data.last_code = ARGV[16]
  data.last_detail = ARGV[17]
  data.counted = true
  redis.call('HINCRBY', KEYS[7], provider, 1)
end
redis.call('HSET', KEYS[3], id, cjson.encode(data))
if recipient ~= '' then
  redis.call('HINCRBY', KEYS[4], recipient, 1)
end
return 1
