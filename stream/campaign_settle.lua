-- campaign_settle.lua: take a running campaign whose lists are all empty off the shard's active
-- campaigns, so that the expansion loop stops looking at it; a batch added later puts it back
-- (campaign_add.lua). Atomic with those adds: a recipient is never left in a list nobody reads.
--
-- KEYS[1] the campaign's hash
-- KEYS[2] the shard's active campaigns
-- KEYS[2 + i] the campaign's list of provider i
-- ARGV[1] campaign id
-- Returns 1 when taken off, 0 when recipients wait or the campaign is not running.
if redis.call('HGET', KEYS[1], 'state') ~= 'running' then
  return 0
end
for i = 3, #KEYS do
  if redis.call('LLEN', KEYS[i]) > 0 then
    return 0
  end
end
redis.call('SREM', KEYS[2], ARGV[1])
return 1
