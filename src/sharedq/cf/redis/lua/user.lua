-- mark_failed ('f') or cleanup_user ('c') of another user (or oneself).
-- ARGV[2..]: 'f' or 'c', the user id.
local done = recorded()
if done then return done end
local c = counters(open('c'))
local target = ARGV[3]
if redis.call('HEXISTS', M, 'n' .. target) == 0 then
  fail(NO_SUCH_USER, 'no user ' .. target .. ' on ' .. structure_name())
end
if ARGV[2] == 'f' then
  redis.call('DEL', token_key(target))
  -- Wake the failed user's waiters, so that they see it at once.
  redis.call('XADD', P .. 'q:' .. target, '*', 'w', '1')
else
  if redis.call('EXISTS', token_key(target)) == 1 then
    fail(USER_NOT_FAILED, 'user ' .. target .. ' is active; only failed users are cleaned up')
  end
  release_user(target, c)
end
c[SEQ] = c[SEQ] + 1
redis.call('HSET', M, 'c', packed_counters(c), kept_seq(c[SEQ]))
return c[SEQ]
