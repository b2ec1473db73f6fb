-- flags: allow-oom
-- unlock: release a lock-table entry the caller holds (it only frees memory).
-- ARGV[2]: lock number.
local done = RETRY and recorded()
if done then return done end
local c = counters(open('c'))
local number = ARGV[2]
if redis.call('HGET', K, number) ~= UID then
  fail(ERR.LOCK_NOT_HELD, 'user ' .. UID .. ' does not hold lock ' .. number)
end
redis.call('HDEL', K, number)
c[SEQ] = c[SEQ] + 1
redis.call('HSET', M, 'c', packed_counters(c), kept_seq(c[SEQ]))
return c[SEQ]
