-- campaign_drain.lua: give recipients of a cancelled campaign that wait in its lists their
-- CANCELED records (in the ledger, with campaign and recipient) and free them, at most a chunk
-- a call so that a large campaign never holds Redis for long.
--
-- KEYS[1] the campaign's hash
-- KEYS[2] results (ledger) stream
-- KEYS[3] the shard's active campaigns
-- KEYS[3 + i] the campaign's list of provider i
-- ARGV[1] campaign id
-- ARGV[2] at most this many recipients
-- ARGV[3] now, unix ms
-- ARGV[3 + i] provider i's id
-- The providers are those of the campaign's hash ("providers") as the caller read it; when a
-- batch has added one since, the campaign stays active, and the next call drains that list.
-- Returns {drained, left}; {-1, 0} when the campaign is not cancelled (nothing changed).
local h = redis.call('HMGET', KEYS[1], 'state', 'providers')
if h[1] ~= 'canceled' then
  return {-1, 0}
end
local known = {}
for i = 4, #ARGV do
  known[ARGV[i]] = true
end
local unknown = false
for p in string.gmatch(h[2] or '', '[^,]+') do
  if not known[p] then
    unknown = true
  end
end
local cid, left, done = ARGV[1], tonumber(ARGV[2]), 0
for i = 4, #KEYS do
  while left > 0 do
    local els = redis.call('LRANGE', KEYS[i], 0, math.min(left, 500) - 1)
    if #els == 0 then
      break
    end
    for _, el in ipairs(els) do
      -- An element that is not a recipient as campaign_add.lua writes them (only a write from
      -- outside makes one) is dropped with the rest, under a record with no number.
      local n, rc = string.match(el, '^(%d+)\t([^\t]*)\t')
      local f = {'id', cid .. '/' .. (n or '?'), 'provider', ARGV[i], 'code', 'CANCELED', 'status', '0',
        'detail', 'campaign canceled before it was sent', 'attempt', '0', 'latency_ms', '0', 'at', ARGV[3], 'campaign', cid}
      if rc and rc ~= '' then
        local ok, key = pcall(cjson.decode, rc)
        if ok and type(key) == 'string' then
          table.insert(f, 'recipient')
          table.insert(f, key)
        end
      end
      redis.call('XADD', KEYS[2], '*', unpack(f))
    end
    redis.call('LTRIM', KEYS[i], #els, -1)
    left, done = left - #els, done + #els
  end
end
if done > 0 then
  redis.call('HINCRBY', KEYS[1], 'code:CANCELED', done)
  redis.call('HINCRBY', KEYS[1], 'canceled_queued', done)
end
local remaining = 0
for i = 4, #KEYS do
  remaining = remaining + redis.call('LLEN', KEYS[i])
end
if remaining == 0 and not unknown then
  redis.call('SREM', KEYS[3], cid)
end
if unknown then
  remaining = remaining + 1 -- a list not drained yet: the caller calls again
end
return {done, remaining}
