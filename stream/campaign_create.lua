-- campaign_create.lua: create a campaign from its intake entry ({"create_campaign": ...}).
--
-- KEYS[1] intake stream
-- KEYS[2] the campaign's hash (campaign:<id>)
-- KEYS[3] the shard's campaigns (ZSET id -> created, unix ms)
-- KEYS[4] dead stream
-- ARGV[1] consumer group
-- ARGV[2] consumer that must own the entry
-- ARGV[3] the entry's id
-- ARGV[4] campaign id
-- ARGV[5] now, unix ms
-- ARGV[6] dead stream cap (approximate MAXLEN; 0 = none)
-- ARGV[7] the raw entry, for a dead record
-- ARGV[8..] the campaign's fields as field, value pairs (message, class, vapid_key, ttl,
--           send_at, rate)
-- Returns 0 not owner (nothing changed); 1 created; 2 the same campaign exists already (a copy
-- of the entry: acked, no record); 3 another campaign has the id: dead-lettered.
if not take(KEYS[1], ARGV[1], ARGV[3], ARGV[2]) then
  return 0
end
local fields = {unpack(ARGV, 8)}
if redis.call('HEXISTS', KEYS[2], 'message') == 1 then
  local names = {}
  for i = 1, #fields, 2 do
    table.insert(names, fields[i])
  end
  local have = redis.call('HMGET', KEYS[2], unpack(names))
  for i, v in ipairs(have) do
    if v ~= fields[2 * i] then
      xadd_capped(KEYS[4], ARGV[6], {'id', ARGV[4], 'code', 'INVALID_JOB',
        'reason', 'campaign ' .. ARGV[4] .. ' exists with another ' .. names[i], 'from', KEYS[1], 'entry', ARGV[3],
        'provider', '', 'attempt', '0', 'at', ARGV[5], 'campaign', ARGV[4], 'job', string.sub(ARGV[7], 1, MAX_INVALID_JOB)})
      return 3
    end
  end
  return 2
end
table.insert(fields, 'created_at')
table.insert(fields, ARGV[5])
redis.call('HSET', KEYS[2], unpack(fields))
-- A campaign paused or cancelled before its create came (its recipients did) stays so.
redis.call('HSETNX', KEYS[2], 'state', 'running')
redis.call('ZADD', KEYS[3], 'NX', ARGV[5], ARGV[4])
return 1
