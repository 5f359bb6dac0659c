-- reclaim.lua: take over entries that other consumers left pending too long and that no live
-- replica owns, and dead-letter the ones delivered too often (a job that keeps killing its
-- workers must not go round forever).
--
-- KEYS[1] stream (intake or a lane)
-- KEYS[2] dead stream
-- KEYS[3] jobs index of the shard (HASH job id -> provider): a lane entry dead-lettered here
--         leaves it; for the intake, any key of the shard (intake entries are not indexed)
-- ARGV[1] consumer group
-- ARGV[2] this consumer (the new owner)
-- ARGV[3] minimum idle time, ms
-- ARGV[4] at most this many entries
-- ARGV[5] most deliveries allowed (0 = no limit)
-- ARGV[6] now, unix ms (the dead record's "at")
-- ARGV[7] dead record code
-- ARGV[8] dead stream cap (approximate MAXLEN; 0 = none)
-- ARGV[9] "1" for the intake stream: entries are checked as read_intake.lua checks them
-- ARGV[10] largest job allowed, bytes (a dead record of a job delivered too often carries at
--          most this much of it; one of an entry that broke the entry rules, MAX_INVALID_JOB)
-- ARGV[11] h, the number of held ids that follow
-- ARGV[12..11+h] entries this consumer still holds in memory (waiting for a slot or a token,
--          or sending): each one still pending for it has its idle time reset first, with
--          XCLAIM ... JUSTID, which does not count a delivery. They are its own and it is
--          working on them: claiming them would count a delivery each visibility timeout
--          until --max-deliveries dead-lettered a job that was never failed.
-- ARGV[12+h..] consumers that are alive (fresh heartbeats), this one excluded: their entries are
--          theirs however long they idle (a slow send, or a replica that was cut off from
--          Redis and is writing its outcomes now). This consumer's own idle entries that it
--          does not hold are claimed: they are ones it lost track of.
-- Returns {too_many, invalid, claimed1, claimed2, ...}: the number of entries dead-lettered
-- for too many deliveries and for breaking the entry rules, then each claimed entry as
-- {id, {field, value, ...}}.
local want = tonumber(ARGV[4])
local max_bytes = tonumber(ARGV[10])
local held = tonumber(ARGV[11])
for i = 12, 11 + held do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if p[1] and p[1][2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
  end
end
local alive = {}
for i = 12 + held, #ARGV do
  alive[ARGV[i]] = true
end
-- Walk the PEL from the oldest entry, a bounded number of pages, collecting idle entries of
-- dead owners: the front of the PEL may be busy entries of live replicas.
local ids, counts = {}, {}
local start = '-'
local page = math.max(want, 500)
for _ = 1, 16 do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], 'IDLE', tonumber(ARGV[3]), start, '+', page)
  for _, x in ipairs(p) do
    if not alive[x[2]] and #ids < want then
      table.insert(ids, x[1])
      counts[x[1]] = tonumber(x[4]) + 1 -- this claim is one more delivery
    end
  end
  if #p < page or #ids >= want then
    break
  end
  start = '(' .. p[#p][1]
end
if #ids == 0 then
  return {0, 0}
end
local claimArgs = {'XCLAIM', KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3])}
for _, id in ipairs(ids) do
  table.insert(claimArgs, id)
end
local claimed = redis.call(unpack(claimArgs))
local maxDeliveries = tonumber(ARGV[5])
local out = {0, 0}
local tooMany, invalid = 0, 0
for _, e in ipairs(claimed) do
  if type(e) == 'table' and e[1] and type(e[2]) == 'table' then
    local id, fields = e[1], e[2]
    local reason, raw = nil, nil
    if ARGV[9] == '1' then
      _, reason, raw = check_entry(fields, max_bytes)
    end
    local f = {}
    for i = 1, #fields, 2 do
      f[fields[i]] = fields[i + 1]
    end
    if reason then
      xadd_capped(KEYS[2], ARGV[8], dead_fields(best_id(raw, max_bytes), 'INVALID_JOB', reason,
        KEYS[1], id, '', '0', ARGV[6], raw, MAX_INVALID_JOB))
      redis.call('XACK', KEYS[1], ARGV[1], id)
      redis.call('XDEL', KEYS[1], id)
      invalid = invalid + 1
    elseif maxDeliveries > 0 and (counts[id] or 0) > maxDeliveries then
      local campaign, recipient = nil, nil
      local jobId = ''
      if f.job and #f.job <= max_bytes then
        local ok, j = pcall(cjson.decode, f.job)
        if ok and type(j) == 'table' and type(j.id) == 'string' then
          jobId = j.id
          if type(j.campaign) == 'string' then
            campaign = j.campaign
            if type(j.recipient) == 'string' and j.recipient ~= '' then
              recipient = j.recipient
            end
          end
        end
      end
      -- A lane entry whose job another attempt's accepted send recorded (the jobs index says
      -- "accepted") has its terminal record: it is only removed.
      local recorded = ARGV[9] ~= '1' and jobId ~= '' and redis.call('HGET', KEYS[3], jobId) == 'accepted'
      if not recorded then
        local dead = dead_fields(jobId, ARGV[7],
          'delivered ' .. (counts[id] - 1) .. ' times without finishing', KEYS[1], id,
          f.provider or '', f.attempt or '0', ARGV[6], f.job, max_bytes)
        if campaign then
          table.insert(dead, 'campaign')
          table.insert(dead, campaign)
          if recipient then
            table.insert(dead, 'recipient')
            table.insert(dead, recipient)
          end
          camp_count(camp_base(KEYS[2]), campaign, ARGV[7])
        end
        xadd_capped(KEYS[2], ARGV[8], dead)
        tooMany = tooMany + 1
      end
      redis.call('XACK', KEYS[1], ARGV[1], id)
      redis.call('XDEL', KEYS[1], id)
      if ARGV[9] ~= '1' and jobId ~= '' then
        redis.call('HDEL', KEYS[3], jobId)
      end
    else
      table.insert(out, {id, fields})
    end
  end
end
out[1], out[2] = tooMany, invalid
return out
