-- campaign_state.lua: pause, resume or cancel a campaign. A cancelled campaign stays
-- cancelled; a cancel puts the campaign on the shard's active campaigns, so that the expansion
-- loop drains its lists (campaign_drain.lua) even if the caller does not.
--
-- KEYS[1] the campaign's hash
-- KEYS[2] the shard's active campaigns
-- ARGV[1] campaign id
-- ARGV[2] the new state: running, paused or canceled
-- A campaign whose recipients came before its create entry may be paused or cancelled too:
-- its create keeps that state (campaign_create.lua).
-- Returns 1 changed (or already so), 0 the campaign is cancelled and cannot change, -1 no
-- such campaign.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local was = redis.call('HGET', KEYS[1], 'state')
if was == 'canceled' and ARGV[2] ~= 'canceled' then
  return 0
end
redis.call('HSET', KEYS[1], 'state', ARGV[2])
redis.call('SADD', KEYS[2], ARGV[1])
return 1
