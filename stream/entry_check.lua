-- entry_check.lua: the shape and size rules of an intake entry, shared by read_intake.lua and
-- requeue.lua (Go puts this file in front of each when it builds them). An intake entry must
-- have exactly one field, "job", of at most max_bytes bytes, and may have "deliveries" (the
-- count requeue.lua carries over when it hands an entry back); anything else is dead-lettered
-- where it lies, so an oversized entry never travels to a worker.

-- best_id is the job id of a refused entry, read from its first bytes as far as a leading
-- "id" member, so the dead record can be matched by the upstream and by audit; "" when the
-- entry does not start that way. The id is kept as given, whatever it is.
local function best_id(job, max_bytes)
  if type(job) ~= 'string' then
    return ''
  end
  local head = string.sub(job, 1, 4096)
  local id = string.match(head, '^%s*{%s*"id"%s*:%s*"([^"\\]*)"')
  if id == nil or #id > max_bytes then
    return ''
  end
  return id
end

-- check_entry returns job, nil for a well-formed entry, or nil, reason, job-or-nil.
local function check_entry(fields, max_bytes)
  local job, jobs, others = nil, 0, {}
  for i = 1, #fields, 2 do
    if fields[i] == 'job' then
      jobs = jobs + 1
      job = fields[i + 1]
    elseif fields[i] ~= 'deliveries' then
      table.insert(others, fields[i])
    end
  end
  if jobs == 0 then
    return nil, 'entry has no "job" field', nil
  end
  if jobs > 1 then
    return nil, 'entry has ' .. jobs .. ' "job" fields; exactly one is allowed', job
  end
  if #others > 0 then
    return nil, 'entry has a field "' .. string.sub(others[1], 1, 64) .. '" besides "job"; only "job" is allowed', job
  end
  if #job > max_bytes then
    return nil, 'entry is ' .. #job .. ' bytes; at most ' .. max_bytes, job
  end
  return job, nil, nil
end

-- dead_fields is a dead record, its job cut to keep bytes: MAX_INVALID_JOB for an entry that
-- broke the entry rules (Go sets it to stream.MaxInvalidJobBytes in front of the script), so
-- that the dead stream's bytes stay bounded however large the entries upstreams wrote; the
-- entry limit for a job the gateway took, which replay needs whole. A cut record says so
-- (note) and keeps the job's size (job_bytes); it cannot be replayed.
local function dead_fields(id, code, reason, from, entry, provider, attempt, at, job, keep)
  local f = {'id', id, 'code', code, 'reason', reason, 'from', from, 'entry', entry,
    'provider', provider, 'attempt', attempt, 'at', at}
  job = job or ''
  if #job > keep then
    table.insert(f, 'note')
    table.insert(f, 'job cut to its first ' .. keep .. ' of ' .. #job .. ' bytes')
    table.insert(f, 'job_bytes')
    table.insert(f, #job)
    job = string.sub(job, 1, keep)
  end
  table.insert(f, 'job')
  table.insert(f, job)
  return f
end

