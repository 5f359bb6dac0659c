-- read_intake.lua: read new intake entries for this consumer, and dead-letter where they lie
-- the ones that break the entry rules (entry_check.lua), so that a worker only ever receives
-- entries of a bounded size.
--
-- KEYS[1] intake stream
-- KEYS[2] dead stream
-- ARGV[1] consumer group
-- ARGV[2] this consumer
-- ARGV[3] at most this many entries
-- ARGV[4] largest job allowed, bytes
-- ARGV[5] now, unix ms (the dead records' "at")
-- ARGV[6] dead stream cap (approximate MAXLEN; 0 = none)
-- Returns {n_read, last_delivered_id, id1, job1, id2, job2, ..., '', refused_id1, reason1,
-- ...}: how many entries the read returned; the group's last delivered id when the read was
-- short (the stream is drained: the caller waits for anything after it), '' otherwise; the
-- good entries; then, after an empty separator, the job id and reason of every entry
-- dead-lettered here.
local r = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', tonumber(ARGV[3]),
  'STREAMS', KEYS[1], '>')
local max_bytes = tonumber(ARGV[4])
local good, refused, n = {}, {}, 0
if r then
  for _, e in ipairs(r[1][2]) do
    n = n + 1
    local id, fields = e[1], e[2]
    local job, reason, raw = check_entry(fields, max_bytes)
    if job then
      table.insert(good, id)
      table.insert(good, job)
    else
      local jobId = best_id(raw, max_bytes)
      xadd_capped(KEYS[2], ARGV[6], dead_fields(jobId, 'INVALID_JOB', reason, KEYS[1], id, '', '0',
        ARGV[5], raw, MAX_INVALID_JOB))
      redis.call('XACK', KEYS[1], ARGV[1], id)
      redis.call('XDEL', KEYS[1], id)
      table.insert(refused, jobId)
      table.insert(refused, reason)
    end
  end
end
-- Only a short read means the stream is drained for now; then the caller waits for what comes
-- after the last entry delivered to the group.
local last = ''
if n < tonumber(ARGV[3]) then
  last = '0-0'
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
    local f = {}
    for i = 1, #g, 2 do
      f[g[i]] = g[i + 1]
    end
    if f['name'] == ARGV[1] then
      last = f['last-delivered-id']
    end
  end
end
local out = {n, last}
for _, v in ipairs(good) do
  table.insert(out, v)
end
table.insert(out, '')
for _, v in ipairs(refused) do
  table.insert(out, v)
end
return out
