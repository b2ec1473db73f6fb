-- write_rekey: write an entry, then move it on its list to a new key: write.lua then
-- move.lua by id, in one call (two seqs, consecutive), with nothing in between.
-- ARGV[2], ARGV[3]: as write's.  ARGV[4]: the move's options (see options(): a new key,
-- and a version to set and a secondary key if given).  ARGV[5..]: lock numbers.
-- Reply: {seq of the write, entries on the list after it}.
-- (A put is on the path of every message: what a helper would do is written out where
-- the helper's call would cost more than its lines.)
local done = RETRY and recorded()
if done then return done end
local spec = ARGV[2]
-- write_spec(spec), less the written key and version: cut only if needed.
local l1, l2 = sbyte(spec, 1, 2)
local flags, elements, _, _, _, _, _, _, _, _, al, sl, il = sbyte(spec, 27, 39)
local list = l1 * 256 + l2
local adjunct, skey, id = '', '', ''  -- each cut only when there is one
if al > 0 then adjunct = ssub(spec, 40, 39 + al) end
if sl > 0 then skey = ssub(spec, 40 + al, 39 + al + sl) end
if il > 0 then id = ssub(spec, 40 + al + sl, 39 + al + sl + il) end
local o = options(ARGV[4], 1)
local lf = LFIELDS[list] or lfield(list)
local raw_c, raw_l = open('c', lf)
local c, l = counters(raw_c), controls(raw_l)
local before = check_new_entry(spec, list, flags, elements, id, c, l, 5)
local seq = c[SEQ] + 1
if id == '' then id = spack('>I4I8', 0, seq) end  -- '\0\0\0\0' .. be(seq, 8)
-- The entry as moved is made from the request directly (the written one only when a
-- monitor must see it): one record of the data's length made, not two.
local data = ARGV[3]
local inline = ''  -- inline_part(elements, data)
if elements > 0 and #data <= INLINE then inline = data end
local new_skey = o.skey
if new_skey == nil then new_skey = skey end
local new_ver = o.version
if new_ver == '' then
  new_ver = ssub(spec, 19, 26)
elseif new_ver == 'i' then
  new_ver = version_plus_one(ssub(spec, 19, 26), id)
end
local ord = spack('>BI7', 128, seq + 1)  -- ordinal(seq + 1, false)
local sk = new_skey or ''
local moved = id .. (BE2[list] or be2(list)) .. o.key .. ord .. new_ver  -- make_rec's lines
  .. lengths(elements, #adjunct, #sk) .. adjunct .. sk .. inline
-- Only the entry as moved is stored: nobody sees the written one but the monitors.
if redis.call('HSETNX', E, id, moved) == 0 then store_new_entry(id, moved) end  -- it fails
if elements > 0 and #data > INLINE then redis.call('HSET', D, id, data) end  -- store_apart
c[SEQ], c[ENTRIES], c[ELEMENTS] = seq + 1, c[ENTRIES] + 1, c[ELEMENTS] + elements
l[LIST_ELEMENTS] = l[LIST_ELEMENTS] + elements
redis.call('HSET', M, 'c', packed_counters(c), lf, packed_controls(l), kept_seq(seq))
if l[LIST_MONITORS] > 0 then
  -- Watched: the written entry comes and goes, as with two requests, where a monitor
  -- would see it; where none would, only the entry as moved is placed.
  local written_key = ssub(spec, 3, 18)
  if seen_by_monitors(list, written_key, sl > 0 and skey or nil) then
    local r = make_rec(id, list, written_key, ordinal(seq, flags % 2 == 1),
      ssub(spec, 19, 26), elements, adjunct, skey, inline)
    place(r, true)
    notify(seq)
    unplace(r, true)
  end
  place(moved, true)
  notify(seq + 1)
elseif (new_skey or '') == '' then  -- place(moved, false, ...)
  redis.call('ZADD', LIST_KEYS[list] or list_key(list), '0', o.key .. ord .. id)
else
  place(moved, false, o.key .. ord .. id)
end
-- The new entry is on the list: one more than the limit check read, if it read them.
REPLY2[1], REPLY2[2] = seq, before and before + 1 or redis.call('ZCARD', list_key(list))
return REPLY2
