#!lua flags=allow-oom
-- finish.lua: record a terminal outcome and remove the lane entry.
--
-- It runs even when Redis is out of memory (allow-oom): the outcome of a push that went out
-- must be written, or a replica that takes over the entry sends it a second time; and a
-- finished job frees its lane entry, which is larger than its ledger record.
--
-- KEYS[1] source stream (a lane)
-- KEYS[2] results (ledger) stream
-- KEYS[3] gone stream
-- KEYS[4] sent mark of the job (sent:<id>)
-- KEYS[5] gone mark of the endpoint (gonemark:<hash>; any key of the shard when ARGV[7] is "0")
-- KEYS[6] jobs index of the shard (HASH job id -> provider)
-- ARGV[1]  consumer group
-- ARGV[2]  source entry id
-- ARGV[3]  consumer that must own the entry
-- ARGV[4]  "1" to set the sent mark
-- ARGV[5]  sent mark TTL, ms
-- ARGV[6]  "1" to write the gone stream (GONE and KEY_MISMATCH: the upstream must act)
-- ARGV[7]  "1" to set the endpoint's gone mark as well (GONE only: queued retries to the
--          endpoint are dropped; a KEY_MISMATCH endpoint may still take a job signed with the
--          right key)
-- ARGV[8]  gone mark TTL, ms
-- ARGV[9]  results cap (approximate MAXLEN; 0 = none)
-- ARGV[10] gone cap (approximate MAXLEN; 0 = none)
-- ARGV[11] number of ledger field/value arguments that follow (n)
-- ARGV[12 .. 11+n] ledger record, field/value pairs
-- ARGV[12+n ..]    gone record, field/value pairs (only when ARGV[6] is "1")
-- ARGV[#ARGV]      job id (the jobs index field)
-- Returns 1 when recorded (or already recorded by another attempt); 0 when nothing changed.
--
-- Exactly one terminal record per job, even when a send overlaps a reclaim:
-- * not the owner any more (the entry was reclaimed while this send was in flight) and the
--   send was accepted: the push is out, so record it now with its sent mark; the new owner
--   finds the mark and acks the entry without sending again. Any other outcome: nothing.
-- * the owner, and the job's sent mark is already set (another attempt was accepted and
--   recorded): ack and delete the entry, no second record.
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
local owner = #p > 0 and p[1][2] == ARGV[3]
local marked = redis.call('EXISTS', KEYS[4]) == 1
local n = tonumber(ARGV[11])
local jobId = ARGV[#ARGV]

local function xadd(key, cap, first, last)
  local args = {'XADD', key}
  if tonumber(cap) > 0 then
    table.insert(args, 'MAXLEN')
    table.insert(args, '~')
    table.insert(args, cap)
  end
  table.insert(args, '*')
  for i = first, last do
    table.insert(args, ARGV[i])
  end
  redis.call(unpack(args))
end

if not owner then
  if ARGV[4] == '1' and not marked then
    redis.call('SET', KEYS[4], '1', 'PX', ARGV[5])
    xadd(KEYS[2], ARGV[9], 12, 11 + n)
    redis.call('HDEL', KEYS[6], jobId)
    return 1
  end
  return 0
end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('HDEL', KEYS[6], jobId)
if marked then
  return 1
end
if ARGV[4] == '1' then
  redis.call('SET', KEYS[4], '1', 'PX', ARGV[5])
end
if ARGV[7] == '1' then
  redis.call('SET', KEYS[5], '1', 'PX', ARGV[8])
end
if ARGV[6] == '1' then
  xadd(KEYS[3], ARGV[10], 12 + n, #ARGV - 1)
end
xadd(KEYS[2], ARGV[9], 12, 11 + n)
return 1
