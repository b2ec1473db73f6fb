-- write_entries: write entries, in order, each with its own seq (the bulk form of write).
-- ARGV[2..]: ignore_limit ('1'), lock count n, n lock numbers, then two arguments per
-- entry: its spec (write.lua's ARGV[2]; its authority flag is not used) and its data.
local done = recorded()
if done then return done end
local ignore, nlocks = ARGV[2] == '1', tonumber(ARGV[3])
bulk_begin(counters(open('c')))
check_conditions(4, 3 + nlocks, 0, nil, nil)
local c = bulk.c
for i = 4 + nlocks, #ARGV, 2 do
  local list, key, version, flags, elements, adjunct, skey, id = write_spec(ARGV[i])
  if id ~= '' and redis.call('HEXISTS', E, id) == 1 then
    return bulk_finish(err_text(ENTRY_EXISTS, 'entry id ' .. hex(id) .. ' is in use'))
  end
  local l = bulk_list(list)
  local limit = limit_of(l)
  if not ignore and limit and redis.call('ZCARD', list_key(list)) >= limit then
    return bulk_finish(err_text(LIST_FULL, 'list ' .. list .. ' is at its limit of '
      .. int(limit) .. ' entries'))
  end
  if c[ENTRIES] >= c[MAX_ENTRIES] then
    return bulk_finish(err_text(STRUCTURE_FULL, 'structure ' .. structure_name()
      .. ' has all ' .. int(c[MAX_ENTRIES]) .. ' entries in use'))
  end
  if c[ELEMENTS] + elements > c[MAX_ELEMENTS] then
    return bulk_finish(err_text(STRUCTURE_FULL, 'structure ' .. structure_name() .. ' has '
      .. int(c[ELEMENTS]) .. ' of ' .. int(c[MAX_ELEMENTS]) .. ' elements in use; '
      .. elements .. ' more do not fit'))
  end
  local seq = c[SEQ] + 1
  if id == '' then
    id = '\0\0\0\0' .. be(seq, 8)
    if redis.call('HEXISTS', E, id) == 1 then
      return bulk_finish(err_text(ENTRY_EXISTS, 'entry id ' .. hex(id) .. ' is in use'))
    end
  end
  local r = make_rec(id, list, key, ordinal(seq, bit.band(flags, 1) ~= 0), version, elements,
    adjunct, skey)
  redis.call('HSET', E, id, r)
  if elements > 0 then redis.call('HSET', D, id, ARGV[i + 1]) end
  c[SEQ], c[ENTRIES], c[ELEMENTS] = seq, c[ENTRIES] + 1, c[ELEMENTS] + elements
  l[LIST_ELEMENTS] = l[LIST_ELEMENTS] + elements
  place(r, l[LIST_MONITORS] > 0)
  notify(seq)
  bulk.seqs[#bulk.seqs + 1] = seq
  bulk.processed = bulk.processed + 1
end
return bulk_finish()
