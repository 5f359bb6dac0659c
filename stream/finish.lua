#!lua flags=allow-oom
-- finish.lua: record terminal outcomes and remove their lane entries. One call records the
-- outcomes of every caller whose write shares a pipeline (stream/group.go), with one XACK and
-- one XDEL per lane.
--
-- It runs even when Redis is out of memory (allow-oom): the outcome of a push that went out
-- must be written, or a replica that takes over the entry sends it a second time; and a
-- finished job frees its lane entry, which is larger than its ledger record.
--
-- KEYS[1] results (ledger) stream
-- KEYS[2] gone stream
-- KEYS[3] jobs index of the shard (HASH job id -> provider, or "accepted": see below)
-- KEYS[4] the duplicate-suppression window of the shard (window.lua)
-- for item i = 1 .. n: KEYS[3 + 2i] source stream (a lane), KEYS[4 + 2i] gone mark of the
-- endpoint (gonemark:<hash>; any key of the shard when the item sets none)
-- ARGV[1] consumer group
-- ARGV[2] consumer that must own the entries
-- ARGV[3] the window's TTL, ms (Options.SentTTL)
-- ARGV[4] gone mark TTL, ms
-- ARGV[5] n, the number of items
-- then for each item: the count of its arguments (15, or 16 with an endpoint), source entry
-- id, job id, "1" to put the job in the window (accepted), the job's window field, "1" to write
-- the gone stream (GONE and KEY_MISMATCH: the upstream must act), "1" to set
-- the endpoint's gone mark as well (GONE only: queued retries to the endpoint are dropped; a
-- KEY_MISMATCH endpoint may still take a job signed with the right key), then the ledger
-- record's values: provider, code, status, detail, attempt, latency_ms, at, campaign and
-- recipient ("" for none: the record leaves them out); and the endpoint, for the gone record
-- (which repeats the job id, provider, code, detail, at and campaign).
-- A record of a campaign's recipient counts in the campaign's hash (camp.lua).
-- Returns one result per item: 1 when recorded (or already recorded by another attempt); 0 when
-- nothing changed.
--
-- An accepted job enters the window at Redis's TIME, read once a call (window.lua).
--
-- Exactly one terminal record per job, even when a send overlaps a reclaim:
-- * not the owner any more (the entry was reclaimed while this send was in flight) and the
--   send was accepted, while the job is still held (in the jobs index: pending for its new
--   owner, or waiting to retry): the push is out, so record it now, put it in the window, and
--   mark it "accepted" in the jobs index, where it stays until the job's live copy ends: its
--   owner finds the mark (Store.WasSent, or this script) and acks the entry without sending or
--   recording again. The job no longer held (the attempt that took it over ended it, with a
--   record): nothing, as for any other outcome; a second record would be a second terminal
--   record, and a mark would outlive the job.
-- * the owner, and the job is marked accepted (another attempt was, in this call or before):
--   ack and delete the entry, no second record.
local n = tonumber(ARGV[5])
local items, streams, byStream, jobIds = {}, {}, {}, {}
local a = 6
for i = 1, n do
  local it = {entry = ARGV[a + 1], id = ARGV[a + 2], sent = ARGV[a + 3] == '1', field = ARGV[a + 4],
    gone = ARGV[a + 5] == '1', mark = ARGV[a + 6] == '1', v = a + 7,
    stream = KEYS[3 + 2 * i], goneKey = KEYS[4 + 2 * i]}
  items[i], jobIds[i] = it, it.id
  if not byStream[it.stream] then
    byStream[it.stream] = {}
    table.insert(streams, it.stream)
  end
  table.insert(byStream[it.stream], it.entry)
  a = a + 1 + tonumber(ARGV[a])
end

