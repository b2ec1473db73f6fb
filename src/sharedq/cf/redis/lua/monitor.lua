#!lua
-- include: common
-- register_monitor: take an EMC and watch a key range or secondary key of a list.
-- ARGV[6..]: list, low key, high key, secondary key ('' none: the key range),
-- notify_empty ('1'), token.  Reply: monitor id, nonempty now (1/0), seq.
local done = recorded()
if done then return done end
local list = tonumber(ARGV[6])
local v = open('seq', 'nm', 'mm', 'mid', 'w' .. list)
if num(v[2]) >= tonumber(v[3]) then
  fail(EMC_AREA_FULL, 'all ' .. v[3] .. ' EMCs of structure ' .. NAME .. ' are in use')
end
local id = num(v[4]) + 1
local spec = 'r' .. ARGV[7] .. ARGV[8]
if ARGV[9] ~= '' then spec = 's' .. ARGV[9] end
local m = parse_monitor(id, string.char(tonumber(UID), 0, ARGV[10] == '1' and 1 or 0,
  #ARGV[11]) .. ARGV[11] .. spec)
m.nonempty = watched_nonempty(list, m)
redis.call('HSET', P .. 'w:' .. list, id, monitor_raw(m))
redis.call('HSET', P .. 'um:' .. UID, id, list)
local seq = tonumber(v[1]) + 1
redis.call('HSET', M, 'seq', seq, 'nm', num(v[2]) + 1, 'mid', id, 'w' .. list, num(v[5]) + 1)
return record({id, m.nonempty and 1 or 0, seq})
