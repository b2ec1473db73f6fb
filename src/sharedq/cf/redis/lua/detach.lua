-- flags: allow-oom
-- disconnect: release the caller's monitors, events and locks and free its user id.
if RETRY and redis.call('GET', token_key(UID)) ~= TOKEN then
  return 0  -- the first attempt went through; its reply was lost
end
local c = counters(open('c'))
release_user(UID, c)
c[SEQ] = c[SEQ] + 1
redis.call('HSET', M, 'c', packed_counters(c))
return c[SEQ]
