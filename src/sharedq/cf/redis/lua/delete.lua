-- flags: allow-oom
-- delete: delete the located entry; the reply carries it as it was (record, data: none
-- if the options say so).
-- ARGV[2]: packed locator.  ARGV[3]: options (see options()).  ARGV[4..]: lock numbers.
-- (A commit's delete is on the path of every message: what a helper would do is written
-- out where the helper's call would cost more than its lines.)
local done = RETRY and recorded()
if done then return done end
local o = options(ARGV[3], 1)
local a = ARGV[2]
local kind, a1, a2 = sbyte(a, 1, 3)  -- locator_list(a)
local at = a1 * 256 + a2
local lf  -- the list's controls field
if at == 65535 then
  at, lf = nil, LFIELDS[0] or lfield(0)
else
  lf = LFIELDS[at] or lfield(at)
end
local raw_c, raw_l = open('c', lf)
local c = counters(raw_c)
local r, id, member
if kind == 105 then  -- by id (a commit's): locate's lines, locate_packed failing for it
  id = ssub(a, 5)
  r = redis.call('HGET', E, id)
  if r and at then
    local l1, l2 = sbyte(r, 13, 14)
    if l1 * 256 + l2 ~= at then r = nil end
  end
  if not r then r = locate_packed(a) end
else
  r, id, member = locate_packed(a)
  if not r then return false end
end
local list, l = at, nil  -- a located entry is on the locator's list
if at then
  l = controls(raw_l)
else
  list = rec_list(r)
  lf = lfield(list)
  l = list_controls(list)
end
if o.expect_version then check_version(r, o.expect_version) end
local expect = o.expect_authority
if #ARGV >= 4 or (expect and expect ~= l[LIST_AUTHORITY]) then
  check_conditions(4, #ARGV, list, expect, l[LIST_AUTHORITY])
end
local seq = c[SEQ] + 1
local elements, al, sl = sbyte(r, 47, 49)
local apart = elements > 0 and #r < 50 + al + sl  -- data_apart(r)
local data = ''
if not o.without_data and elements > 0 then  -- reply_data(r)
  if apart then data = redis.call('HGET', D, id) else data = false end
end
if cow ~= false then keep_old(r, true) end
member = member or ssub(r, 15, 38) .. id  -- rec_member(r, id)
local watched = l[LIST_MONITORS] > 0
if sl == 0 and not watched then  -- unplace(r, false, member)
  redis.call('ZREM', LIST_KEYS[list] or list_key(list), member)
else
  unplace(r, watched, member)
end
redis.call('HDEL', E, id)
if apart then redis.call('HDEL', D, id) end  -- drop_data(r)
c[SEQ], c[ENTRIES], c[ELEMENTS] = seq, c[ENTRIES] - 1, c[ELEMENTS] - elements
l[LIST_ELEMENTS] = l[LIST_ELEMENTS] - elements
redis.call('HSET', M, 'c', packed_counters(c), lf, packed_controls(l),
  kept_change(seq, r, data))
if #touched > 0 then notify(seq) end
REPLY3[1], REPLY3[2], REPLY3[3] = seq, r, data
return REPLY3
