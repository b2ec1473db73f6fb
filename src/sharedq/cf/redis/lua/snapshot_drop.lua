-- flags: allow-oom
-- snapshot_drop: free a snapshot's copy (UNLINK: the server frees it in the background).
-- ARGV[2]: snapshot id.  Dropping one that is gone does nothing.
local X = P .. 'x' .. ARGV[2] .. ':'
local lc = redis.call('HGET', X .. 'i', 'lc')
redis.call('SREM', P .. 'xs', ARGV[2])
if #redis.call('SMEMBERS', P .. 'xs') == 0 then redis.call('HDEL', M, 'xa') end
if not lc then return 0 end
local keys = {X .. 'i', X .. 'e', X .. 'd'}
for i = 0, tonumber(lc) - 1 do keys[#keys + 1] = X .. 'l:' .. i end
for first = 1, #keys, 500 do
  redis.call('UNLINK', unpack(keys, first, math.min(first + 499, #keys)))
end
return 1