-- ledger writes item it's ledger record; gone writes its gone record.
local base = camp_base(KEYS[1])
local function ledger(it)
  local v = it.v
  local f = {'XADD', KEYS[1], '*', 'id', it.id, 'provider', ARGV[v], 'code', ARGV[v + 1], 'status', ARGV[v + 2],
    'detail', ARGV[v + 3], 'attempt', ARGV[v + 4], 'latency_ms', ARGV[v + 5], 'at', ARGV[v + 6]}
  if ARGV[v + 7] ~= '' then
    table.insert(f, 'campaign')
    table.insert(f, ARGV[v + 7])
    if ARGV[v + 8] ~= '' then
      table.insert(f, 'recipient')
      table.insert(f, ARGV[v + 8])
    end
    camp_count(base, ARGV[v + 7], ARGV[v + 1])
  end
  return redis.call(unpack(f))
end
local function gone(it)
  local v = it.v
  local f = {'XADD', KEYS[2], '*', 'id', it.id, 'provider', ARGV[v], 'code', ARGV[v + 1], 'endpoint', ARGV[v + 9],
    'detail', ARGV[v + 3], 'at', ARGV[v + 6]}
  if ARGV[v + 7] ~= '' then
    table.insert(f, 'campaign')
    table.insert(f, ARGV[v + 7])
  end
  redis.call(unpack(f))
end

local mine = {}
for _, st in ipairs(streams) do
  mine[st] = pending_for(st, ARGV[1], ARGV[2], byStream[st])
end
local index = redis.call('HMGET', KEYS[3], unpack(jobIds))
-- An accepted send whose entry is not ours (any more) may be this very record written before
-- (a retry of a call whose reply was lost): the window says so. Owned entries need no look:
-- an attempt accepted while another held the entry marked the jobs index.
local look, lookFields = {}, {}
for i, it in ipairs(items) do
  if it.sent and not mine[it.stream][it.entry] and index[i] ~= 'accepted' then
    table.insert(look, i)
    table.insert(lookFields, it.field)
  end
end
local inWindow = {}
if #look > 0 then
  for j, v in ipairs(w_seen_all(KEYS[4], lookFields, w_now(), tonumber(ARGV[3]))) do
    inWindow[look[j]] = v
  end
end
local markedNow, acks, unindex, accepted, fields, out = {}, {}, {}, {}, {}, {}
-- accept puts item it in the window as accepted.
local function accept(it)
  markedNow[it.id] = true
  table.insert(fields, it.field)
end
for i, it in ipairs(items) do
  local owner = mine[it.stream][it.entry]
  mine[it.stream][it.entry] = nil -- a second item for the same entry finds it taken
  local isMarked = index[i] == 'accepted' or inWindow[i] or markedNow[it.id]
  out[i] = 1
  if not owner then
    if it.sent and not isMarked and index[i] then
      ledger(it)
      accept(it)
      table.insert(accepted, it.id)
      table.insert(accepted, 'accepted')
    else
      -- Not accepted; or recorded already (by another attempt, or by this call before its
      -- reply was lost); or the job is no longer held: the attempt that took its entry over
      -- ended it with the job's one terminal record, which stands. Nothing is written then:
      -- not a second record, and not the window either (a record that says the job was not
      -- delivered beside a window that swallows its replay would leave it no true record).
      out[i] = 0
    end
  else
    acks[it.stream] = acks[it.stream] or {}
    table.insert(acks[it.stream], it.entry)
    table.insert(unindex, it.id)
    if not isMarked then
      if it.mark then
        redis.call('SET', it.goneKey, '1', 'PX', ARGV[4])
      end
      if it.gone then
        gone(it)
      end
      ledger(it)
      if it.sent then
        accept(it)
      end
    end
  end
end
for _, st in ipairs(streams) do
  if acks[st] then
    redis.call('XACK', st, ARGV[1], unpack(acks[st]))
    redis.call('XDEL', st, unpack(acks[st]))
  end
end
if #accepted > 0 then
  redis.call('HSET', KEYS[3], unpack(accepted))
end
if #unindex > 0 then
  redis.call('HDEL', KEYS[3], unpack(unindex))
end
if #fields > 0 then
  w_add(KEYS[4], fields, w_now(), tonumber(ARGV[3]))
end
return out
