-- The figures of StructureStats that change: size, max size, EMC share, max and in-use
-- entries, elements and EMCs, users, seq (connection.py decodes them in this order).
local function counts()
  return redis.call('HMGET', M, 'size', 'maxsize', 'emcp', 'me', 'ne', 'mel', 'nel', 'mm',
    'nm', 'nu', 'seq')
end
