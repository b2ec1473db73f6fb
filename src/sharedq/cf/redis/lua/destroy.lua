#!lua
-- include: common
-- delete a structure: every key under its hash tag.  Refused while users are
-- connected unless forced; their next requests then find it lost.
-- ARGV[6]: force ('1').
local lists = redis.call('HGET', M, 'lc')
if not lists then
  if RETRY == '1' then return 1 end  -- a resent delete whose first attempt went through
  fail(NO_SUCH_STRUCTURE, "no structure '" .. NAME .. "'")
end
if ARGV[6] ~= '1' then
  local now = now_ms()
  local active = {}
  for u = 1, 32 do
    local user = redis.call('HMGET', M, 'n' .. u, 's' .. u, 'x' .. u)
    if user[1] and user[2] == 'a' and tonumber(user[3]) > now then
      active[#active + 1] = user[1]
    end
  end
  if #active > 0 then
    fail(USER_ACTIVE, 'structure ' .. NAME .. ' has users connected: '
      .. table.concat(active, ', '))
  end
end
local keys = {M, E, S, K}
for n = 0, tonumber(lists) - 1 do
  keys[#keys + 1] = list_key(n)
  keys[#keys + 1] = P .. 'w:' .. n
end
for u = 1, 32 do
  for _, part in ipairs({'um:', 'ud:', 'q:', 'r:'}) do keys[#keys + 1] = P .. part .. u end
end
for first = 1, #keys, 500 do
  redis.call('UNLINK', unpack(keys, first, math.min(first + 499, #keys)))
end
return 1
