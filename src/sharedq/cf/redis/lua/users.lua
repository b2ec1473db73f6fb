#!lua flags=no-writes
-- include: common
-- users: every user the structure records, as user id, name, 'a' active or 'f' failed.
-- A user whose lease lapsed (its process stopped renewing it) counts as failed.
open()
local fields = {}
for u = 1, 32 do
  fields[#fields + 1] = 'n' .. u
  fields[#fields + 1] = 's' .. u
  fields[#fields + 1] = 'x' .. u
end
local v = redis.call('HMGET', M, unpack(fields))
local now = now_ms()
local out = {}
for u = 1, 32 do
  local name, state, lease = v[3 * u - 2], v[3 * u - 1], v[3 * u]
  if name then
    if state == 'a' and tonumber(lease) <= now then state = 'f' end
    out[#out + 1] = {u, name, state}
  end
end
return out
