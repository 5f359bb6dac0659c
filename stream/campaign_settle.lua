-- campaign_settle.lua: take a running campaign whose lists are all empty off the shard's active
-- campaigns, so that the expansion loop stops looking at it; a batch added later puts it back
-- (campaign_add.lua). Atomic with those adds: a recipient is never left in a list nobody reads.
--
-- KEYS[1] the campaign's hash
-- KEYS[2] the shard's active campaigns
-- KEYS[2 + i] the campaign's list of provider i
-- ARGV[1] campaign id
-- ARGV[2] the campaign's providers as the caller read them (its hash's "providers")
-- Returns 1 when taken off, 0 when recipients wait, the campaign is not running, or a batch
-- gave it a list of a provider the caller did not know of (its next round looks again).
local h = redis.call('HMGET', KEYS[1], 'state', 'providers')
if h[1] ~= 'running' or (h[2] or '') ~= ARGV[2] then
  return 0
end
for i = 3, #KEYS do
  if redis.call('LLEN', KEYS[i]) > 0 then
    return 0
  end
end
redis.call('SREM', KEYS[2], ARGV[1])
return 1
