-- The figures of StructureStats that change: size, max size, EMC share, max and in-use
-- entries, elements and EMCs, users, seq (codec.stats_of decodes them in this order).
local function counts()
  local v = redis.call('HMGET', M, 'size', 'maxsize', 'emcp', 'c', 'nu')
  local c = counters(v[4])
  return {v[1], v[2], v[3], c[MAX_ENTRIES], c[ENTRIES], c[MAX_ELEMENTS], c[ELEMENTS],
    c[MAX_EMCS], c[EMCS], v[5], c[SEQ]}
end
