-- snapshot: copy the structure's lists, entries and data on the server, beside it in its
-- slot (keys P .. 'x<id>:'), for a checkpoint to read afterwards without holding anyone
-- up (snapshot_read), then drop (snapshot_drop).  COPY runs in the server's C code: the
-- time the structure is held is the copy, not the reading.
-- ARGV[2]: milliseconds the copy lives unless dropped first (a reader that died).
-- Reply: {id, seq, allocation fields, {per list: entries, controls}}.
local done = recorded()
if done then return done end
local raw_c, lc, es, lk, er, elr, size, maxsize, emcp = open('c', 'lc', 'es', 'lk', 'er',
  'elr', 'size', 'maxsize', 'emcp')
local c = counters(raw_c)
local n = tonumber(lc)
local id = redis.call('HINCRBY', M, 'xn', 1)
local X = P .. 'x' .. id .. ':'
local ttl = ARGV[2]
local fields = {}
for i = 0, n - 1 do fields[i + 1] = 'L' .. i end
local raw = redis.call('HMGET', M, unpack(fields))
local lists = {}
for i = 0, n - 1 do
  local copy = X .. 'l:' .. i
  local count = 0
  if redis.call('COPY', list_key(i), copy) == 1 then
    redis.call('PEXPIRE', copy, ttl)
    count = redis.call('ZCARD', copy)
  end
  lists[i + 1] = {count, raw[i + 1] or NO_CONTROLS}
end
for _, part in ipairs({'e', 'd'}) do
  if redis.call('COPY', P .. part, X .. part) == 1 then redis.call('PEXPIRE', X .. part, ttl) end
end
redis.call('HSET', X .. 'i', 'lc', lc)
redis.call('PEXPIRE', X .. 'i', ttl)
redis.call('SADD', P .. 'xs', id)
return record({id, c[SEQ], {lc, es, lk, er, elr, size, maxsize, emcp}, lists})
