-- update: rewrite the located entry's data, adjunct or version in place, optionally
-- bumping its list's authority (the control-entry protocol).  Key and secondary key
-- stay, so no monitor can change state.
-- ARGV[2]: packed locator.  ARGV[3]: options (see options()).  ARGV[4]: data ('u'
-- keep, 'd' .. new).  ARGV[5]: adjunct ('u' keep, 'a' .. new).  ARGV[6]: elements of
-- the new data.  ARGV[7..]: lock numbers.
local done = RETRY and recorded()
if done then return done end
local o = options(ARGV[3], 1)
local c = counters(open('c'))
local r = locate_packed(ARGV[2])
if not r then return false end
local list = rec_list(r)
local l = list_controls(list)
check_version(r, o.expect_version)
check_conditions(7, #ARGV, list, o.expect_authority, l[LIST_AUTHORITY])
local old = rec_elements(r)
local elements = old
if ARGV[4] ~= 'u' then elements = tonumber(ARGV[6]) end
if elements > old and c[ELEMENTS] + elements - old > c[MAX_ELEMENTS] then
  fail(ERR.STRUCTURE_FULL, 'structure ' .. structure_name() .. ' has ' .. int(c[ELEMENTS])
    .. ' of ' .. int(c[MAX_ELEMENTS]) .. ' elements in use; ' .. (elements - old)
    .. ' more do not fit')
end
local version = new_version(r, o.version, false)
local seq = c[SEQ] + 1
local al, sl = sbyte(r, 48, 49)
local adjunct = ssub(r, 50, 49 + al)
if ARGV[5] ~= 'u' then adjunct = ssub(ARGV[5], 2) end
local skey = ssub(r, 50 + al, 49 + al + sl)
local data, inline
if ARGV[4] == 'u' then
  inline = ssub(r, 50 + al + sl)  -- the data stays where it is
  if inline == '' then data = rec_data(r) end
else
  data = ssub(ARGV[4], 2)
  inline = inline_part(elements, data)
end
local updated = ssub(r, 1, 38) .. version .. schar(elements, #adjunct, #skey)
  .. adjunct .. skey .. inline
keep_old(r, ARGV[4] ~= 'u')
if ARGV[4] ~= 'u' then
  -- A move's kept result may name the data this replaces (see named_result).
  if data_apart(r) then redis.call('HSET', M, 'dg', be(seq, 8)) end
  if elements > 0 and inline == '' then
    redis.call('HSET', D, rec_id(r), data)
  else
    drop_data(r)
  end
end
redis.call('HSET', E, rec_id(r), updated)
c[SEQ], c[ELEMENTS] = seq, c[ELEMENTS] + elements - old
l[LIST_ELEMENTS] = l[LIST_ELEMENTS] + elements - old
if o.increment_authority then  -- (see packed_controls)
  l[LIST_AUTHORITY], l[LIST_BYTES] = l[LIST_AUTHORITY] + 1, nil
end
if inline ~= '' then data = false end  -- the reply leaves it in the record
redis.call('HSET', M, 'c', packed_counters(c), lfield(list), packed_controls(l),
  kept_change(seq, updated, data))
return {seq, updated, data}
