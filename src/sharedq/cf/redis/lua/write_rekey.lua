-- write_rekey: write an entry, then move it on its list to a new key: write.lua then
-- move.lua by id, in one call (two seqs, consecutive), with nothing in between.
-- ARGV[2], ARGV[3]: as write's.  ARGV[4]: the move's options (see options(): a new key,
-- and a version to set and a secondary key if given).  ARGV[5..]: lock numbers.
local done = recorded()
if done then return done end
local spec = ARGV[2]
local list, key, version, flags, elements, adjunct, skey, id = write_spec(spec)
local o = options(ARGV[4], 1)
local raw_c, raw_l = open('c', 'L' .. list)
local c, l = counters(raw_c), controls(raw_l)
check_new_entry(spec, list, flags, elements, id, c, l, 5)
local seq = c[SEQ] + 1
local generated = id == ''
if generated then id = '\0\0\0\0' .. be(seq, 8) end
local r = make_rec(id, list, key, ordinal(seq, bit.band(flags, 1) ~= 0), version, elements,
  adjunct, skey)
local new_skey = o.skey
if new_skey == nil then new_skey = rec_skey(r) end
local moved = moved_rec(r, list, o.key, ordinal(seq + 1, false), new_version(r, o.version, false),
  new_skey)
-- Only the entry as moved is stored: nobody sees the written one but the monitors.
store_new_entry(id, moved, generated)
if elements > 0 then redis.call('HSET', D, id, ARGV[3]) end
c[SEQ], c[ENTRIES], c[ELEMENTS] = seq + 1, c[ENTRIES] + 1, c[ELEMENTS] + elements
l[LIST_ELEMENTS] = l[LIST_ELEMENTS] + elements
redis.call('HSET', M, 'c', packed_counters(c), 'L' .. list, packed_controls(l), kept_seq(seq))
if l[LIST_MONITORS] > 0 then
  -- Watched: the written entry comes and goes, as with two requests.
  place(r, true)
  notify(seq)
  unplace(r, true)
  place(moved, true)
  notify(seq + 1)
else
  place(moved, false)
end
return seq
