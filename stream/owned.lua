-- owned.lua: which entries of a stream are still pending for a consumer, for the scripts that
-- change the entries of many callers in one call (to_lane.lua, finish.lua: Go puts this file in
-- front of each when it builds them).

-- parse_id splits a stream id "<ms>-<seq>" into two numbers; nil when it is not one.
local function parse_id(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  if not ms then
    return nil
  end
  return tonumber(ms), tonumber(seq)
end

-- pending_for returns the ids (a table id -> true) among ids that are pending in group for
-- consumer. For many ids, one XPENDING of the consumer's own entries from the smallest id to
-- the largest answers for all of them: Redis walks only that consumer's pending list, which
-- holds no more than what the consumer has in hand. When that reply is cut at its count, each
-- id it did not list is asked alone; so is each of a few ids.
local function pending_for(stream, group, consumer, ids)
  local mine = {}
  if #ids < 8 then
    -- A few entries: one look each costs less than listing everything the consumer holds in
    -- their range (a lane's range spans its sends in flight).
    for _, id in ipairs(ids) do
      if #redis.call('XPENDING', stream, group, id, id, 1, consumer) > 0 then
        mine[id] = true
      end
    end
    return mine
  end
  local lo, hi = ids[1], ids[1]
  local loMs, loSeq = parse_id(lo)
  local hiMs, hiSeq = loMs, loSeq
  for i = 2, #ids do
    local ms, seq = parse_id(ids[i])
    if not ms or not loMs then
      lo, hi, loMs = '-', '+', nil
      break
    end
    if ms < loMs or (ms == loMs and seq < loSeq) then
      lo, loMs, loSeq = ids[i], ms, seq
    end
    if ms > hiMs or (ms == hiMs and seq > hiSeq) then
      hi, hiMs, hiSeq = ids[i], ms, seq
    end
  end
  if not loMs then
    lo, hi = '-', '+'
  end
  local limit = math.max(4 * #ids, 1000)
  local p = redis.call('XPENDING', stream, group, lo, hi, limit, consumer)
  for _, x in ipairs(p) do
    mine[x[1]] = true
  end
  if #p >= limit then
    for _, id in ipairs(ids) do
      if not mine[id] and #redis.call('XPENDING', stream, group, id, id, 1, consumer) > 0 then
        mine[id] = true
      end
    end
  end
  return mine
end
