-- clean_consumer.lua: delete one consumer from a group only when that is harmless: it has no
-- pending entries (deleting a consumer drops its pending entries from the group, and nobody
-- could claim them again), it has been idle longer than the threshold, and it is not the
-- caller. The checks and the delete are atomic, so an entry read between them cannot be lost.
--
-- KEYS[1] stream
-- ARGV[1] consumer group
-- ARGV[2] consumer to delete
-- ARGV[3] idle threshold, ms
-- ARGV[4] the calling consumer (never deleted)
-- Returns 1 when deleted, 0 when kept.
if ARGV[2] == ARGV[4] then
  return 0
end
local ok, consumers = pcall(redis.call, 'XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
if not ok then
  return 0
end
for _, c in ipairs(consumers) do
  local f = {}
  for i = 1, #c, 2 do
    f[c[i]] = c[i + 1]
  end
  if f['name'] == ARGV[2] then
    if tonumber(f['pending']) == 0 and tonumber(f['idle']) > tonumber(ARGV[3]) then
      redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
      return 1
    end
    return 0
  end
end
return 0
