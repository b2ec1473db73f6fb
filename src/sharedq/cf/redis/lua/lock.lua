-- lock: take a lock-table entry (unlock.lua releases one).  Not allow-oom: a lock
-- taken adds a field to the lock table.
-- ARGV[2]: lock number.
local done = RETRY and recorded()
if done then return done end
local c = counters(open('c'))
local number = ARGV[2]
local holder = redis.call('HGET', K, number)
if holder and holder ~= UID then
  fail(ERR.LOCK_HELD, 'lock ' .. number .. ' is held by user ' .. holder, 'holder=' .. holder)
end
if not holder then redis.call('HSET', K, number, UID) end
c[SEQ] = c[SEQ] + 1
redis.call('HSET', M, 'c', packed_counters(c), kept_seq(c[SEQ]))
return c[SEQ]
