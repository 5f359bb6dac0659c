-- to_lane.lua: move intake entries to their providers' lanes (attempt 0), each unless a job with
-- its id is already in the gateway's hands or was accepted within the window (the sent TTL): then
-- the entry is acknowledged with no record of its own (the first copy's record is the job's).
-- One call moves the entries of every caller whose move shares a pipeline (stream/group.go).
--
-- KEYS[1]      source stream (the intake stream)
-- KEYS[2]      jobs index of the shard (HASH job id -> provider id): every job in a lane, in
--              flight or waiting to retry
-- KEYS[3]      the duplicate-suppression window of the shard (window.lua)
-- KEYS[3 + i]  lane stream of item i's provider, for i = 1 .. n
-- ARGV[1] consumer group
-- ARGV[2] consumer that must own the entries
-- ARGV[3] the window's TTL, ms (Options.SentTTL)
-- ARGV[4] n, the number of items
-- then for each item: 6 (the count of its arguments), source entry id, job (raw JSON as
-- received), provider id, enqueued_at (unix ms), job id, and the job's window field
-- The lanes' consumer groups exist (Setup, or Store.ToLane before its first use of a lane).
-- Returns one verdict per item: 1 moved; 2 acknowledged as a copy of a job already here or
-- sent (an earlier item of the same call included); 0 the entry is not pending for ARGV[2]
-- (nothing changed).
--
-- The first write is an XADD to a lane (or, when every item is a copy, an XACK, which frees
-- memory): when Redis is out of memory it refuses the whole script there, so new work waits
-- in the intake and nothing is half done.
local n = tonumber(ARGV[4])
local items, entries, jobIds = {}, {}, {}
local a = 5
for i = 1, n do
  local it = {entry = ARGV[a + 1], job = ARGV[a + 2], provider = ARGV[a + 3], at = ARGV[a + 4],
    id = ARGV[a + 5], field = ARGV[a + 6], lane = KEYS[3 + i]}
  items[i], entries[i], jobIds[i] = it, it.entry, it.id
  a = a + 1 + tonumber(ARGV[a])
end
local mine = pending_for(KEYS[1], ARGV[1], ARGV[2], entries)
local held = redis.call('HMGET', KEYS[2], unpack(jobIds))
-- The window is looked in for the jobs not held.
local look, lookFields = {}, {}
for i, it in ipairs(items) do
  if mine[it.entry] and not held[i] then
    table.insert(look, i)
    table.insert(lookFields, it.field)
  end
end
local accepted = {}
if #look > 0 then
  for j, v in ipairs(w_seen_all(KEYS[3], lookFields, w_now(), tonumber(ARGV[3]))) do
    accepted[look[j]] = v
  end
end
local out, acks, index, moved, seen = {}, {}, {}, {}, {}
for i, it in ipairs(items) do
  if not mine[it.entry] or seen[it.entry] then
    out[i] = 0
  elseif held[i] or moved[it.id] or accepted[i] then
    out[i] = 2
    table.insert(acks, it.entry)
  else
    redis.call('XADD', it.lane, '*', 'job', it.job, 'provider', it.provider, 'attempt', '0', 'enqueued_at', it.at)
    moved[it.id] = true
    table.insert(index, it.id)
    table.insert(index, it.provider)
    table.insert(acks, it.entry)
    out[i] = 1
  end
  seen[it.entry] = true
end
if #index > 0 then
  redis.call('HSET', KEYS[2], unpack(index))
end
if #acks > 0 then
  redis.call('XACK', KEYS[1], ARGV[1], unpack(acks))
  redis.call('XDEL', KEYS[1], unpack(acks))
end
return out
