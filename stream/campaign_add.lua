-- campaign_add.lua: add a batch of recipients to a campaign from its intake entry
-- ({"add_recipients": ...}), each routed to its provider's list of the campaign, where it waits
-- to be expanded into that provider's lane (campaign_expand.lua). A recipient is kept as
-- "<n>\t<recipient>\t<subscription>": its number in the campaign, its key as a JSON string (or
-- nothing), the subscription's JSON: the message is the campaign's, never copied here. A batch
-- may come before its campaign's create entry: it waits all the same.
--
-- KEYS[1] intake stream
-- KEYS[2] the campaign's hash
-- KEYS[3] the shard's campaigns (ZSET id -> first seen, unix ms)
-- KEYS[4] the shard's active campaigns (SET): those with recipients to expand or drain
-- KEYS[5] dead stream
-- KEYS[6] the campaign's batch ids taken (SET)
-- KEYS[6 + i] the campaign's list of provider i, i = 1 .. m
-- ARGV[1] consumer group
-- ARGV[2] consumer that must own the entry
-- ARGV[3] the entry's id
-- ARGV[4] campaign id
-- ARGV[5] now, unix ms
-- ARGV[6] dead stream cap
-- ARGV[7] the entry's batch id ("" for none)
-- ARGV[8] m, the number of providers
-- ARGV[9 .. 8 + m] their ids
-- then for each recipient: provider index (0: invalid), recipient key as a JSON string or "",
-- the compact subscription (or, for an invalid one, the recipient as given, cut), the reason
-- ("" for a valid one), the recipient key as given
-- Returns {0} not owner (nothing changed), {2} a batch id taken before (the entry is acked,
-- nothing added), or {1, first n, count}.
if not take(KEYS[1], ARGV[1], ARGV[3], ARGV[2]) then
  return {0}
end
if ARGV[7] ~= '' and redis.call('SADD', KEYS[6], ARGV[7]) == 0 then
  return {2}
end
local cid, m = ARGV[4], tonumber(ARGV[8])
local a = 9 + m
local count = (#ARGV - a + 1) / 5
local first = redis.call('HINCRBY', KEYS[2], 'added', count) - count
local lists, dead = {}, 0
for i = 0, count - 1 do
  local v = a + 5 * i
  local idx, rc, body, reason = tonumber(ARGV[v]), ARGV[v + 1], ARGV[v + 2], ARGV[v + 3]
  local n = first + i + 1
  if idx == 0 then
    local rec = {'id', cid .. '/' .. n, 'code', 'INVALID_JOB', 'reason', reason,
      'from', KEYS[1], 'entry', ARGV[3], 'provider', '', 'attempt', '0', 'at', ARGV[5], 'campaign', cid}
    if ARGV[v + 4] ~= '' then
      table.insert(rec, 'recipient')
      table.insert(rec, ARGV[v + 4])
    end
    table.insert(rec, 'job')
    table.insert(rec, body)
    xadd_capped(KEYS[5], ARGV[6], rec)
    dead = dead + 1
  else
    lists[idx] = lists[idx] or {}
    table.insert(lists[idx], n .. '\t' .. rc .. '\t' .. body)
  end
end
-- "providers" lists the providers the campaign has a list for, comma-separated, in the order
-- they came.
local have = redis.call('HGET', KEYS[2], 'providers') or ''
local known, grew = {}, false
for p in string.gmatch(have, '[^,]+') do
  known[p] = true
end
for idx, els in pairs(lists) do
  redis.call('RPUSH', KEYS[6 + idx], unpack(els))
  local p = ARGV[8 + idx]
  if not known[p] then
    known[p], grew = true, true
    have = have == '' and p or have .. ',' .. p
  end
end
if grew then
  redis.call('HSET', KEYS[2], 'providers', have)
end
if dead > 0 then
  redis.call('HINCRBY', KEYS[2], 'code:INVALID_JOB', dead)
  redis.call('HINCRBY', KEYS[2], 'dead_added', dead)
end
redis.call('ZADD', KEYS[3], 'NX', ARGV[5], cid)
redis.call('SADD', KEYS[4], cid)
return {1, first + 1, count}
