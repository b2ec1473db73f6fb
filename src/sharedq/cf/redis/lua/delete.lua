#!lua
-- include: common
-- delete: delete the located entry; the reply carries it as it was.
-- ARGV[6..]: locator kind, locator list, locator argument, comparison, expect_version,
-- expect_authority, lock numbers...
local done = recorded()
if done then return done end
local v = open('seq', 'ne', 'nel')
local r = locate(ARGV[6], tonumber(ARGV[7]), ARGV[8], ARGV[9])
if not r then return false end
local list = rec_list(r)
local f = redis.call('HMGET', M, 'w' .. list, 'e' .. list, 'a' .. list)
check_version(r, ARGV[10])
check_conditions(12, #ARGV, list, ARGV[11], f[3])
local seq = tonumber(v[1]) + 1
local elements = rec_elements(r)
unplace(r, num(f[1]) > 0)
redis.call('HDEL', E, rec_id(r))
redis.call('HSET', M, 'seq', seq, 'ne', tonumber(v[2]) - 1, 'nel', tonumber(v[3]) - elements,
  'e' .. list, num(f[2]) - elements)
notify(seq)
return record({seq, r})
