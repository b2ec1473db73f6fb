-- Releasing a user: its monitors (and EMCs, counted in c), events, locks, kept results
-- and user id.  The caller writes c back.
local function release_user(uid, c)
  local mine = redis.call('HGETALL', P .. 'um:' .. uid)
  local per_list = {}
  for i = 1, #mine, 2 do
    redis.call('HDEL', P .. 'w:' .. mine[i + 1], mine[i])
    per_list[mine[i + 1]] = (per_list[mine[i + 1]] or 0) + 1
  end
  for list, count in pairs(per_list) do
    local l = list_controls(list)
    l[LIST_MONITORS], l[LIST_BYTES] = l[LIST_MONITORS] - count, nil  -- see packed_controls
    redis.call('HSET', M, lfield(list), packed_controls(l))
  end
  c[EMCS] = c[EMCS] - #mine / 2
  redis.call('DEL', P .. 'um:' .. uid, P .. 'ud:' .. uid, P .. 'q:' .. uid)
  forget_results(uid)
  local locks = redis.call('HGETALL', K)
  for i = 1, #locks, 2 do
    if locks[i + 1] == uid then redis.call('HDEL', K, locks[i]) end
  end
  redis.call('DEL', token_key(uid))
  redis.call('HDEL', M, 'n' .. uid)
  redis.call('HINCRBY', M, 'nu', -1)
end
