#!lua flags=allow-oom
-- keypark.lua: record the senders (provider, VAPID key name) a push service asked to pause for
-- longer than a retry can wait, and list every park still in force, in one round trip. A park
-- only grows (a shorter one for the same sender leaves it), and ends on its own at its time:
-- an ended park is removed here, and the hash expires with its last park.
--
-- KEYS[1] key parks HASH ("<prefix>:{hb}:keypause"): "<provider>/<key>" -> JSON with until_ms
-- ARGV[1] now, unix ms
-- ARGV[2..] field, JSON pairs of the parks to record
-- Returns the parks in force: {field, JSON, field, JSON, ...}.
local now = tonumber(ARGV[1])
local function untilOf(raw)
  local ok, v = pcall(cjson.decode, raw)
  if ok and type(v) == 'table' and tonumber(v['until_ms']) then
    return tonumber(v['until_ms'])
  end
  return 0
end
for i = 2, #ARGV - 1, 2 do
  local old = redis.call('HGET', KEYS[1], ARGV[i])
  if not old or untilOf(ARGV[i + 1]) > untilOf(old) then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
local out, last = {}, 0
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local u = untilOf(all[i + 1])
  if u <= now then
    redis.call('HDEL', KEYS[1], all[i])
  else
    table.insert(out, all[i])
    table.insert(out, all[i + 1])
    if u > last then last = u end
  end
end
if last > 0 then
  redis.call('PEXPIREAT', KEYS[1], last)
end
return out
