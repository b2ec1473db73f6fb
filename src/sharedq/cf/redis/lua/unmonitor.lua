-- flags: allow-oom
-- stop_monitor: free the EMC and drop the monitor's undelivered events.
-- ARGV[2]: monitor id.
local done = RETRY and recorded()
if done then return done end
local id = ARGV[2]
local c = counters(open('c'))
local list = redis.call('HGET', P .. 'um:' .. UID, id)
if not list then
  fail(ERR.NO_SUCH_MONITOR, 'user ' .. UID .. ' has no monitor ' .. id)
end
redis.call('HDEL', P .. 'w:' .. list, id)
redis.call('HDEL', P .. 'um:' .. UID, id)
redis.call('SREM', P .. 'ud:' .. UID, id)
local queue = P .. 'q:' .. UID
local prefix = id .. ','
for _, item in ipairs(redis.call('XRANGE', queue, '-', '+')) do
  if item[2][1] == 'e' and ssub(item[2][2], 1, #prefix) == prefix then
    redis.call('XDEL', queue, item[1])
  end
end
local l = list_controls(list)
c[SEQ], c[EMCS] = c[SEQ] + 1, c[EMCS] - 1
l[LIST_MONITORS], l[LIST_BYTES] = l[LIST_MONITORS] - 1, nil  -- see packed_controls
redis.call('HSET', M, 'c', packed_counters(c), lfield(list), packed_controls(l),
  kept_seq(c[SEQ]))
return c[SEQ]
