-- promote.lua: move due members of the delayed set back to their lane as new entries. Safe to
-- run on every replica at once: each member is moved by exactly one call.
--
-- KEYS[1] delayed ZSET
-- KEYS[2] delayed:data HASH
-- KEYS[3] rcpt HASH
-- KEYS[4] dead stream
-- KEYS[5] jobs index of the shard (HASH job id -> provider): a member dead-lettered here leaves it
-- KEYS[6] delayed:count HASH (provider -> counted retries waiting): a member to_delayed.lua
--         marked counted leaves its provider's count
-- KEYS[7] delayed:scheduled ZSET (job id -> send_at of the scheduled jobs among the members):
--         when a call moves members, every member due by now leaves it, promoted or not (a
--         scheduled job taken out of the delayed set otherwise goes so once its time has passed;
--         status counts only those still to come)
-- ARGV[1] now, unix ms (members with a score <= now are due)
-- ARGV[2] at most this many members
-- ARGV[3] lane key prefix of the shard ("<prefix>:{<shard>}:lane:"); the provider id completes
--         it. Lane keys are built here because the stored provider decides them; they share
--         the shard's hash tag, so the script still touches one slot. A member whose data has
--         class "bulk" goes to the provider's bulk lane (the lane key and ":bulk").
-- ARGV[4] consumer group
-- ARGV[5] dead stream cap (approximate MAXLEN; 0 = none)
-- Returns the number of members moved to a lane.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local moved = 0
for _, id in ipairs(due) do
  local raw = redis.call('HGET', KEYS[2], id)
  local ok, d = false, nil
  if raw then
    ok, d = pcall(cjson.decode, raw)
  end
  if ok and type(d) == 'table' and type(d.provider) == 'string' and type(d.job) == 'string' then
    local lane = ARGV[3] .. d.provider
    if d.class == 'bulk' then
      lane = lane .. ':bulk'
    end
    if redis.call('EXISTS', lane) == 0 then
      redis.call('XGROUP', 'CREATE', lane, ARGV[4], '0', 'MKSTREAM')
    end
    local entry = {'XADD', lane, '*', 'job', d.job, 'provider', d.provider,
      'attempt', tostring(d.attempt), 'enqueued_at', tostring(d.enqueued_at)}
    if type(d.campaign) == 'string' then
      table.insert(entry, 'campaign')
      table.insert(entry, d.campaign)
    end
    if d.deliveries then
      table.insert(entry, 'deliveries')
      table.insert(entry, tostring(d.deliveries))
    end
    redis.call(unpack(entry))
    if type(d.recipient) == 'string' and d.recipient ~= '' then
      if redis.call('HINCRBY', KEYS[3], d.recipient, -1) <= 0 then
        redis.call('HDEL', KEYS[3], d.recipient)
      end
    end
    if d.counted == true then
      if redis.call('HINCRBY', KEYS[6], d.provider, -1) <= 0 then
        redis.call('HDEL', KEYS[6], d.provider)
      end
    end
    moved = moved + 1
  else
    -- A member without usable data cannot be delivered; say so rather than drop it.
    xadd_capped(KEYS[4], ARGV[5], {'id', id, 'code', 'INVALID_JOB', 'reason', 'delayed member has no readable data',
      'from', KEYS[1], 'entry', '', 'provider', '', 'attempt', '0', 'at', ARGV[1], 'job', raw or ''})
    redis.call('HDEL', KEYS[5], id)
  end
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
end
-- Only when members came due: a call that moves nothing adds no command.
if KEYS[7] and #due > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', ARGV[1])
end
-- An empty set holds no retries: a count left by a member no script took off (written or
-- moved by an older release) goes with it.
if #due > 0 and redis.call('ZCARD', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[6])
end
return moved
