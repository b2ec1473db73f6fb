-- flags: allow-oom
-- delete: delete the located entry; the reply carries it as it was (record, data: none
-- if the options say so).
-- ARGV[2]: packed locator.  ARGV[3]: options (see options()).  ARGV[4..]: lock numbers.
local done = RETRY and recorded()
if done then return done end
local o = options(ARGV[3], 1)
local at = locator_list(ARGV[2])
local raw_c, raw_l = open('c', lfield(at or 0))
local c = counters(raw_c)
local r, id, member = locate_packed(ARGV[2])
if not r then return false end
local list = rec_list(r)
local l
if at then l = controls(raw_l) else l = list_controls(list) end
check_version(r, o.expect_version)
check_conditions(4, #ARGV, list, o.expect_authority, l[LIST_AUTHORITY])
local seq = c[SEQ] + 1
local elements, al, sl = sbyte(r, 47, 49)
local apart = elements > 0 and #r < 50 + al + sl  -- data_apart(r)
local data = ''
if not o.without_data and elements > 0 then  -- reply_data(r)
  if apart then data = redis.call('HGET', D, id) else data = false end
end
if cow ~= false then keep_old(r, true) end
unplace(r, l[LIST_MONITORS] > 0, member or rec_member(r, id))
redis.call('HDEL', E, id)
if apart then redis.call('HDEL', D, id) end  -- drop_data(r)
c[SEQ], c[ENTRIES], c[ELEMENTS] = seq, c[ENTRIES] - 1, c[ELEMENTS] - elements
l[LIST_ELEMENTS] = l[LIST_ELEMENTS] - elements
redis.call('HSET', M, 'c', packed_counters(c), lfield(list), packed_controls(l),
  kept_change(seq, r, data))
if #touched > 0 then notify(seq) end
REPLY3[1], REPLY3[2], REPLY3[3] = seq, r, data
return REPLY3
