-- lock / unlock a lock-table entry.
-- ARGV[2..]: 'l' to take it or 'u' to release it, lock number.
local done = recorded()
if done then return done end
local c = counters(open('c'))
local number = ARGV[3]
local holder = redis.call('HGET', K, number)
if ARGV[2] == 'l' then
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
c[SEQ] = c[SEQ] + 1
redis.call('HSET', M, 'c', packed_counters(c), kept_seq(c[SEQ]))
return c[SEQ]
