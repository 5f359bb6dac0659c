-- queue_stats.lua: the length of every stream and set of one shard, and for the grouped
-- streams the group's lag, pending count and oldest pending entry, in one round trip: a
-- constant number of commands per key, whatever the backlog (the worker's queue gauges and
-- `gateway-worker status` read it every few seconds on every replica).
--
-- KEYS[1] intake stream, KEYS[2] delayed ZSET, KEYS[3] dead, KEYS[4] results, KEYS[5] gone,
-- KEYS[6] delayed:scheduled ZSET (which delayed members are scheduled jobs, by send_at),
-- KEYS[7..] the bulk intake and the lane streams
-- ARGV[1] consumer group
-- ARGV[2] now, unix ms (delayed members due by then count as due)
-- Returns, for each key in order but KEYS[6], {length, lag, pending, oldest pending id}; lag is
-- -1 when the stream has no group (or for a key that is not grouped), the id '' when nothing is
-- pending. For the delayed set: {members, due now, -1, score of the first member as a string or
-- '', scheduled jobs whose send_at is still to come, the first of those send_ats or ''}.
local function grouped(key)
  if redis.call('EXISTS', key) == 0 then
    return {0, 0, 0, ''}
  end
  local len = redis.call('XLEN', key)
  local lag, pending, oldest = -1, 0, ''
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', key)) do
    local f = {}
    for i = 1, #g, 2 do
      f[g[i]] = g[i + 1]
    end
    if f['name'] == ARGV[1] then
      -- Redis leaves lag empty (nil) when it cannot tell, after some deletions: the length is
      -- then the bound.
      lag = tonumber(f['lag']) or len
      pending = tonumber(f['pending'])
    end
  end
  if pending > 0 then
    local p = redis.call('XPENDING', key, ARGV[1])
    oldest = p[2]
  end
  return {len, lag, pending, oldest}
end

local out = {}
table.insert(out, grouped(KEYS[1]))
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local nextSend = redis.call('ZRANGEBYSCORE', KEYS[6], '(' .. ARGV[2], '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
table.insert(out, {redis.call('ZCARD', KEYS[2]), redis.call('ZCOUNT', KEYS[2], '-inf', ARGV[2]), -1, first[2] or '',
  redis.call('ZCOUNT', KEYS[6], '(' .. ARGV[2], '+inf'), nextSend[2] or ''})
for i = 3, 5 do
  table.insert(out, {redis.call('XLEN', KEYS[i]), -1, 0, ''})
end
for i = 7, #KEYS do
  table.insert(out, grouped(KEYS[i]))
end
return out
