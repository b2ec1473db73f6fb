-- What bulk moves and deletes share: counters kept while entries change, and the reply.
-- A bulk request stops at an entry it cannot handle, keeping the ones before it done;
-- the reply says how far it got: {processed, {seqs}, {missing ids}, error or false}.

local bulk = {seqs = {}, missing = {}, processed = 0, lists = {}}

-- A list's element count and whether it has monitors, read once per request.
local function bulk_list(n)
  local l = bulk.lists[n]
  if not l then
    local v = redis.call('HMGET', M, 'e' .. n, 'w' .. n, 'l' .. n)
    l = {elements = num(v[1]), watched = num(v[2]) > 0, limit = v[3], changed = false}
    bulk.lists[n] = l
  end
  return l
end

local function bulk_finish(seq, entries, elements, err)
  if #bulk.seqs > 0 then
    local fields = {'seq', seq}
    if entries then
      fields[3], fields[4], fields[5], fields[6] = 'ne', entries, 'nel', elements
    end
    for n, l in pairs(bulk.lists) do
      if l.changed then
        fields[#fields + 1] = 'e' .. n
        fields[#fields + 1] = l.elements
      end
    end
    redis.call('HSET', M, unpack(fields))
  end
  return record({bulk.processed, bulk.seqs, bulk.missing, err or false})
end
