-- snapshot: the structure as it is now, for a checkpoint to read afterwards without
-- holding anyone up (snapshot_read), then drop (snapshot_drop).  Only the lists' sorted
-- sets are copied (COPY, in the server's C code, into keys beside the structure in its
-- slot: P .. 'x<id>:'); entry records and data are kept for the snapshot by the
-- requests that change them later (copy on write, keep_old in common.lua).  The time
-- the structure is held is this function's run.
-- ARGV[2]: milliseconds the snapshot lives unless dropped first (a reader that died).
-- Reply: {id, seq, allocation fields, {per list: entries, controls}}.
local done = RETRY and recorded()
if done then return done end
local raw_c, lc, es, lk, er, elr, size, maxsize, emcp = open_fields('c', 'lc', 'es', 'lk', 'er',
  'elr', 'size', 'maxsize', 'emcp')
local c = counters(raw_c)
local n = tonumber(lc)
local id = redis.call('HINCRBY', M, 'xn', 1)
local X = P .. 'x' .. id .. ':'
local ttl = tonumber(ARGV[2])
local now = redis.call('TIME')
local expires = int(tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + ttl)
local fields = {}
for i = 0, n - 1 do fields[i + 1] = 'L' .. i end
local raw = redis.call('HMGET', M, unpack(fields))
local lists = {}
for i = 0, n - 1 do
  local copy = X .. 'l:' .. i
  local count = 0
  if redis.call('COPY', list_key(i), copy) == 1 then
    redis.call('PEXPIREAT', copy, expires)
    count = redis.call('ZCARD', copy)
  end
  lists[i + 1] = {count, raw[i + 1] or NO_CONTROLS}
end
redis.call('HSET', X .. 'i', 'lc', lc, 'until', expires)
redis.call('PEXPIREAT', X .. 'i', expires)
redis.call('SADD', P .. 'xs', id)
redis.call('HSET', M, 'xa', '1')  -- changes keep old records from now on
return record({id, c[SEQ], {lc, es, lk, er, elr, size, maxsize, emcp}, lists})
