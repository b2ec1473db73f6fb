-- connect: attach a user by name.  A failed user of that name (or one whose lease
-- lapsed) is reattached with its id, monitors, events and locks; otherwise the lowest
-- free id is taken.  Idempotent: resent after a lost reply, it finds its own token.
-- ARGV[2..]: user name, 8 random bytes for the token, lease in milliseconds, the
-- storage format the client keeps structures in ('fmt' in the meta hash).
-- Reply: user id, token, list count, element size, lock count.
local name, lease = ARGV[2], tonumber(ARGV[4])
local meta = redis.call('HMGET', M, 'inst', 'c', 'lc', 'es', 'lk', 'fmt')
if not meta[1] then fail(ERR.NO_SUCH_STRUCTURE, "no structure '" .. structure_name() .. "'") end
if meta[6] ~= ARGV[5] then
  fail(ERR.SERVER_UNSUITABLE, 'structure ' .. structure_name() .. ' is kept in format '
    .. (meta[6] or '1') .. ', not ' .. ARGV[5] .. ': it was made by another sharedq version; '
    .. 'delete it and create it again (the recovery log rebuilds its contents)')
end
local token = meta[1] .. ARGV[3]
local fields = {}
for u = 1, 32 do fields[u] = 'n' .. u end
local names = redis.call('HMGET', M, unpack(fields))
local uid
for u = 1, 32 do
  if names[u] == name then
    local current = redis.call('GET', token_key(u))
    if current then
      if current ~= token then
        fail(ERR.USER_ACTIVE, 'user ' .. name .. ' is already connected to '
          .. structure_name())
      end
      return {u, token, meta[3], meta[4], meta[5]}
    end
    uid = u
    forget_results(u)
    break
  end
end
if not uid then
  for u = 1, 32 do
    if not names[u] then
      uid = u
      break
    end
  end
  if not uid then
    fail(ERR.TOO_MANY_USERS, 'structure ' .. structure_name() .. ' has 32 users already')
  end
  redis.call('HSET', M, 'n' .. uid, name)
  redis.call('HINCRBY', M, 'nu', 1)
end
local c = counters(meta[2])
c[SEQ] = c[SEQ] + 1
redis.call('SET', token_key(uid), token, 'PX', lease)
redis.call('HSET', M, 'c', packed_counters(c))
return {uid, token, meta[3], meta[4], meta[5]}
