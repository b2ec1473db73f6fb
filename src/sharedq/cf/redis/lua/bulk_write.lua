-- write_entries: write entries, in order, each with its own seq (the bulk form of write).
-- ARGV[2]: options: '1' ignore_limit, else '' or '0'; with expect_authority (the queue
-- manager's put_many, a batch of puts conditioned as each put is) the authority(8)
-- follows, and every entry's list is checked for it before anything is written.
-- ARGV[3..]: lock count n, n lock numbers, then two arguments per entry: its spec
-- (write.lua's ARGV[2]; its authority flag is not used) and its data.
local done = RETRY and recorded()
if done then return done end
local opts, nlocks = ARGV[2], tonumber(ARGV[3])
local ignore = ssub(opts, 1, 1) == '1'
bulk_begin(counters(open('c')))
check_conditions(4, 3 + nlocks, 0, nil, nil)
local first = 4 + nlocks
if #opts == 9 then
  local expect = from_be(ssub(opts, 2, 9))
  for i = first, #ARGV, 2 do
    local list = from_be2(ARGV[i], 1)
    check_conditions(1, 0, list, expect, bulk_list(list)[LIST_AUTHORITY])
  end
end
local c = bulk.c
local counts = {}  -- list -> its entries now, read once
-- The ids first (a generated one is the seq the entry will take: one per entry, in
-- order), and whether they are in use in one HMGET, not an HSETNX per entry.  An entry
-- on a watched list is stored and placed as it comes (its monitors are told of each
-- change on the state it leaves); the others' records and list members in one command
-- each at the end, since nothing in between reads them.  An id written before in this
-- request is in use from then on, as its HSETNX would find.
local ids = {}
for i = first, #ARGV, 2 do
  local spec = ARGV[i]
  local il = sbyte(spec, 39)
  local id = ''
  if il > 0 then
    local al, sl = sbyte(spec, 37, 38)
    id = ssub(spec, 40 + al + sl, 39 + al + sl + il)
  end
  if id == '' then id = spack('>I4I8', 0, c[SEQ] + #ids + 1) end  -- '\0\0\0\0' .. be(seq, 8)
  ids[#ids + 1] = id
end
local existing = records_of(ids, 1, #ids)
local used, hset, zadd, sadd = {}, {}, {}, {}
local function flush(err)
  call_many('HSET', E, hset, 2)
  for key, members in pairs(zadd) do call_many('ZADD', key, members, 2) end
  call_many('ZADD', S, sadd, 2)
  return bulk_finish(err)
end
for i = first, #ARGV, 2 do
  -- write_spec's fields, each read once when needed.
  local spec, data = ARGV[i], ARGV[i + 1]
  local l1, l2 = sbyte(spec, 1, 2)
  local flags, elements, _, _, _, _, _, _, _, _, al, sl = sbyte(spec, 27, 38)
  local list = l1 * 256 + l2
  -- The id first, as write (check_new_entry) and the memory backend check it.
  local k = (i - first) / 2 + 1
  local id = ids[k]
  if existing[k] or used[id] then
    return flush(err_text(ERR.ENTRY_EXISTS, 'entry id ' .. hex(id) .. ' is in use'))
  end
  local l = bulk.lists[list] or bulk_list(list)
  local limit = limit_of(l)
  if not ignore and limit then
    local n = counts[list] or redis.call('ZCARD', list_key(list))
    if n >= limit then
      return flush(err_text(ERR.LIST_FULL, 'list ' .. list .. ' is at its limit of '
        .. int(limit) .. ' entries'))
    end
    counts[list] = n + 1
  end
  if c[ENTRIES] >= c[MAX_ENTRIES] then
    return flush(err_text(ERR.STRUCTURE_FULL, 'structure ' .. structure_name()
      .. ' has all ' .. int(c[MAX_ENTRIES]) .. ' entries in use'))
  end
  if c[ELEMENTS] + elements > c[MAX_ELEMENTS] then
    return flush(err_text(ERR.STRUCTURE_FULL, 'structure ' .. structure_name() .. ' has '
      .. int(c[ELEMENTS]) .. ' of ' .. int(c[MAX_ELEMENTS]) .. ' elements in use; '
      .. elements .. ' more do not fit'))
  end
  local seq = c[SEQ] + 1
  used[id] = true
  -- make_rec's record, its adjunct and secondary key copied from the spec in one piece.
  local key, ord = ssub(spec, 3, 18), ordinal(seq, band(flags, 1) ~= 0)
  local inline = ''
  if elements > 0 then
    if #data <= INLINE then
      inline = data
    else
      redis.call('HSET', D, id, data)  -- store_apart
    end
  end
  local extra = ''
  if al + sl > 0 then extra = ssub(spec, 40, 39 + al + sl) end
  local r = id .. be2(list) .. key .. ord .. ssub(spec, 19, 26) .. lengths(elements, al, sl)
    .. extra .. inline
  local member = key .. ord .. id
  c[SEQ], c[ENTRIES], c[ELEMENTS] = seq, c[ENTRIES] + 1, c[ELEMENTS] + elements
  l[LIST_ELEMENTS] = l[LIST_ELEMENTS] + elements
  if l[LIST_MONITORS] > 0 then
    redis.call('HSET', E, id, r)
    place(r, true, member)
    notify(seq)
  else
    hset[#hset + 1], hset[#hset + 2] = id, r
    bulk_push(zadd, list_key(list), '0', member)
    if sl > 0 then
      sadd[#sadd + 1], sadd[#sadd + 2] = '0',
        skey_prefix(list, ssub(spec, 40 + al, 39 + al + sl)) .. member
    end
  end
  bulk.seqs[#bulk.seqs + 1] = seq
  bulk.processed = bulk.processed + 1
end
return flush()
