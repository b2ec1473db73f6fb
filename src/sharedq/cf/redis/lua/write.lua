-- write: create an entry at its key position.
-- ARGV[2]: list(2) key(16) version(8) flags(1: 1 head, 2 ignore_limit, 4 expect
-- authority) elements(1) expected authority(8) adjunct length(1) secondary key
-- length(1) entry id length(1, 0: generate one), then adjunct, secondary key, id.
-- ARGV[3]: data (in the record when small, else in D).  ARGV[4..]: lock numbers.
-- Reply: {seq, entries on the list after the write}.
local done = RETRY and recorded()
if done then return done end
local spec = ARGV[2]
local list, key, version, flags, elements, adjunct, skey, id = write_spec(spec)
local raw_c, raw_l = open('c', lfield(list))
local c, l = counters(raw_c), controls(raw_l)
local before = check_new_entry(spec, list, flags, elements, id, c, l, 4)
local seq = c[SEQ] + 1
if id == '' then id = spack('>I4I8', 0, seq) end  -- '\0\0\0\0' .. be(seq, 8)
local ord = ordinal(seq, band(flags, 1) ~= 0)
local r = make_rec(id, list, key, ord, version, elements, adjunct, skey,
  inline_part(elements, ARGV[3]))
store_new_entry(id, r)
store_apart(id, elements, ARGV[3])
c[SEQ], c[ENTRIES], c[ELEMENTS] = seq, c[ENTRIES] + 1, c[ELEMENTS] + elements
l[LIST_ELEMENTS] = l[LIST_ELEMENTS] + elements
redis.call('HSET', M, 'c', packed_counters(c), lfield(list), packed_controls(l), kept_seq(seq))
place(r, l[LIST_MONITORS] > 0, key .. ord .. id)
if #touched > 0 then notify(seq) end
-- The list's entry count too (one more than the limit check read, else ZCARD: O(1)); a
-- retried request's kept reply is the seq.
REPLY2[1], REPLY2[2] = seq, before and before + 1 or redis.call('ZCARD', list_key(list))
return REPLY2
