-- window.lua: the duplicate-suppression window, which remembers the jobs accepted within the
-- sent TTL so that a copy enqueued again is acknowledged unsent (to_lane.lua, to_dead.lua,
-- was_sent.lua read it, finish.lua writes it; Go puts this file in front of each).
--
-- A job is named by 10 bytes that Go derives from its id (windowField: the first bytes of its
-- SHA-256), with the unix second it was accepted as the value. Every time here is Redis's own
-- clock, never a worker's: workers' clocks drift apart, and one an hour behind would write
-- acceptances that the others already count as stale (its copies sent again), one ahead would
-- purge what the others still count. Lookups read TIME (w_since), and only once a looked-for
-- field is found, so that a first delivery, whose field is absent, costs no command more;
-- acceptances take the time of the ledger entry that finish.lua writes in the same call (an
-- entry id is Redis's clock in ms, kept from running backwards), which costs no command at all.
--
-- The fields live in buckets small enough for Redis to keep as listpacks (a field and its value
-- packed together, with none of a key's own overhead; BENCHMARKS.md has the bytes per job), in a
-- linear hash table that grows one bucket at a time as jobs come, so a lookup is one HGET of one
-- bucket however large the table. Its keys share the shard's hash tag:
--   <base>            HASH: L (level), p (the next bucket to split), n (fields held, about),
--                     c, d, s, a (the sweep's cursor and counts), r, rt, q, qt, k (its
--                     rounds), all below
--   <base>:<i>        HASH: field -> accepted at (unix s), bucket i, and the marker W_MARK
-- The bucket of a field whose first 4 bytes read h (big-endian) is h mod 2^L, or h mod 2^(L+1)
-- when that is below p. A field older than the TTL is stale: it no longer counts, and it is
-- dropped when its bucket is split or swept. The writes also sweep the buckets in turn (c, the
-- state's cursor), one for every W_SWEEP jobs written (d counts the jobs since the last): the
-- sweep drops the bucket's stale fields, counts what stays (s), and renews the bucket's expiry
-- (twice the TTL and a second), or deletes it when nothing in it counts; at the end of each
-- round n is counted anew from s and the fields added during the round (a), so buckets that
-- expired whole (which nothing else notices) leave the count within a round.
--
-- A bucket's expiry is set when it is made, when it is split, and when the sweep reaches it,
-- and at a write only when the sweep may not have reached it recently enough: a field written
-- at t must outlive t + TTL. Every expiry is a moment, t + 2 TTL + 1 s (PEXPIREAT), where t is
-- the time of the write that sets it, its ledger entry's: never behind Redis's clock, never
-- running backwards, and ahead of the clock for a while after it stepped back (the ids stay at
-- the last one until the clock catches up). A step back therefore never brings an expiry
-- nearer: the times below are all the ledger's, and what they promise holds on Redis's clock,
-- which is behind them or at them. r (in the state) is when the current round began, the time
-- of the write that began it, rt the shortest TTL the round's writes gave, and q and qt the
-- same of the last complete round that vouches: one in which no other code wrote. An older
-- gateway's writes, as during a rolling upgrade or after a rollback, break what a round
-- promises: its sweep renews nothing it visits, and its writes renew a bucket for a duration
-- on Redis's clock, which after a step back ends before the moment the round set. So this code
-- writes d with a decimal point ('3.0', a string, which tonumber reads as 3), and every older
-- write sets d as Redis prints a Lua number, '3': a d without the point means such a write came
-- since this code's last, and then the last round no longer vouches, nor does the current one
-- (k is 1 while no such write came during it). Every bucket
-- there during round q was renewed at q or later with a TTL of at least qt, so it outlives
-- q + 2 qt, and a field written no later than q + TTL/2, with a TTL no longer than qt, is safe
-- in it, with half the TTL to spare. As q is the start of the round before the current one, writes leave the
-- expiry to the sweep while a round takes less than about a quarter of the TTL, as at a
-- steady rate: a write is then one command a bucket, not two. When the rate falls below what
-- the table grew for and rounds grow long, or the TTL was raised, every write renews its
-- bucket again. A bucket made by a write is known by its marker field W_MARK, which every
-- write sets: HSET adds more fields than the write's own only when the marker was not there.
-- Its value is 0, a time stale for any TTL, so that an older gateway's sweep, which compares
-- every value as a time, drops it as stale rather than fail.

-- W_LOAD is the table's load bound, fields per bucket: the fullest buckets (those not yet
-- split in the current round hold about twice the others) stay under the 128 entries of
-- Redis's default hash-max-listpack-entries.
local W_LOAD = 40
local W_SWEEP = 8

-- W_MARK is the field every bucket holds besides its jobs' (see above); a job's field is 10
-- bytes, so never this one. W_MARK_AT is its value.
local W_MARK = '~'
local W_MARK_AT = '0'

local function w_hash(f)
  local a, b, c, d = string.byte(f, 1, 4)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

local function w_state(base)
  local s = redis.call('HMGET', base, 'L', 'p', 'n', 'c', 'd', 's', 'a', 'r', 'rt', 'q', 'qt', 'k')
  local st = {L = tonumber(s[1]) or 0, p = tonumber(s[2]) or 0, n = tonumber(s[3]) or 0,
    c = tonumber(s[4]) or 0, d = tonumber(s[5]) or 0, s = tonumber(s[6]) or 0, a = tonumber(s[7]) or 0,
    -- A state without the rounds' fields vouches for nothing until a round of this code ends.
    r = tonumber(s[8]) or 0, rt = tonumber(s[9]) or 0, q = tonumber(s[10]) or 0,
    qt = tonumber(s[11]) or 0, k = tonumber(s[12]) or 0}
  if not (s[5] and string.find(s[5], '.', 1, true)) then
    -- Another code wrote since this code did (see above), or none did yet.
    st.q, st.qt, st.k = 0, 0, 0
  end
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

-- w_since returns a function giving the oldest acceptance (unix s, Redis's clock) that still
-- counts for a TTL of ttlS seconds; it reads TIME on its first call only.
local function w_since(ttlS)
  local since
  return function()
    if not since then
      since = tonumber(redis.call('TIME')[1]) - tonumber(ttlS)
    end
    return since
  end
end

-- w_seen reports whether f was accepted at or after since() (see w_since), which it calls only
-- when f is in the window.
local function w_seen(base, st, f, since)
  local v = redis.call('HGET', w_key(base, st, f), f)
  return v and tonumber(v) >= since() or false
end

-- w_by_bucket groups fields by the bucket each falls in: the buckets' keys in the order first
-- met, for each key the indexes into fields of its fields, and for each key how many distinct
-- fields fall in it.
local function w_by_bucket(base, st, fields)
  local byKey, keys, distinct, met = {}, {}, {}, {}
  for i, f in ipairs(fields) do
    local k = w_key(base, st, f)
    if not byKey[k] then
      byKey[k] = {}
      distinct[k] = 0
      table.insert(keys, k)
    end
    table.insert(byKey[k], i)
    if not met[f] then
      met[f] = true
      distinct[k] = distinct[k] + 1
    end
  end
  return keys, byKey, distinct
end

-- w_held_all returns, for each of fields, the time (unix s) it was accepted, or false when
-- the window holds no such field: one HMGET per bucket the fields fall in.
local function w_held_all(base, st, fields)
  local keys, byKey = w_by_bucket(base, st, fields)
  local out = {}
  for _, k in ipairs(keys) do
    local idx, fs = byKey[k], {}
    for j, i in ipairs(idx) do
      fs[j] = fields[i]
    end
    local v = redis.call('HMGET', k, unpack(fs))
    for j, i in ipairs(idx) do
      out[i] = v[j] and tonumber(v[j]) or false
    end
  end
  return out
end

-- w_seen_all reports, for each of fields, whether it was accepted at or after since() (see
-- w_since), which it calls only when one of them is in the window.
local function w_seen_all(base, st, fields, since)
  local out = w_held_all(base, st, fields)
  for i, v in ipairs(out) do
    out[i] = v and v >= since() or false
  end
  return out
end

-- w_sweep_bucket drops the fields of bucket key accepted before since and renews the bucket's
-- expiry, or deletes it when none of its fields counts; it returns how many fields it dropped
-- and how many stay.
local function w_sweep_bucket(key, since, expireAt)
  local all = redis.call('HGETALL', key)
  if #all == 0 then
    return 0, 0
  end
  local stale = {}
  local kept = 0
  for i = 1, #all, 2 do
    if all[i] ~= W_MARK then
      if tonumber(all[i + 1]) < since then
        table.insert(stale, all[i])
      else
        kept = kept + 1
      end
    end
  end
  if kept == 0 then
    redis.call('DEL', key)
    return #stale, 0
  end
  if #stale > 0 then
    redis.call('HDEL', key, unpack(stale))
  end
  redis.call('PEXPIREAT', key, expireAt)
  return #stale, kept
end

-- w_split moves the fields of bucket p that belong to bucket p + 2^L there, drops the stale
-- ones, and advances the state. Both buckets are written anew, each a compact listpack.
local function w_split(base, st, since, expireAt)
  local m = 2 ^ st.L
  local from = base .. ':' .. string.format('%d', st.p)
  local to = base .. ':' .. string.format('%d', st.p + m)
  local all = redis.call('HGETALL', from)
  local keep, move, dropped = {}, {}, 0
  for i = 1, #all, 2 do
    local f, v = all[i], all[i + 1]
    if f == W_MARK then
      -- written anew with each half below
    elseif tonumber(v) < since then
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
      redis.call('HSET', kv[1], W_MARK, W_MARK_AT, unpack(kv[2]))
      redis.call('PEXPIREAT', kv[1], expireAt)
    end
  end
  -- The new bucket lies at or beyond the sweep's cursor: this round sweeps it too.
  st.n = st.n - dropped
  st.p = st.p + 1
  if st.p >= m then
    st.L, st.p = st.L + 1, 0
  end
end

-- w_add records fields[i] as accepted at nows[i] (unix s, Redis's clock; the TTL in ms gives
-- what is stale and the buckets' expiry): one HSET per bucket touched, and its PEXPIREAT only
-- when the bucket is new or the last round of the sweep is too old to vouch for it (see above);
-- buckets split while the table is over its load, and the state written once.
local function w_add(base, st, fields, nows, ttlMs)
  if #fields == 0 then
    return
  end
  local now = 0
  for _, t in ipairs(nows) do
    now = math.max(now, tonumber(t))
  end
  local ttlS = math.floor(tonumber(ttlMs) / 1000)
  local since = now - ttlS
  local expireAt = now * 1000 + 2 * tonumber(ttlMs) + 1000
  local vouched = st.q > 0 and st.qt >= ttlS and now - st.q <= math.floor(ttlS / 2)
  if st.rt > 0 and ttlS < st.rt then
    st.rt = ttlS
  end
  local keys, byKey, distinct = w_by_bucket(base, st, fields)
  for _, k in ipairs(keys) do
    local args = {W_MARK, W_MARK_AT}
    for _, i in ipairs(byKey[k]) do
      table.insert(args, fields[i])
      table.insert(args, nows[i])
    end
    local added = redis.call('HSET', k, unpack(args))
    if added > distinct[k] then
      added = added - 1 -- the marker: the bucket is new
      redis.call('PEXPIREAT', k, expireAt)
    elseif not vouched then
      redis.call('PEXPIREAT', k, expireAt)
    end
    st.n, st.a = st.n + added, st.a + added
  end
  st.d = st.d + #fields
  while st.d >= W_SWEEP do
    st.d = st.d - W_SWEEP
    local buckets = 2 ^ st.L + st.p
    if st.c >= buckets then
      -- A round ended: each bucket was counted when it was swept, and about half of the
      -- fields added since went to buckets already counted.
      if st.r > 0 and st.rt > 0 and st.k == 1 then
        st.q, st.qt = st.r, st.rt
      else
        st.q, st.qt = 0, 0
      end
      st.c, st.n, st.s, st.a = 0, st.s + math.floor(st.a / 2), 0, 0
      st.r, st.rt, st.k = now, ttlS, 1
    end
    local k = base .. ':' .. string.format('%d', st.c)
    local dropped, kept = w_sweep_bucket(k, since, expireAt)
    st.n, st.s = st.n - dropped, st.s + kept
    st.c = st.c + 1
  end
  while st.n > W_LOAD * (2 ^ st.L + st.p) do
    w_split(base, st, since, expireAt)
  end
  redis.call('HSET', base, 'L', st.L, 'p', st.p, 'n', math.max(st.n, 0), 'c', st.c,
    'd', string.format('%d.0', st.d), 's', st.s, 'a', st.a, 'r', st.r, 'rt', st.rt, 'q', st.q, 'qt', st.qt, 'k', st.k)
end
