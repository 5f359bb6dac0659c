-- cancel_entry.lua: cancel a job whose entry waits in the intake or in a lane and has not been
-- read by the consumer group: delete the entry and write the job's one ledger record, CANCELED.
-- An entry the group has read is a worker's (pending, or about to be acknowledged): it is left
-- alone, for the worker's own outcome is the job's record, and removing it under the worker
-- would give the job two records or none.
--
-- KEYS[1] the stream (an intake or a lane stream of the shard)
-- KEYS[2] jobs index of the shard (HASH job id -> provider, or "accepted")
-- KEYS[3] results (ledger) stream
-- ARGV[1] consumer group
-- ARGV[2] entry id (found by the caller's scan)
-- ARGV[3] job id
-- ARGV[4] "1" when KEYS[1] is a lane (its job is indexed), "0" for the intake
-- ARGV[5] the record's detail
-- ARGV[6] now, unix ms (the record's "at")
-- ARGV[7] "1" to write the record; "0" for a copy of a job whose record another place writes
-- Returns 1 cancelled; 2 the group has read the entry (in flight); 3 the job was accepted
-- already (sent); 0 the entry is gone or holds another job (nothing changed).
local e = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])
if #e == 0 then
  return 0
end
local f, fields = {}, e[1][2]
for i = 1, #fields, 2 do
  f[fields[i]] = fields[i + 1]
end
local ok, j = pcall(cjson.decode, f.job or '')
if not ok or type(j) ~= 'table' or j.id ~= ARGV[3] then
  return 0
end
-- The group's last delivered id: entries up to it have been handed to a consumer.
local last = nil
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local h = {}
  for i = 1, #g, 2 do
    h[g[i]] = g[i + 1]
  end
  if h.name == ARGV[1] then
    last = h['last-delivered-id']
  end
end
if last then
  local lm, ls = string.match(last, '^(%d+)-(%d+)$')
  local em, es = string.match(ARGV[2], '^(%d+)-(%d+)$')
  lm, ls, em, es = tonumber(lm), tonumber(ls), tonumber(em), tonumber(es)
  if em < lm or (em == lm and es <= ls) then
    return 2
  end
end
local provider, attempt = f.provider or '', f.attempt or '0'
if ARGV[4] == '1' then
  if redis.call('HGET', KEYS[2], ARGV[3]) == 'accepted' then
    return 3
  end
  redis.call('HDEL', KEYS[2], ARGV[3])
end
redis.call('XDEL', KEYS[1], ARGV[2])
if ARGV[7] ~= '1' then
  return 1
end
local rec = {'id', ARGV[3], 'provider', provider, 'code', 'CANCELED', 'status', '0',
  'detail', ARGV[5], 'attempt', attempt, 'latency_ms', '0', 'at', ARGV[6]}
if type(j.campaign) == 'string' then
  table.insert(rec, 'campaign')
  table.insert(rec, j.campaign)
  camp_count(camp_base(KEYS[3]), j.campaign, 'CANCELED')
end
redis.call('XADD', KEYS[3], '*', unpack(rec))
return 1
