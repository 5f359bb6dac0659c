-- camp.lua: what the scripts that end a job share for campaigns (Go puts this file in front of
-- each when it builds them). A job of a campaign's recipient carries the campaign's id; its
-- terminal record counts in the campaign's hash on the job's shard, by code, so that campaign
-- status reads counts rather than the ledger. The hash's key is built here from the shard's
-- key prefix: it shares the "{shard}" hash tag of the keys the script was given, so it lives in
-- the same Redis Cluster slot.

-- camp_base is the "<prefix>:{<shard>}:" of a key of the shard.
local function camp_base(key)
  return string.match(key, '^(.-{[^}]*}:)')
end

-- camp_count adds by (1 when nil) to campaign's count of code; nothing for a job of no campaign.
local function camp_count(base, campaign, code, by)
  if campaign and campaign ~= '' then
    redis.call('HINCRBY', base .. 'campaign:' .. campaign, 'code:' .. code, by or 1)
  end
end

-- job_campaign is the campaign id a job's JSON carries, nil when none (or not JSON).
local function job_campaign(job)
  if type(job) ~= 'string' or not string.find(job, '"campaign"', 1, true) then
    return nil
  end
  local ok, j = pcall(cjson.decode, job)
  if ok and type(j) == 'table' and type(j.campaign) == 'string' then
    return j.campaign
  end
  return nil
end

-- record_field is the value of field name of a record given as field, value pairs, nil when
-- it has none.
local function record_field(fields, name)
  for i = 1, #fields - 1, 2 do
    if fields[i] == name then
      return fields[i + 1]
    end
  end
  return nil
end

-- record_campaign is the "campaign" of such a record.
local function record_campaign(fields)
  return record_field(fields, 'campaign')
end

-- camp_whole is a lane entry's job made whole: a campaign recipient's entry holds a reference
-- (its id, campaign, subscription and recipient) and names its campaign in the field ref; its
-- job is the reference with the campaign's message joined in (job.WithMessage in Go does the
-- same), for a record that must keep the job whole (a dead record, which can be replayed).
-- A whole job, or a campaign that has no message, gives job as it is.
local function camp_whole(base, job, ref)
  if not ref or ref == '' or type(job) ~= 'string' or string.sub(job, -1) ~= '}' then
    return job
  end
  local msg = redis.call('HGET', base .. 'campaign:' .. ref, 'message')
  if not msg or msg == '' then
    return job
  end
  return string.sub(job, 1, -2) .. ',' .. msg .. '}'
end
