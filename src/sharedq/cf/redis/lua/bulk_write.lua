-- write_entries: write entries, in order, each with its own seq (the bulk form of write).
-- ARGV[2]: options: '1' ignore_limit, else '' or '0'; with expect_authority (the queue
-- manager's put_many, a batch of puts conditioned as each put is) the authority(8)
-- follows, and every entry's list is checked for it before anything is written.
-- ARGV[3..]: lock count n, n lock numbers, then two arguments per entry: its spec
-- (write.lua's ARGV[2]; its authority flag is not used) and its data.
local done = recorded()
if done then return done end
local opts, nlocks = ARGV[2], tonumber(ARGV[3])
local ignore = string.sub(opts, 1, 1) == '1'
bulk_begin(counters(open('c')))
check_conditions(4, 3 + nlocks, 0, nil, nil)
local first = 4 + nlocks
if #opts == 9 then
  local expect = from_be(string.sub(opts, 2, 9))
  for i = first, #ARGV, 2 do
    local list = from_be2(ARGV[i], 1)
    check_conditions(1, 0, list, expect, bulk_list(list)[LIST_AUTHORITY])
  end
end
local c = bulk.c
local counts = {}  -- list -> its entries now, read once
for i = first, #ARGV, 2 do
  local list, key, version, flags, elements, adjunct, skey, id = write_spec(ARGV[i])
  local data = ARGV[i + 1]
  local l = bulk_list(list)
  local limit = limit_of(l)
  if not ignore and limit then
    local n = counts[list] or redis.call('ZCARD', list_key(list))
    if n >= limit then
      return bulk_finish(err_text(LIST_FULL, 'list ' .. list .. ' is at its limit of '
        .. int(limit) .. ' entries'))
    end
    counts[list] = n + 1
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
  if id == '' then id = '\0\0\0\0' .. be(seq, 8) end
  local r = make_rec(id, list, key, ordinal(seq, bit.band(flags, 1) ~= 0), version, elements,
    adjunct, skey, inline_part(elements, data))
  -- HSETNX is the existence check and, when the id is free, the entry's first write
  -- (a generated id is new unless a caller chose one of that shape).
  if redis.call('HSETNX', E, id, r) == 0 then
    return bulk_finish(err_text(ENTRY_EXISTS, 'entry id ' .. hex(id) .. ' is in use'))
  end
  store_apart(id, elements, data)
  c[SEQ], c[ENTRIES], c[ELEMENTS] = seq, c[ENTRIES] + 1, c[ELEMENTS] + elements
  l[LIST_ELEMENTS] = l[LIST_ELEMENTS] + elements
  place(r, l[LIST_MONITORS] > 0)
  notify(seq)
  bulk.seqs[#bulk.seqs + 1] = seq
  bulk.processed = bulk.processed + 1
end
return bulk_finish()
