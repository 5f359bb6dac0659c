#!lua flags=allow-oom
-- heartbeat.lua: record this replica as alive, forget replicas not seen for too long, and
-- list the rest, in one round trip. It runs even when Redis is out of memory (a ZADD of a
-- member that exists takes no memory): a replica whose heartbeat were refused would look dead,
-- and the others would take over its entries while it still owns them.
--
-- KEYS[1] replicas ZSET ("<prefix>:{hb}:replicas"): member consumer name, score last seen (unix ms)
-- ARGV[1] this replica's consumer name
-- ARGV[2] now, unix ms
-- ARGV[3] stale after, ms: a member last seen more than this long before now is removed
-- Returns the consumer names of the live replicas, this one included.
local now = tonumber(ARGV[2])
local stale = tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], now, ARGV[1])
-- '(' makes the bound exclusive: a replica last seen exactly stale ms ago still counts.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. tostring(now - stale))
-- The set outlives no fleet: when every replica has stopped, it goes away on its own.
redis.call('PEXPIRE', KEYS[1], stale * 2)
return redis.call('ZRANGE', KEYS[1], 0, -1)
