-- flags: allow-oom
-- mark_failed ('f') or cleanup_user ('c') of another user (or oneself).
-- ARGV[2..]: 'f' or 'c', the user id.
local done = RETRY and recorded()
if done then return done end
local c = counters(open('c'))
local target = ARGV[3]
if redis.call('HEXISTS', M, 'n' .. target) == 0 then
  fail(ERR.NO_SUCH_USER, 'no user ' .. target .. ' on ' .. structure_name())
end
if ARGV[2] == 'f' then
  -- Wake the failed user's waiters, so that they see it at once.  Only when its token
  -- was live: the waiters of a user already failed (lease lapsed, or marked before)
  -- notice within a wait slice anyway, and one marker per live token is what keeps this
  -- allow-oom function from growing the user's stream by a marker a call.
  if redis.call('DEL', token_key(target)) == 1 then
    redis.call('XADD', P .. 'q:' .. target, '*', 'w', '1')
  end
else
  if redis.call('EXISTS', token_key(target)) == 1 then
    fail(ERR.USER_NOT_FAILED, 'user ' .. target .. ' is active; only failed users are cleaned up')
  end
  release_user(target, c)
end
c[SEQ] = c[SEQ] + 1
redis.call('HSET', M, 'c', packed_counters(c), kept_seq(c[SEQ]))
return c[SEQ]
