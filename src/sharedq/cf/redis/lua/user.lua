#!lua
-- include: common, release
-- mark_failed ('f') or cleanup_user ('c') of another user (or oneself).
-- ARGV[6..]: 'f' or 'c', the user id.
local done = recorded()
if done then return done end
local v = open('seq')
local target = ARGV[7]
local u = redis.call('HMGET', M, 'n' .. target, 's' .. target, 'x' .. target)
if not u[1] then
  fail(NO_SUCH_USER, 'no user ' .. target .. ' on ' .. NAME)
end
if ARGV[6] == 'f' then
  redis.call('HSET', M, 's' .. target, 'f')
  redis.call('HDEL', M, 't' .. target)
  -- Wake the failed user's waiters, so that they see it at once.
  redis.call('XADD', P .. 'q:' .. target, '*', 'w', '1')
else
  if u[2] == 'a' and tonumber(u[3]) > now_ms() then
    fail(USER_NOT_FAILED, 'user ' .. target .. ' is active; only failed users are cleaned up')
  end
  release_user(target)
end
local seq = tonumber(v[1]) + 1
redis.call('HSET', M, 'seq', seq)
return record(seq)
