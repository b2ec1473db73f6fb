#!lua
-- include: common, release
-- disconnect: release the caller's monitors, events and locks and free its user id.
if RETRY == '1' and redis.call('HGET', M, 't' .. UID) ~= TOKEN then
  return 0  -- the first attempt went through; its reply was lost
end
local v = open('seq')
release_user(UID)
local seq = tonumber(v[1]) + 1
redis.call('HSET', M, 'seq', seq)
return seq
