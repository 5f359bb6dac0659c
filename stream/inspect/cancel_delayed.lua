-- cancel_delayed.lua: cancel a job waiting in the delayed set (a retry, or a job scheduled for
-- later): remove the member, its data and its counts, take it off the jobs index, and write
-- the job's one ledger record, CANCELED. promote.lua moves a member in one call too, so a
-- member is either promoted or cancelled, never both.
--
-- KEYS[1] delayed ZSET
-- KEYS[2] delayed:data HASH
-- KEYS[3] rcpt HASH
-- KEYS[4] delayed:count HASH
-- KEYS[5] jobs index of the shard
-- KEYS[6] results (ledger) stream
-- KEYS[7] delayed:scheduled ZSET (the scheduled members, for status)
-- ARGV[1] job id
-- ARGV[2] the record's detail
-- ARGV[3] now, unix ms (the record's "at")
-- Returns 1 cancelled; 0 not in the delayed set (nothing changed).
local id = ARGV[1]
if not redis.call('ZSCORE', KEYS[1], id) then
  return 0
end
local raw = redis.call('HGET', KEYS[2], id)
local ok, d = false, nil
if raw then
  ok, d = pcall(cjson.decode, raw)
end
if not ok or type(d) ~= 'table' then
  d = {}
end
if type(d.recipient) == 'string' and d.recipient ~= '' then
  if redis.call('HINCRBY', KEYS[3], d.recipient, -1) <= 0 then
    redis.call('HDEL', KEYS[3], d.recipient)
  end
end
local provider = type(d.provider) == 'string' and d.provider or ''
if d.counted == true and provider ~= '' then
  if redis.call('HINCRBY', KEYS[4], provider, -1) <= 0 then
    redis.call('HDEL', KEYS[4], provider)
  end
end
redis.call('ZREM', KEYS[1], id)
redis.call('HDEL', KEYS[2], id)
redis.call('HDEL', KEYS[5], id)
redis.call('ZREM', KEYS[7], id)
local rec = {'id', id, 'provider', provider, 'code', 'CANCELED', 'status', '0',
  'detail', ARGV[2], 'attempt', tostring(d.attempt or '0'), 'latency_ms', '0', 'at', ARGV[3]}
local campaign = job_campaign(d.job)
if campaign then
  table.insert(rec, 'campaign')
  table.insert(rec, campaign)
  camp_count(camp_base(KEYS[6]), campaign, 'CANCELED')
end
redis.call('XADD', KEYS[6], '*', unpack(rec))
return 1
