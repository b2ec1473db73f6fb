-- write: create an entry at its key position.
-- ARGV[2]: list(2) key(16) version(8) flags(1: 1 head, 2 ignore_limit, 4 expect
-- authority) elements(1) expected authority(8) adjunct length(1) secondary key
-- length(1) entry id length(1, 0: generate one), then adjunct, secondary key, id.
-- ARGV[3]: data (kept in D when there is any).  ARGV[4..]: lock numbers.
local done = recorded()
if done then return done end
local spec = ARGV[2]
local list, key, version, flags, elements, adjunct, skey, id = write_spec(spec)
local raw_c, raw_l = open('c', 'L' .. list)
local c, l = counters(raw_c), controls(raw_l)
if id ~= '' and redis.call('HEXISTS', E, id) == 1 then
  fail(ENTRY_EXISTS, 'entry id ' .. hex(id) .. ' is in use')
end
if bit.band(flags, 4) ~= 0 then
  check_conditions(4, #ARGV, list, from_be(string.sub(spec, 29, 36)), l[LIST_AUTHORITY])
elseif #ARGV >= 4 then
  check_conditions(4, #ARGV, list, nil, nil)
end
check_limit(list, l, bit.band(flags, 2) ~= 0)
if c[ENTRIES] >= c[MAX_ENTRIES] then
  fail(STRUCTURE_FULL, 'structure ' .. structure_name() .. ' has all ' .. int(c[MAX_ENTRIES])
    .. ' entries in use')
end
if c[ELEMENTS] + elements > c[MAX_ELEMENTS] then
  fail(STRUCTURE_FULL, 'structure ' .. structure_name() .. ' has ' .. int(c[ELEMENTS]) .. ' of '
    .. int(c[MAX_ELEMENTS]) .. ' elements in use; ' .. elements .. ' more do not fit')
end
local seq = c[SEQ] + 1
local generated = id == ''
if generated then id = '\0\0\0\0' .. be(seq, 8) end
local r = make_rec(id, list, key, ordinal(seq, bit.band(flags, 1) ~= 0), version, elements,
  adjunct, skey)
-- A generated id is new unless a caller chose one of that shape: HSETNX checks that
-- and, when it holds, is the first write.
if generated then
  if redis.call('HSETNX', E, id, r) == 0 then
    fail(ENTRY_EXISTS, 'entry id ' .. hex(id) .. ' is in use')
  end
else
  redis.call('HSET', E, id, r)
end
if elements > 0 then redis.call('HSET', D, id, ARGV[3]) end
c[SEQ], c[ENTRIES], c[ELEMENTS] = seq, c[ENTRIES] + 1, c[ELEMENTS] + elements
l[LIST_ELEMENTS] = l[LIST_ELEMENTS] + elements
redis.call('HSET', M, 'c', packed_counters(c), 'L' .. list, packed_controls(l), kept_seq(seq))
place(r, l[LIST_MONITORS] > 0)
notify(seq)
return seq
