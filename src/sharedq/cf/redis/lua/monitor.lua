-- flags: allow-oom
-- register_monitor: take an EMC and watch a key range or secondary key of a list.
-- ARGV[2..]: list, low key, high key, secondary key ('' none: the key range),
-- notify_empty ('1'), token.  Reply: monitor id, nonempty now (1/0), seq.
local done = RETRY and recorded()
if done then return done end
local list = tonumber(ARGV[2])
local raw_c, mid, raw_l = open('c', 'mid', lfield(list))
local c, l = counters(raw_c), controls(raw_l)
if c[EMCS] >= c[MAX_EMCS] then
  fail(ERR.EMC_AREA_FULL, 'all ' .. int(c[MAX_EMCS]) .. ' EMCs of structure ' .. structure_name()
    .. ' are in use')
end
local id = num(mid) + 1
local spec = 'r' .. ARGV[3] .. ARGV[4]
if ARGV[5] ~= '' then spec = 's' .. ARGV[5] end
local m = parse_monitor(id, schar(tonumber(UID), 0, ARGV[6] == '1' and 1 or 0,
  #ARGV[7]) .. ARGV[7] .. spec)
m.nonempty = watched_nonempty(list, m)
redis.call('HSET', P .. 'w:' .. list, id, monitor_raw(m))
redis.call('HSET', P .. 'um:' .. UID, id, list)
c[SEQ], c[EMCS] = c[SEQ] + 1, c[EMCS] + 1
l[LIST_MONITORS], l[LIST_BYTES] = l[LIST_MONITORS] + 1, nil  -- see packed_controls
redis.call('HSET', M, 'c', packed_counters(c), 'mid', id, lfield(list), packed_controls(l))
return record({id, m.nonempty and 1 or 0, c[SEQ]})
