-- replay_dead.lua: put a dead record's job back on its shard's intake as a new job, and delete
-- the record, in one step: a record is replayed once however often this runs, and a record
-- already replayed or purged is left alone.
--
-- KEYS[1] dead stream
-- KEYS[2] intake stream of the same shard
-- KEYS[3] bulk intake stream of the same shard: the job of a record that came from the bulk
--         intake or a bulk lane goes back there, so that a job naming no class stays bulk
-- ARGV[1] the dead record's entry id
-- Returns {1, intake entry id} when replayed; {0, ''} when the record is gone (replayed or
-- purged before); {2, ''} when the record keeps only the first bytes of its job (a "note"
-- field: an invalid job, or an entry over the entry limit), which cannot be replayed; {3, ''} when it has no job. The last two leave the record as it is.
--
-- The XADD is the first write: when Redis is out of memory it refuses the whole script there,
-- and the record stays.
local r = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if #r == 0 then
  return {0, ''}
end
local f = r[1][2]
local job, note, from = nil, nil, ''
for i = 1, #f, 2 do
  if f[i] == 'job' then
    job = f[i + 1]
  elseif f[i] == 'note' then
    note = f[i + 1]
  elseif f[i] == 'from' then
    from = f[i + 1]
  end
end
if note then
  return {2, ''}
end
if not job or job == '' then
  return {3, ''}
end
local intake = KEYS[2]
if from == KEYS[3] or string.sub(from, -5) == ':bulk' then
  intake = KEYS[3]
end
local id = redis.call('XADD', intake, '*', 'job', job)
redis.call('XDEL', KEYS[1], ARGV[1])
return {1, id}
