#!lua
-- include: common
-- set_list_controls: a list's limit and/or authority.
-- ARGV[6..]: list, limit ('u' keep, '' none, else the limit), increment_authority
-- ('1'), expect_authority ('' none), lock numbers...
local done = recorded()
if done then return done end
local list = ARGV[6]
local v = open('seq', 'a' .. list)
check_conditions(10, #ARGV, list, ARGV[9], v[2])
local seq = tonumber(v[1]) + 1
redis.call('HSET', M, 'seq', seq)
if ARGV[7] == '' then
  redis.call('HDEL', M, 'l' .. list)
elseif ARGV[7] ~= 'u' then
  redis.call('HSET', M, 'l' .. list, ARGV[7])
end
if ARGV[8] == '1' then redis.call('HSET', M, 'a' .. list, num(v[2]) + 1) end
return record(seq)
