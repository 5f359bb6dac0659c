-- window.lua: the duplicate-suppression window, which remembers the jobs accepted within the
-- sent-mark TTL so that a copy enqueued again is acknowledged unsent (to_lane.lua, to_dead.lua,
-- was_sent.lua read it, finish.lua writes it; Go puts this file in front of each).
--
-- A job is named by 10 bytes that Go derives from its id (windowField: the first bytes of its
-- SHA-256), with the unix second it was accepted as the value. The fields live in buckets small
-- enough for Redis to keep as listpacks (a field and its value packed together, with none of a
-- key's own overhead; BENCHMARKS.md has the bytes per job), in a linear hash table that grows
-- one bucket at a time as jobs come, so a lookup is one HGET of one bucket however large the
-- table. Its keys share the shard's hash tag:
--   <base>            HASH: L (level), p (the next bucket to split), n (fields held, about),
--                     c, d, s, a (the sweep's cursor and counts, below)
--   <base>:<i>        HASH: field -> accepted at (unix s), bucket i
-- The bucket of a field whose first 4 bytes read h (big-endian) is h mod 2^L, or h mod 2^(L+1)
-- when that is below p. A field older than the TTL is stale: it no longer counts, and it is
-- dropped when its bucket is split or swept. Every write to a bucket renews its expiry (twice
-- the TTL and a second), so a bucket goes only once no job was written to it for that long, when
-- everything in it is stale. The writes also sweep the buckets in turn (c, the state's cursor),
-- one for every W_SWEEP jobs written (d counts the jobs since the last): the sweep drops the
-- bucket's stale fields and counts what stays (s), and at the end of each round n is counted
-- anew from s and the fields added during the round (a), so buckets that expired whole (which
-- nothing else notices) leave the count within a round.

-- W_LOAD is the table's load bound, fields per bucket: the fullest buckets (those not yet
-- split in the current round hold about twice the others) stay under the 128 entries of
-- Redis's default hash-max-listpack-entries.
local W_LOAD = 40
local W_SWEEP = 8

local function w_hash(f)
  local a, b, c, d = string.byte(f, 1, 4)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

local function w_state(base)
  local s = redis.call('HMGET', base, 'L', 'p', 'n', 'c', 'd', 's', 'a')
  local st = {L = tonumber(s[1]) or 0, p = tonumber(s[2]) or 0, n = tonumber(s[3]) or 0,
    c = tonumber(s[4]) or 0, d = tonumber(s[5]) or 0, s = tonumber(s[6]) or 0, a = tonumber(s[7]) or 0}
  if not s[6] then
    -- A state written before the sweep counted (or none): the count's round starts here, at
    -- the first bucket, so that its end counts every bucket.
    st.c = 0
  end
  return st
end

local function w_key(base, st, f)
  local m = 2 ^ st.L
  local h = w_hash(f)
  local i = h % m
  if i < st.p then
    i = h % (2 * m)
  end
  return base .. ':' .. string.format('%d', i)
end

-- w_seen reports whether f was accepted at or after since (unix s).
local function w_seen(base, st, f, since)
  local v = redis.call('HGET', w_key(base, st, f), f)
  return v and tonumber(v) >= tonumber(since)
end

-- w_by_bucket groups fields by the bucket each falls in: the buckets' keys in the order first
-- met, and for each key the indexes into fields of its fields.
local function w_by_bucket(base, st, fields)
  local byKey, keys = {}, {}
  for i, f in ipairs(fields) do
    local k = w_key(base, st, f)
    if not byKey[k] then
      byKey[k] = {}
      table.insert(keys, k)
    end
    table.insert(byKey[k], i)
  end
  return keys, byKey
end

-- w_seen_all reports, for each of fields, whether it was accepted at or after sinces[i]: one
-- HMGET per bucket the fields fall in.
local function w_seen_all(base, st, fields, sinces)
  local keys, byKey = w_by_bucket(base, st, fields)
  local out = {}
  for _, k in ipairs(keys) do
    local idx, fs = byKey[k], {}
    for j, i in ipairs(idx) do
      fs[j] = fields[i]
    end
    local v = redis.call('HMGET', k, unpack(fs))
    for j, i in ipairs(idx) do
      out[i] = v[j] and tonumber(v[j]) >= tonumber(sinces[i]) or false
    end
  end
  return out
end

-- w_purge drops the fields of bucket key accepted before since and returns how many.
local function w_purge(key, since)
  local all = redis.call('HGETALL', key)
  local stale = {}
  for i = 1, #all, 2 do
    if tonumber(all[i + 1]) < since then
      table.insert(stale, all[i])
    end
  end
  if #stale > 0 then
    redis.call('HDEL', key, unpack(stale))
  end
  return #stale
end

-- w_split moves the fields of bucket p that belong to bucket p + 2^L there, drops the stale
-- ones, and advances the state. Both buckets are written anew, each a compact listpack.
local function w_split(base, st, since, expireMs)
  local m = 2 ^ st.L
  local from = base .. ':' .. string.format('%d', st.p)
  local to = base .. ':' .. string.format('%d', st.p + m)
  local all = redis.call('HGETALL', from)
  local keep, move, dropped = {}, {}, 0
  for i = 1, #all, 2 do
    local f, v = all[i], all[i + 1]
    if tonumber(v) < since then
      dropped = dropped + 1
    elseif w_hash(f) % (2 * m) == st.p + m then
      table.insert(move, f)
      table.insert(move, v)
    else
      table.insert(keep, f)
      table.insert(keep, v)
    end
  end
  redis.call('DEL', from)
  for _, kv in ipairs({{from, keep}, {to, move}}) do
    if #kv[2] > 0 then
      redis.call('HSET', kv[1], unpack(kv[2]))
      redis.call('PEXPIRE', kv[1], expireMs)
    end
  end
  -- The new bucket lies at or beyond the sweep's cursor: this round sweeps it too.
  st.n = st.n - dropped
  st.p = st.p + 1
  if st.p >= m then
    st.L, st.p = st.L + 1, 0
  end
end

-- w_add records fields[i] as accepted at nows[i] (unix s; the TTL in ms gives what is stale
-- and the buckets' expiry): one HSET per bucket touched, buckets split while the table is over
-- its load, and the state written once.
local function w_add(base, st, fields, nows, ttlMs)
  if #fields == 0 then
    return
  end
  local now = 0
  for _, t in ipairs(nows) do
    now = math.max(now, tonumber(t))
  end
  local since = now - math.floor(tonumber(ttlMs) / 1000)
  local expireMs = 2 * tonumber(ttlMs) + 1000
  local keys, byKey = w_by_bucket(base, st, fields)
  for _, k in ipairs(keys) do
    local args = {}
    for _, i in ipairs(byKey[k]) do
      table.insert(args, fields[i])
      table.insert(args, nows[i])
    end
    local added = redis.call('HSET', k, unpack(args))
    redis.call('PEXPIRE', k, expireMs)
    st.n, st.a = st.n + added, st.a + added
  end
  st.d = st.d + #fields
  while st.d >= W_SWEEP do
    st.d = st.d - W_SWEEP
    local buckets = 2 ^ st.L + st.p
    if st.c >= buckets then
      -- A round ended: each bucket was counted when it was swept, and about half of the
      -- fields added since went to buckets already counted.
      st.c, st.n, st.s, st.a = 0, st.s + math.floor(st.a / 2), 0, 0
    end
    local k = base .. ':' .. string.format('%d', st.c)
    st.n = st.n - w_purge(k, since)
    st.s = st.s + redis.call('HLEN', k)
    st.c = st.c + 1
  end
  while st.n > W_LOAD * (2 ^ st.L + st.p) do
    w_split(base, st, since, expireMs)
  end
  redis.call('HSET', base, 'L', st.L, 'p', st.p, 'n', math.max(st.n, 0), 'c', st.c, 'd', st.d, 's', st.s, 'a', st.a)
end
