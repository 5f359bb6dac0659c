-- entry_check.lua: the shape and size rules of an intake entry, shared by read_intake.lua and
-- reclaim.lua (Go puts this file in front of each when it builds them). An intake entry must
-- have exactly one field, "job", of at most max_bytes bytes; anything else is dead-lettered
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
    else
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

-- dead_fields is the dead record of a refused intake entry, its job cut to max_bytes.
local function dead_fields(id, code, reason, from, entry, provider, attempt, at, job, max_bytes)
  local f = {'id', id, 'code', code, 'reason', reason, 'from', from, 'entry', entry,
    'provider', provider, 'attempt', attempt, 'at', at}
  job = job or ''
  if #job > max_bytes then
    table.insert(f, 'note')
    table.insert(f, 'job cut to its first ' .. max_bytes .. ' of ' .. #job .. ' bytes')
    job = string.sub(job, 1, max_bytes)
  end
  table.insert(f, 'job')
  table.insert(f, job)
  return f
end

