-- write_rekey: write an entry, then move it on its list to a new key: write.lua then
-- move.lua by id, in one call (two seqs, consecutive), with nothing in between.
-- ARGV[2], ARGV[3]: as write's.  ARGV[4]: the move's options (see options(): a new key,
-- and a version to set and a secondary key if given).  ARGV[5..]: lock numbers.
-- Reply: {seq of the write, entries on the list after it}.
local done = RETRY and recorded()
if done then return done end
local spec = ARGV[2]
local list, key, version, flags, elements, adjunct, skey, id = write_spec(spec)
local o = options(ARGV[4], 1)
local raw_c, raw_l = open('c', lfield(list))
local c, l = counters(raw_c), controls(raw_l)
local before = check_new_entry(spec, list, flags, elements, id, c, l, 5)
local seq = c[SEQ] + 1
if id == '' then id = spack('>I4I8', 0, seq) end  -- '\0\0\0\0' .. be(seq, 8)
-- The entry as moved is made from the request directly (the written one only when a
-- monitor must see it): one record of the data's length made, not two.
local inline = inline_part(elements, ARGV[3])
local new_skey = o.skey
if new_skey == nil then new_skey = skey end
local new_ver = version
if o.version == 'i' then
  new_ver = version_plus_one(version, id)
elseif o.version ~= '' then
  new_ver = ssub(o.version, 2)
end
local ord = ordinal(seq + 1, false)
local moved = make_rec(id, list, o.key, ord, new_ver, elements, adjunct, new_skey or '', inline)
-- Only the entry as moved is stored: nobody sees the written one but the monitors.
store_new_entry(id, moved)
store_apart(id, elements, ARGV[3])
c[SEQ], c[ENTRIES], c[ELEMENTS] = seq + 1, c[ENTRIES] + 1, c[ELEMENTS] + elements
l[LIST_ELEMENTS] = l[LIST_ELEMENTS] + elements
redis.call('HSET', M, 'c', packed_counters(c), lfield(list), packed_controls(l), kept_seq(seq))
if l[LIST_MONITORS] > 0 then
  -- Watched: the written entry comes and goes, as with two requests.
  local r = make_rec(id, list, key, ordinal(seq, band(flags, 1) ~= 0), version, elements,
    adjunct, skey, inline)
  place(r, true)
  notify(seq)
  unplace(r, true)
  place(moved, true)
  notify(seq + 1)
else
  place(moved, false, o.key .. ord .. id)
end
-- The new entry is on the list: one more than the limit check read, if it read them.
REPLY2[1], REPLY2[2] = seq, before and before + 1 or redis.call('ZCARD', list_key(list))
return REPLY2
