#!lua
-- include: common
-- connect: attach a user by name.  A failed user of that name (or one whose lease
-- lapsed) is reattached with its id, monitors, events and locks; otherwise the lowest
-- free id is taken.  Idempotent: resent after a lost reply, it finds its own token.
-- ARGV[6..]: user name, 8 random bytes for the token, lease in milliseconds.
-- Reply: user id, token, list count, element size, lock count.
local name, lease = ARGV[6], tonumber(ARGV[8])
local meta = redis.call('HMGET', M, 'inst', 'seq', 'lc', 'es', 'lk')
if not meta[1] then fail(NO_SUCH_STRUCTURE, 'no structure ' .. NAME) end
local token = meta[1] .. ARGV[7]
local now = now_ms()
local fields = {}
for u = 1, 32 do fields[u] = 'n' .. u end
local names = redis.call('HMGET', M, unpack(fields))
local uid
for u = 1, 32 do
  if names[u] == name then
    local state = redis.call('HMGET', M, 's' .. u, 't' .. u, 'x' .. u)
    if state[1] == 'a' and tonumber(state[3]) > now then
      if state[2] ~= token then
        fail(USER_ACTIVE, 'user ' .. name .. ' is already connected to ' .. NAME)
      end
      return {u, token, meta[3], meta[4], meta[5]}
    end
    uid = u
    redis.call('DEL', P .. 'r:' .. u)
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
  if not uid then fail(TOO_MANY_USERS, 'structure ' .. NAME .. ' has 32 users already') end
  redis.call('HSET', M, 'n' .. uid, name)
  redis.call('HINCRBY', M, 'nu', 1)
end
redis.call('HSET', M, 's' .. uid, 'a', 't' .. uid, token, 'x' .. uid, now + lease,
  'seq', tonumber(meta[2]) + 1)
return {uid, token, meta[3], meta[4], meta[5]}
