#!lua
-- include: common
-- update: rewrite the located entry's data, adjunct or version in place, optionally
-- bumping its list's authority (the control-entry protocol).  Key and secondary key
-- stay, so no monitor can change state.
-- ARGV[6..]: locator kind, locator list, locator argument, comparison, data ('u' keep,
-- 'd' .. new), adjunct ('u' keep, 'a' .. new), elements of the new data, version op,
-- increment_authority ('1'), expect_version, expect_authority, lock numbers...
local done = recorded()
if done then return done end
local v = open('seq', 'nel', 'mel')
local r = locate(ARGV[6], tonumber(ARGV[7]), ARGV[8], ARGV[9])
if not r then return false end
local list = rec_list(r)
local f = redis.call('HMGET', M, 'e' .. list, 'a' .. list)
check_version(r, ARGV[15])
check_conditions(17, #ARGV, list, ARGV[16], f[2])
local old = rec_elements(r)
local elements = old
if ARGV[10] ~= 'u' then elements = tonumber(ARGV[12]) end
local in_use = tonumber(v[2])
if elements > old and in_use + elements - old > tonumber(v[3]) then
  fail(STRUCTURE_FULL, 'structure ' .. NAME .. ' has ' .. in_use .. ' of ' .. v[3]
    .. ' elements in use; ' .. (elements - old) .. ' more do not fit')
end
local version = new_version(r, ARGV[13], false)
local seq = tonumber(v[1]) + 1
local al, sl = string.byte(r, 48, 49)
local adjunct, data = string.sub(r, 50, 49 + al), string.sub(r, 50 + al + sl)
if ARGV[11] ~= 'u' then adjunct = string.sub(ARGV[11], 2) end
if ARGV[10] ~= 'u' then data = string.sub(ARGV[10], 2) end
local skey = string.sub(r, 50 + al, 49 + al + sl)
local updated = string.sub(r, 1, 38) .. version .. string.char(elements, #adjunct, #skey)
  .. adjunct .. skey .. data
redis.call('HSET', E, rec_id(r), updated)
if ARGV[14] == '1' then
  redis.call('HSET', M, 'seq', seq, 'nel', in_use + elements - old,
    'e' .. list, num(f[1]) + elements - old, 'a' .. list, num(f[2]) + 1)
else
  redis.call('HSET', M, 'seq', seq, 'nel', in_use + elements - old,
    'e' .. list, num(f[1]) + elements - old)
end
return record({seq, updated})
