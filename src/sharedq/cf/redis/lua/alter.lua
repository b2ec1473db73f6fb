-- flags: allow-oom
-- alter: a new size and/or EMC share, within the maximum size and above what is in use.
-- ARGV[2..]: size ('' keep), emc_percent ('' keep).  Reply: as statistics.
local done = RETRY and recorded()
if done then return done end

-- a // b for non-negative integers below 2^53, exact where float division rounds.
local function idiv(a, b)
  local q = math.floor(a / b)
  while q * b > a do q = q - 1 end
  while (q + 1) * b <= a do q = q + 1 end
  return q
end

local raw_c, size, max_size, emcp, er, elr, es = open_fields('c', 'size', 'maxsize', 'emcp', 'er',
  'elr', 'es')
local c = counters(raw_c)
size, emcp = tonumber(size), tonumber(emcp)
if ARGV[2] ~= '' then size = tonumber(ARGV[2]) end
if ARGV[3] ~= '' then emcp = tonumber(ARGV[3]) end
if size > tonumber(max_size) then
  fail(ERR.ALTER_REJECTED, 'size ' .. int(size) .. ' exceeds the maximum ' .. max_size)
end
if emcp < 0 or emcp > 50 then
  fail(ERR.BAD_STRUCTURE_PARAMS, 'emc_percent ' .. int(emcp) .. ' must be 0..50')
end
-- capacity_of() in params.py, in integers.
local emc_bytes = idiv(size * emcp, 100)
er, elr = tonumber(er), tonumber(elr)
local units = idiv(size - emc_bytes, er * 256 + elr * tonumber(es))
local me, mel, mm = units * er, units * elr, idiv(emc_bytes, 64)
if me < 1 then
  fail(ERR.BAD_STRUCTURE_PARAMS, 'size ' .. int(size)
    .. ' bytes is too small to hold a single list entry')
end
if me < c[ENTRIES] or mel < c[ELEMENTS] or mm < c[EMCS] then
  fail(ERR.ALTER_REJECTED, 'altered capacity (' .. int(me) .. ' entries, ' .. int(mel)
    .. ' elements, ' .. int(mm) .. ' EMCs) is below what is in use (' .. int(c[ENTRIES])
    .. ' entries, ' .. int(c[ELEMENTS]) .. ' elements, ' .. int(c[EMCS]) .. ' EMCs)')
end
c[SEQ], c[MAX_ENTRIES], c[MAX_ELEMENTS], c[MAX_EMCS] = c[SEQ] + 1, me, mel, mm
redis.call('HSET', M, 'size', size, 'emcp', emcp, 'c', packed_counters(c))
return record(counts())
