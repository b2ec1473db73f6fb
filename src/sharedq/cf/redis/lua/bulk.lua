-- What bulk moves and deletes share: counters kept while entries change, and the reply.
-- A bulk request stops at an entry it cannot handle, keeping the ones before it done;
-- the reply says how far it got: {processed, {seqs}, {missing ids}, error or false}.

local bulk

local function bulk_begin(c)
  bulk = {c = c, seqs = {}, missing = {}, processed = 0, lists = {}}
end

-- A list's controls, read once per request and written back by bulk_finish.
local function bulk_list(n)
  local l = bulk.lists[n]
  if not l then
    l = list_controls(n)
    bulk.lists[n] = l
  end
  return l
end

-- Append a (and b) to the array t[key], made on first use: commands grouped per key.
local function bulk_push(t, key, a, b)
  local l = t[key]
  if not l then
    l = {}
    t[key] = l
  end
  l[#l + 1] = a
  if b then l[#l + 1] = b end
end

local function bulk_finish(err)
  if #bulk.seqs > 0 then
    local fields = {'c', packed_counters(bulk.c)}
    for n, l in pairs(bulk.lists) do
      fields[#fields + 1] = lfield(n)
      fields[#fields + 1] = packed_controls(l)
    end
    redis.call('HSET', M, unpack(fields))
  end
  return record({bulk.processed, bulk.seqs, bulk.missing, err or false})
end
