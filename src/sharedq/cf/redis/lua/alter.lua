#!lua
-- include: common, counts
-- alter: a new size and/or EMC share, within the maximum size and above what is in use.
-- ARGV[6..]: size ('' keep), emc_percent ('' keep).  Reply: as statistics.
local done = recorded()
if done then return done end
local v = open('seq', 'size', 'maxsize', 'emcp', 'er', 'elr', 'es', 'ne', 'nel', 'nm')
local size, emcp = tonumber(v[2]), tonumber(v[4])
if ARGV[6] ~= '' then size = tonumber(ARGV[6]) end
if ARGV[7] ~= '' then emcp = tonumber(ARGV[7]) end
if size > tonumber(v[3]) then
  fail(ALTER_REJECTED, 'size ' .. int(size) .. ' exceeds the maximum ' .. v[3])
end
if emcp < 0 or emcp > 50 then
  fail(BAD_STRUCTURE_PARAMS, 'emc_percent ' .. int(emcp) .. ' must be 0..50')
end
-- capacity_of() in params.py, in integers.
local emc_bytes = idiv(size * emcp, 100)
local er, elr = tonumber(v[5]), tonumber(v[6])
local units = idiv(size - emc_bytes, er * 256 + elr * tonumber(v[7]))
local me, mel, mm = units * er, units * elr, idiv(emc_bytes, 64)
if me < 1 then
  fail(BAD_STRUCTURE_PARAMS, 'size ' .. int(size) .. ' bytes is too small to hold a single list entry')
end
if me < num(v[8]) or mel < num(v[9]) or mm < num(v[10]) then
  fail(ALTER_REJECTED, 'altered capacity (' .. int(me) .. ' entries, ' .. int(mel)
    .. ' elements, ' .. int(mm) .. ' EMCs) is below what is in use (' .. num(v[8])
    .. ' entries, ' .. num(v[9]) .. ' elements, ' .. num(v[10]) .. ' EMCs)')
end
redis.call('HSET', M, 'size', size, 'emcp', emcp, 'me', me, 'mel', mel, 'mm', mm,
  'seq', tonumber(v[1]) + 1)
return record(counts())
