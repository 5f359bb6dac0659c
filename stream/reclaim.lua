-- reclaim.lua: take over entries other consumers left pending too long, and dead-letter the
-- ones delivered too often (a job that keeps killing its workers must not go round forever).
--
-- KEYS[1] stream (intake or a lane)
-- KEYS[2] dead stream
-- ARGV[1] consumer group
-- ARGV[2] this consumer (the new owner)
-- ARGV[3] minimum idle time, ms
-- ARGV[4] at most this many entries
-- ARGV[5] most deliveries allowed (0 = no limit)
-- ARGV[6] now, unix ms (the dead record's "at")
-- ARGV[7] dead record code
-- ARGV[8] dead stream cap (approximate MAXLEN; 0 = none)
-- Returns {dead, claimed1, claimed2, ...}: the number of entries dead-lettered, then each
-- claimed entry as {id, {field, value, ...}}.
-- XAUTOCLAIM looks at no more than 10 x COUNT pending entries per call, and entries claimed a
-- moment ago (not idle, low ids) sit at the front of the PEL: one call with a small COUNT could
-- find nothing behind them. So follow the cursor, a bounded number of calls, until COUNT entries
-- are claimed or the whole PEL has been looked at.
local want = tonumber(ARGV[4])
local found = {}
local cursor = '0-0'
for _ = 1, 64 do
  local r = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], cursor, 'COUNT', want - #found)
  -- Entries deleted while pending: Redis 7 drops them from the PEL and lists their ids here;
  -- acking them as well costs nothing and keeps older servers' PELs clean.
  if r[3] then
    for _, id in ipairs(r[3]) do
      redis.call('XACK', KEYS[1], ARGV[1], id)
    end
  end
  for _, e in ipairs(r[2]) do
    table.insert(found, e)
  end
  cursor = r[1]
  if #found >= want or cursor == '0-0' then
    break
  end
end
local maxDeliveries = tonumber(ARGV[5])
local out = {0}
local dead = 0
for _, e in ipairs(found) do
  if type(e) == 'table' and e[1] and type(e[2]) == 'table' then
    local id, fields = e[1], e[2]
    local count = 0
    if maxDeliveries > 0 then
      local p = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1)
      if #p > 0 then
        count = tonumber(p[1][4])
      end
    end
    if maxDeliveries > 0 and count > maxDeliveries then
      local f = {}
      for i = 1, #fields, 2 do
        f[fields[i]] = fields[i + 1]
      end
      local jobId = ''
      if f.job then
        local ok, j = pcall(cjson.decode, f.job)
        if ok and type(j) == 'table' and type(j.id) == 'string' then
          jobId = j.id
        end
      end
      local args = {'XADD', KEYS[2]}
      if tonumber(ARGV[8]) > 0 then
        table.insert(args, 'MAXLEN')
        table.insert(args, '~')
        table.insert(args, ARGV[8])
      end
      for _, v in ipairs({'*', 'id', jobId, 'code', ARGV[7],
          'reason', 'delivered ' .. (count - 1) .. ' times without finishing',
          'from', KEYS[1], 'entry', id, 'provider', f.provider or '', 'attempt', f.attempt or '0',
          'at', ARGV[6], 'job', f.job or ''}) do
        table.insert(args, v)
      end
      redis.call(unpack(args))
      redis.call('XACK', KEYS[1], ARGV[1], id)
      redis.call('XDEL', KEYS[1], id)
      dead = dead + 1
    else
      table.insert(out, {id, fields})
    end
  end
end
out[1] = dead
return out
