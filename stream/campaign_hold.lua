-- campaign_hold.lua: take back a lane entry of a paused campaign's recipient, unsent: it goes
-- back to the head of the campaign's list for its provider, and the campaign onto the shard's
-- active campaigns (so the expansion loop sees it again once it resumes). What the campaign's
-- hash says now decides, not the lane's view of it, which may be a moment old:
-- * cancelled meanwhile: the recipient gets its CANCELED record instead (counted);
-- * a job whose id names a recipient the campaign never numbered (an upstream's job of its
--   own under a campaign's id): dead-lettered, INVALID_JOB, since it cannot be told from a
--   recipient;
-- * a job another attempt's accepted send recorded (the jobs index says "accepted"): acked
--   only, it has its record.
--
-- KEYS[1] lane stream
-- KEYS[2] jobs index of the shard
-- KEYS[3] the campaign's list for the provider
-- KEYS[4] the campaign's hash
-- KEYS[5] the shard's active campaigns
-- KEYS[6] results (ledger) stream
-- KEYS[7] dead stream
-- ARGV[1] consumer group
-- ARGV[2] the entry's id
-- ARGV[3] consumer that must own the entry
-- ARGV[4] the job's id
-- ARGV[5] the recipient as the list keeps it ("<n>\t<recipient>\t<subscription>")
-- ARGV[6] campaign id
-- ARGV[7] provider id
-- ARGV[8] attempt
-- ARGV[9] now, unix ms
-- ARGV[10] the recipient key ("" none)
-- ARGV[11] the job (for a dead record)
-- ARGV[12] dead stream cap
-- Returns 1 held back, 2 ended (CANCELED, dead or acked), 0 the entry is not pending for ARGV[3]
-- (nothing changed).
if not take(KEYS[1], ARGV[1], ARGV[2], ARGV[3]) then
  return 0
end
local mark = redis.call('HGET', KEYS[2], ARGV[4])
redis.call('HDEL', KEYS[2], ARGV[4])
if mark == 'accepted' then
  return 2
end
local h = redis.call('HMGET', KEYS[4], 'state', 'added', 'providers')
local n = tonumber(string.match(ARGV[5], '^(%d+)\t') or '')
if not n or n < 1 or n > (tonumber(h[2] or '0') or 0) then
  xadd_capped(KEYS[7], ARGV[12], {'id', ARGV[4], 'code', 'INVALID_JOB',
    'reason', 'job names campaign ' .. ARGV[6] .. ' and an id of its recipients, but the campaign has no such recipient',
    'from', KEYS[1], 'entry', ARGV[2], 'provider', ARGV[7], 'attempt', ARGV[8], 'at', ARGV[9], 'job', ARGV[11]})
  return 2
end
if h[1] == 'canceled' then
  local rec = {'id', ARGV[4], 'provider', ARGV[7], 'code', 'CANCELED', 'status', '0',
    'detail', 'campaign canceled before it was sent', 'attempt', ARGV[8], 'latency_ms', '0', 'at', ARGV[9],
    'campaign', ARGV[6]}
  if ARGV[10] ~= '' then
    table.insert(rec, 'recipient')
    table.insert(rec, ARGV[10])
  end
  redis.call('XADD', KEYS[6], '*', unpack(rec))
  camp_count(camp_base(KEYS[6]), ARGV[6], 'CANCELED')
  return 2
end
redis.call('LPUSH', KEYS[3], ARGV[5])
redis.call('HINCRBY', KEYS[4], 'expanded', -1)
local have, listed = h[3] or '', false
for p in string.gmatch(have, '[^,]+') do
  if p == ARGV[7] then
    listed = true
  end
end
if not listed then
  redis.call('HSET', KEYS[4], 'providers', have == '' and ARGV[7] or have .. ',' .. ARGV[7])
end
redis.call('SADD', KEYS[5], ARGV[6])
return 1
