-- flags: allow-oom
-- delete_entries: delete entries by id, in order, each with its own seq.
-- ARGV[2..]: missing_ok ('1'), lock count n, n lock numbers, entry ids...
local done = RETRY and recorded()
if done then return done end
local missing_ok, nlocks = ARGV[2] == '1', tonumber(ARGV[3])
bulk_begin(counters(open('c')))
local c = bulk.c
check_conditions(4, 3 + nlocks, 0, nil, nil)
-- The records in one HMGET; an entry on a watched list is deleted as it comes (its
-- monitors are told of each change on the state it leaves), the others' list members
-- and records in one command each at the end, since nothing in between reads them.
-- An id deleted before in this request is missing from then on, as a second HGET would
-- find it.
local first = 4 + nlocks
local records = records_of(ARGV, first, #ARGV)
local gone, rem, srem, hdel = {}, {}, {}, {}
local function flush(err)
  for key, members in pairs(rem) do call_many('ZREM', key, members, 1) end
  call_many('ZREM', S, srem, 1)
  call_many('HDEL', E, hdel, 1)
  return bulk_finish(err)
end
for i = first, #ARGV do
  local id = ARGV[i]
  local r = records[i - first + 1]
  if not r or gone[id] then
    if not missing_ok then
      return flush(err_text(NO_SUCH_ENTRY, 'no entry ' .. hex(id)))
    end
    bulk.missing[#bulk.missing + 1] = id
  else
    gone[id] = true
    local n1, n2 = sbyte(r, 13, 14)
    local n = n1 * 256 + n2
    local list = bulk.lists[n] or bulk_list(n)
    if cow ~= false then keep_old(r, true) end
    local member = ssub(r, 15, 38) .. id
    local size, al, sl = sbyte(r, 47, 49)
    if list[LIST_MONITORS] > 0 then
      unplace(r, true, member)
      redis.call('HDEL', E, id)
    else
      bulk_push(rem, list_key(n), member)
      if sl > 0 then
        srem[#srem + 1] = skey_prefix(n, ssub(r, 50 + al, 49 + al + sl)) .. member
      end
      hdel[#hdel + 1] = id
    end
    if size > 0 and #r < 50 + al + sl then redis.call('HDEL', D, id) end  -- drop_data
    list[LIST_ELEMENTS] = list[LIST_ELEMENTS] - size
    c[SEQ], c[ENTRIES], c[ELEMENTS] = c[SEQ] + 1, c[ENTRIES] - 1, c[ELEMENTS] - size
    if #touched > 0 then notify(c[SEQ]) end
    bulk.seqs[#bulk.seqs + 1] = c[SEQ]
  end
  bulk.processed = bulk.processed + 1
end
return flush()
