#!lua
-- include: common
-- Renew the caller's lease while its connection is live; 0 once it is not (a lapsed
-- lease is never renewed: that user has failed).
-- ARGV[6]: lease in milliseconds.
local v = redis.call('HMGET', M, 't' .. UID, 'x' .. UID)
local now = now_ms()
if v[1] ~= TOKEN or tonumber(v[2]) <= now then return 0 end
redis.call('HSET', M, 'x' .. UID, now + tonumber(ARGV[6]))
return 1
