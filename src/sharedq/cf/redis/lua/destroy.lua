-- flags: allow-oom
-- delete a structure: every key under its hash tag.  Refused while users are
-- connected unless forced; their next requests then find it lost.
-- ARGV[2]: force ('1').
local lists = redis.call('HGET', M, 'lc')
if not lists then
  if RETRY then return 1 end  -- a resent delete whose first attempt went through
  fail(ERR.NO_SUCH_STRUCTURE, "no structure '" .. structure_name() .. "'")
end
if ARGV[2] ~= '1' then
  local active = {}
  for u = 1, 32 do
    local name = redis.call('HGET', M, 'n' .. u)
    if name and redis.call('EXISTS', token_key(u)) == 1 then active[#active + 1] = name end
  end
  if #active > 0 then
    fail(ERR.USER_ACTIVE, 'structure ' .. structure_name() .. ' has users connected: '
      .. table.concat(active, ', '))
  end
end
local keys = {M, E, D, S, K}
for n = 0, tonumber(lists) - 1 do
  keys[#keys + 1] = list_key(n)
  keys[#keys + 1] = P .. 'w:' .. n
end
for u = 1, 32 do
  for _, part in ipairs({'um:', 'ud:', 'q:', 't:'}) do keys[#keys + 1] = P .. part .. u end
end
-- Snapshots taken and not dropped yet (see snapshot.lua).
for _, id in ipairs(redis.call('SMEMBERS', P .. 'xs')) do
  local X = P .. 'x' .. id .. ':'
  keys[#keys + 1], keys[#keys + 2], keys[#keys + 3] = X .. 'i', X .. 'e', X .. 'd'
  for n = 0, tonumber(lists) - 1 do keys[#keys + 1] = X .. 'l:' .. n end
end
keys[#keys + 1] = P .. 'xs'
for first = 1, #keys, 500 do
  redis.call('UNLINK', unpack(keys, first, math.min(first + 499, #keys)))
end
return 1
