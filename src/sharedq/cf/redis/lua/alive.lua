#!lua flags=no-writes
-- include: common
-- Whether the caller's connection can still make requests: 1 or 0.
local v = redis.call('HMGET', M, 't' .. UID, 'x' .. UID)
if v[1] == TOKEN and tonumber(v[2]) > now_ms() then return 1 end
return 0
