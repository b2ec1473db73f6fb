#!lua
-- include: common, bulk
-- delete_entries: delete entries by id, in order, each with its own seq.
-- ARGV[6..]: missing_ok ('1'), lock count n, n lock numbers, entry ids...
local done = recorded()
if done then return done end
local missing_ok, nlocks = ARGV[6] == '1', tonumber(ARGV[7])
local v = open('seq', 'ne', 'nel')
check_conditions(8, 7 + nlocks, 0, '', false)
local seq, entries, elements = tonumber(v[1]), num(v[2]), num(v[3])
for i = 8 + nlocks, #ARGV do
  local id = ARGV[i]
  local r = redis.call('HGET', E, id)
  if not r then
    if not missing_ok then
      return bulk_finish(seq, entries, elements,
        err_text(NO_SUCH_ENTRY, 'no entry ' .. hex(id)))
    end
    bulk.missing[#bulk.missing + 1] = id
  else
    local list = bulk_list(rec_list(r))
    seq = seq + 1
    unplace(r, list.watched)
    redis.call('HDEL', E, id)
    local size = rec_elements(r)
    list.elements, list.changed = list.elements - size, true
    entries, elements = entries - 1, elements - size
    notify(seq)
    bulk.seqs[#bulk.seqs + 1] = seq
  end
  bulk.processed = bulk.processed + 1
end
return bulk_finish(seq, entries, elements)
