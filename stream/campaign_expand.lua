-- campaign_expand.lua: move recipients of a campaign from its list for one provider into that
-- provider's lane, each as a job of its own (attempt 0) that names the campaign instead of
-- copying its message (the lane entry's "job" is the recipient's id, campaign, subscription and
-- recipient key; its "campaign" field says a lane joins the campaign's message to it, which a
-- worker reads once): only as many as the lane has room for under the lane depth, as the
-- campaign's pace allows, and none while the campaign is paused, cancelled or scheduled for
-- later. The lists of other providers are expanded by calls of their own, so a stalled provider
-- holds back only its own recipients.
--
-- KEYS[1] the campaign's hash
-- KEYS[2] its list for the provider
-- KEYS[3] the provider's lane of the campaign's class
-- KEYS[4] jobs index of the shard (HASH job id -> provider)
-- KEYS[5] dead stream: an element of the list that is not a recipient as campaign_add.lua
--         writes them (only a write from outside can make one) is dead-lettered, not expanded
-- ARGV[1] campaign id
-- ARGV[2] provider id
-- ARGV[3] at most this many
-- ARGV[4] the lane depth: no expansion into a lane that holds that many entries
-- ARGV[5] "" to count every entry of the lane against the depth, or the lane's group, to count
--         only those waiting to be read (the entries in flight are ahead of no one)
-- Returns {moved, wait_ms, why, left}: how many moved; how long to wait before the next call
-- is worth making (0: at once); why nothing moved ("", "not_created", "paused", "canceled",
-- "scheduled", "full", "paced", "empty"); the list's length after.
local h = redis.call('HMGET', KEYS[1], 'state', 'send_at', 'rate', 'tokens', 'tokens_at')
if redis.call('HEXISTS', KEYS[1], 'message') == 0 then
  return {0, 1000, 'not_created', redis.call('LLEN', KEYS[2])}
end
if h[1] ~= 'running' then
  return {0, 0, h[1], redis.call('LLEN', KEYS[2])}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local sendAt = tonumber(h[2] or '0') or 0
if sendAt > now then
  return {0, sendAt - now, 'scheduled', redis.call('LLEN', KEYS[2])}
end
local held = redis.call('XLEN', KEYS[3])
if ARGV[5] ~= '' then
  held = held - redis.call('XPENDING', KEYS[3], ARGV[5])[1]
end
local k = math.min(tonumber(ARGV[3]), tonumber(ARGV[4]) - held)
if k <= 0 then
  return {0, 0, 'full', redis.call('LLEN', KEYS[2])}
end
local rate, tokens = tonumber(h[3] or '0') or 0, 0
if rate > 0 then
  -- A bucket of a second's worth, filled at the pace by Redis's clock: every replica that
  -- expands the campaign draws from it.
  local burst = math.max(1, rate)
  tokens = tonumber(h[4] or '') or burst
  local at = tonumber(h[5] or '') or now
  tokens = math.min(burst, tokens + math.max(0, now - at) * rate / 1000)
  if tokens < 1 then
    redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'tokens_at', now)
    return {0, math.ceil((1 - tokens) * 1000 / rate), 'paced', redis.call('LLEN', KEYS[2])}
  end
  k = math.min(k, math.floor(tokens))
end
local els = redis.call('LRANGE', KEYS[2], 0, k - 1)
if #els == 0 then
  return {0, 0, 'empty', 0}
end
local cid, index, moved = ARGV[1], {}, 0
for _, el in ipairs(els) do
  local n, rc, sub = string.match(el, '^(%d+)\t([^\t]*)\t(.+)$')
  if not n then
    redis.call('XADD', KEYS[5], '*', 'id', '', 'code', 'INVALID_JOB', 'reason', 'campaign ' .. cid ..
      "'s list held an element that is not a recipient", 'from', KEYS[2], 'entry', '', 'provider', ARGV[2],
      'attempt', '0', 'at', now, 'campaign', cid, 'job', string.sub(el, 1, 4096))
  else
  moved = moved + 1
  local id = cid .. '/' .. n
  local parts = {'{"id":"', id, '","campaign":"', cid, '","subscription":', sub}
  if rc ~= '' then
    table.insert(parts, ',"recipient":')
    table.insert(parts, rc)
  end
  table.insert(parts, '}')
  redis.call('XADD', KEYS[3], '*', 'job', table.concat(parts), 'campaign', cid, 'provider', ARGV[2], 'attempt', '0',
    'enqueued_at', now)
  table.insert(index, id)
  table.insert(index, ARGV[2])
  end
end
if #index > 0 then
  redis.call('HSET', KEYS[4], unpack(index))
end
redis.call('LTRIM', KEYS[2], #els, -1)
redis.call('HINCRBY', KEYS[1], 'expanded', moved)
redis.call('HSETNX', KEYS[1], 'started_at', now)
if rate > 0 then
  redis.call('HSET', KEYS[1], 'tokens', tostring(tokens - #els), 'tokens_at', now)
end
return {moved, 0, '', redis.call('LLEN', KEYS[2])}
