-- Releasing a user: its monitors (and EMCs), events, locks, kept results and user id.
local function release_user(uid)
  local mine = redis.call('HGETALL', P .. 'um:' .. uid)
  for i = 1, #mine, 2 do
    redis.call('HDEL', P .. 'w:' .. mine[i + 1], mine[i])
    redis.call('HINCRBY', M, 'w' .. mine[i + 1], -1)
  end
  if #mine > 0 then redis.call('HINCRBY', M, 'nm', -#mine / 2) end
  redis.call('DEL', P .. 'um:' .. uid, P .. 'ud:' .. uid, P .. 'q:' .. uid, P .. 'r:' .. uid)
  local locks = redis.call('HGETALL', K)
  for i = 1, #locks, 2 do
    if locks[i + 1] == uid then redis.call('HDEL', K, locks[i]) end
  end
  redis.call('HDEL', M, 'n' .. uid, 's' .. uid, 't' .. uid, 'x' .. uid)
  redis.call('HINCRBY', M, 'nu', -1)
end
