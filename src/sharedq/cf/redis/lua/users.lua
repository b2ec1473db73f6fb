-- flags: no-writes
-- users: every user the structure records, as user id, name, 'a' active or 'f' failed.
-- A user whose token key is gone (its lease lapsed, or it was marked failed) has failed.
open()
local fields = {}
for u = 1, 32 do fields[u] = 'n' .. u end
local names = redis.call('HMGET', M, unpack(fields))
local out = {}
for u = 1, 32 do
  if names[u] then
    local state = 'f'
    if redis.call('EXISTS', token_key(u)) == 1 then state = 'a' end
    out[#out + 1] = {u, names[u], state}
  end
end
return out
