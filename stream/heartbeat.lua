#!lua flags=allow-oom
-- heartbeat.lua: record this replica as alive with its state, forget replicas not seen for too
-- long, and list the rest and the paused providers, in one round trip. It runs even when Redis
-- is out of memory (a ZADD of a member that exists takes no memory): a replica whose heartbeat
-- were refused would look dead, and the others would take over its entries while it still
-- owns them.
--
-- KEYS[1] replicas ZSET ("<prefix>:{hb}:replicas"): member consumer name, score last seen (unix ms)
-- KEYS[2] replica states HASH ("<prefix>:{hb}:states"): consumer name -> its state (JSON)
-- KEYS[3] paused providers HASH ("<prefix>:{hb}:paused"): provider id -> why (JSON)
-- ARGV[1] this replica's consumer name
-- ARGV[2] now, unix ms
-- ARGV[3] stale after, ms: a member last seen more than this long before now is removed
-- ARGV[4] this replica's state, JSON
-- Returns {{live consumer names, this one included}, {paused provider ids}}.
local now = tonumber(ARGV[2])
local stale = tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
-- '(' makes the bound exclusive: a replica last seen exactly stale ms ago still counts.
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. tostring(now - stale))
for _, c in ipairs(gone) do
  redis.call('HDEL', KEYS[2], c)
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. tostring(now - stale))
-- The sets outlive no fleet: when every replica has stopped, they go away on their own.
redis.call('PEXPIRE', KEYS[1], stale * 2)
redis.call('PEXPIRE', KEYS[2], stale * 2)
return {redis.call('ZRANGE', KEYS[1], 0, -1), redis.call('HKEYS', KEYS[3])}
