-- requeue.lua: hand entries back to their stream, so that the next read of any consumer takes
-- them: each is written again at the stream's end with its fields and its deliveries so far, and
-- the old entry acknowledged and deleted. Two uses: the entries of consumers that are not alive
-- (a crashed or stopped replica) once they have idled past the visibility timeout; and, at a
-- worker's start, every entry still pending under its own name (left by an earlier process of
-- that name). An entry delivered too often goes to the dead stream instead (a job that keeps
-- killing its workers must not go round forever).
--
-- KEYS[1] stream (an intake or a lane)
-- KEYS[2] dead stream
-- KEYS[3] jobs index of the shard (HASH job id -> provider): a lane entry dead-lettered here
--         leaves it; for an intake, any key of the shard (intake entries are not indexed)
-- ARGV[1] consumer group
-- ARGV[2] minimum idle time, ms
-- ARGV[3] at most this many entries
-- ARGV[4] most deliveries allowed (0 = no limit)
-- ARGV[5] now, unix ms (the dead record's "at")
-- ARGV[6] dead record code
-- ARGV[7] dead stream cap (approximate MAXLEN; 0 = none)
-- ARGV[8] "1" for an intake: its entries are checked as read_intake.lua checks them
-- ARGV[9] largest job allowed, bytes (a dead record carries at most this much of a job)
-- ARGV[10] the consumer whose entries to hand back, or "" for those of every consumer not alive
-- ARGV[11] n, the number of consumers that follow
-- ARGV[12..11+n] consumers that are alive (fresh heartbeats): their entries are theirs however
--          long they idle (a slow send, or a replica cut off from Redis that is writing its
--          outcomes now)
-- ARGV[12+n..] entry ids not to take: those the consumer named in ARGV[10] is working on (a
--          send slower than the visibility timeout); its other idle entries are ones it lost
--          track of (read by a call whose reply never reached it)
-- Returns {requeued, too_many, invalid}: the entries written again, those dead-lettered for too
-- many deliveries, and the intake entries dead-lettered for breaking the entry rules.
local want = tonumber(ARGV[3])
local maxBytes = tonumber(ARGV[9])
local only = ARGV[10]
local alive, spared = {}, {}
local nAlive = tonumber(ARGV[11])
for i = 12, 11 + nAlive do
  alive[ARGV[i]] = true
end
for i = 12 + nAlive, #ARGV do
  spared[ARGV[i]] = true
end
-- Walk the pending entries from the oldest, a bounded number of pages: the front may be busy
-- entries of live replicas.
local picked, times = {}, {}
local start = '-'
local page = math.max(want, 100)
for _ = 1, 8 do
  local p
  if only ~= '' then
    p = redis.call('XPENDING', KEYS[1], ARGV[1], 'IDLE', tonumber(ARGV[2]), start, '+', page, only)
  else
    p = redis.call('XPENDING', KEYS[1], ARGV[1], 'IDLE', tonumber(ARGV[2]), start, '+', page)
  end
  for _, x in ipairs(p) do
    if #picked < want and not spared[x[1]] and (only ~= '' or not alive[x[2]]) then
      table.insert(picked, x[1])
      times[x[1]] = tonumber(x[4])
    end
  end
  if #p < page or #picked >= want then
    break
  end
  start = '(' .. p[#p][1]
end

local requeued, tooMany, invalid = 0, 0, 0
local maxDeliveries = tonumber(ARGV[4])
for _, id in ipairs(picked) do
  local e = redis.call('XRANGE', KEYS[1], id, id)[1]
  if e then
    local fields, f = e[2], {}
    for i = 1, #fields, 2 do
      f[fields[i]] = fields[i + 1]
    end
    local deliveries = (tonumber(f.deliveries or '0') or 0) + times[id]
    local broken, raw = nil, nil
    if ARGV[8] == '1' then
      _, broken, raw = check_entry(fields, maxBytes)
    end
    if broken then
      -- An intake entry that breaks the entry rules is dead-lettered as read_intake.lua does,
      -- never copied: it could be of any size.
      xadd_capped(KEYS[2], ARGV[7], dead_fields(best_id(raw, maxBytes), 'INVALID_JOB', broken, KEYS[1], id, '', '0',
        ARGV[5], raw, MAX_INVALID_JOB))
      invalid = invalid + 1
    elseif maxDeliveries > 0 and deliveries >= maxDeliveries then
      local campaign, recipient, jobId = nil, nil, ''
      if f.job and #f.job <= maxBytes then
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
      local recorded = ARGV[8] ~= '1' and jobId ~= '' and redis.call('HGET', KEYS[3], jobId) == 'accepted'
      if not recorded then
        local keep = maxBytes
        if ARGV[8] == '1' and jobId == '' then
          keep = MAX_INVALID_JOB
        end
        local dead = dead_fields(jobId, ARGV[6], 'delivered ' .. deliveries .. ' times without finishing',
          KEYS[1], id, f.provider or '', f.attempt or '0', ARGV[5], camp_whole(camp_base(KEYS[2]), f.job, f.campaign), keep)
        if campaign then
          table.insert(dead, 'campaign')
          table.insert(dead, campaign)
          if recipient then
            table.insert(dead, 'recipient')
            table.insert(dead, recipient)
          end
          camp_count(camp_base(KEYS[2]), campaign, ARGV[6])
        end
        xadd_capped(KEYS[2], ARGV[7], dead)
        tooMany = tooMany + 1
      end
      if ARGV[8] ~= '1' and jobId ~= '' then
        redis.call('HDEL', KEYS[3], jobId)
      end
    else
      local again = {'XADD', KEYS[1], '*'}
      for i = 1, #fields, 2 do
        if fields[i] ~= 'deliveries' then
          table.insert(again, fields[i])
          table.insert(again, fields[i + 1])
        end
      end
      table.insert(again, 'deliveries')
      table.insert(again, tostring(deliveries))
      redis.call(unpack(again))
      requeued = requeued + 1
    end
  end
  redis.call('XACK', KEYS[1], ARGV[1], id)
  redis.call('XDEL', KEYS[1], id)
end
return {requeued, tooMany, invalid}
