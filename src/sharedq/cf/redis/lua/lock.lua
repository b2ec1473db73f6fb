#!lua
-- include: common
-- lock / unlock a lock-table entry.
-- ARGV[6..]: 'l' to take it or 'u' to release it, lock number.
local done = recorded()
if done then return done end
local v = open('seq')
local number = ARGV[7]
local holder = redis.call('HGET', K, number)
if ARGV[6] == 'l' then
  if holder and holder ~= UID then
    fail(LOCK_HELD, 'lock ' .. number .. ' is held by user ' .. holder, 'holder=' .. holder)
  end
  if not holder then redis.call('HSET', K, number, UID) end
else
  if holder ~= UID then
    fail(LOCK_NOT_HELD, 'user ' .. UID .. ' does not hold lock ' .. number)
  end
  redis.call('HDEL', K, number)
end
local seq = tonumber(v[1]) + 1
redis.call('HSET', M, 'seq', seq)
return record(seq)
