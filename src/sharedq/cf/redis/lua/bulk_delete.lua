-- flags: allow-oom
-- delete_entries: delete entries by id, in order, each with its own seq.
-- ARGV[2..]: missing_ok ('1'), lock count n, n lock numbers, entry ids...
local done = recorded()
if done then return done end
local missing_ok, nlocks = ARGV[2] == '1', tonumber(ARGV[3])
bulk_begin(counters(open('c')))
local c = bulk.c
check_conditions(4, 3 + nlocks, 0, nil, nil)
for i = 4 + nlocks, #ARGV do
  local id = ARGV[i]
  local r = redis.call('HGET', E, id)
  if not r then
    if not missing_ok then
      return bulk_finish(err_text(NO_SUCH_ENTRY, 'no entry ' .. hex(id)))
    end
    bulk.missing[#bulk.missing + 1] = id
  else
    local list = bulk_list(rec_list(r))
    keep_old(r, true)
    unplace(r, list[LIST_MONITORS] > 0)
    redis.call('HDEL', E, id)
    drop_data(r)
    local size = rec_elements(r)
    list[LIST_ELEMENTS] = list[LIST_ELEMENTS] - size
    c[SEQ], c[ENTRIES], c[ELEMENTS] = c[SEQ] + 1, c[ENTRIES] - 1, c[ELEMENTS] - size
    notify(c[SEQ])
    bulk.seqs[#bulk.seqs + 1] = c[SEQ]
  end
  bulk.processed = bulk.processed + 1
end
return bulk_finish()
