-- window.lua: the duplicate-suppression window, which remembers the jobs accepted within the
-- sent TTL so that a copy enqueued again is acknowledged unsent (to_lane.lua, to_dead.lua,
-- to_scheduled.lua and was_sent.lua read it, finish.lua writes it; Go puts this file in front of
-- each).
--
-- Time is cut into slices as long as the TTL. A job accepted at t (Redis's clock, ms) is written
-- to slice s = floor(t / TTL), whose keys all expire at the moment (s + 2) * TTL: every job
-- stays at least the TTL and less than twice it. A lookup at n looks in the slices floor(n / TTL)
-- and the one before, which hold every job accepted in (n - TTL, n]. That is the whole of its
-- correctness: keys expire whole, at a moment fixed when they are made, and nothing is swept.
-- Every time is Redis's TIME, read once a call, never a worker's clock.
--
-- A job is named by 10 bytes Go derives from its id (windowField: the first bytes of its
-- SHA-256). A slice's fields are spread over small hashes that Redis keeps as listpacks (a field
-- packed with its empty value, with none of a key's own overhead): the slice's fan-out f is
-- fixed when its first job is written, from how many jobs the slice before held, so a slice
-- holds about W_LOAD fields a bucket at a steady rate. Keys, all under the shard's hash tag:
--   <base>:s<s>       HASH: f (the slice's fan-out), n (jobs written to the slice)
--   <base>:s<s>:<i>   HASH: field -> '', for the fields whose first 4 bytes, read big-endian,
--                     are i mod f
--
-- The slices' keys start with "s" so that none is a key of release 0.1.0's window, a hash table
-- under the same base (<base>, <base>:<i>), whose keys expire on their own after an upgrade
-- (docs/upgrading.md); this window neither reads nor writes them.

-- W_LOAD is how many fields a bucket holds at a steady rate: under the 128 entries of Redis's
-- default hash-max-listpack-entries with room for a rate that grows within a slice.
local W_LOAD = 64
-- A slice's fan-out is at least W_MIN_FANOUT, so that a slice after a quiet one still holds
-- tens of thousands of jobs in listpacks (a few hundred small keys at a low rate), and at most
-- W_MAX_FANOUT.
local W_MIN_FANOUT = 256
local W_MAX_FANOUT = 65536

local function w_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function w_hash(f)
  local a, b, c, d = string.byte(f, 1, 4)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

-- w_fanout is slice key sk's fan-out, nil when nothing was written to the slice.
local function w_fanout(sk)
  return tonumber(redis.call('HGET', sk, 'f'))
end

local function w_bucket(sk, f, field)
  return sk .. ':' .. (w_hash(field) % f)
end

local function w_slice_key(base, s)
  return base .. ':s' .. string.format('%d', s)
end

-- w_seen_all returns, for each of fields, whether the window holds it at now (ms), for a TTL of
-- ttl ms.
local function w_seen_all(base, fields, now, ttl)
  local out = {}
  for i = 1, #fields do
    out[i] = false
  end
  local s = math.floor(now / ttl)
  for _, slice in ipairs({s, s - 1}) do
    local sk = w_slice_key(base, slice)
    local f = w_fanout(sk)
    if f then
      for i, field in ipairs(fields) do
        if not out[i] and redis.call('HEXISTS', w_bucket(sk, f, field), field) == 1 then
          out[i] = true
        end
      end
    end
  end
  return out
end

local function w_seen(base, field, now, ttl)
  return w_seen_all(base, {field}, now, ttl)[1]
end

-- w_add writes fields to the window as accepted at now (ms), for a TTL of ttl ms.
local function w_add(base, fields, now, ttl)
  if #fields == 0 then
    return
  end
  local s = math.floor(now / ttl)
  local sk = w_slice_key(base, s)
  local expires = (s + 2) * ttl
  local f = w_fanout(sk)
  if not f then
    local before = tonumber(redis.call('HGET', w_slice_key(base, s - 1), 'n')) or 0
    f = W_MIN_FANOUT
    while f < W_MAX_FANOUT and f * W_LOAD < before do
      f = f * 2
    end
    redis.call('HSET', sk, 'f', f)
    redis.call('PEXPIREAT', sk, expires)
  end
  local byBucket, order = {}, {}
  for _, field in ipairs(fields) do
    local b = w_bucket(sk, f, field)
    if not byBucket[b] then
      byBucket[b] = {}
      table.insert(order, b)
    end
    table.insert(byBucket[b], field)
    table.insert(byBucket[b], '')
  end
  local added = 0
  for _, b in ipairs(order) do
    added = added + redis.call('HSET', b, unpack(byBucket[b]))
    redis.call('PEXPIREAT', b, expires)
  end
  redis.call('HINCRBY', sk, 'n', added)
end
