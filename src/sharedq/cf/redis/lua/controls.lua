-- flags: allow-oom
-- set_list_controls: a list's limit and/or authority.
-- ARGV[2..]: list, limit ('u' keep, '' none, else the limit), increment_authority
-- ('1'), expect_authority ('' none), lock numbers...
local done = RETRY and recorded()
if done then return done end
local list = ARGV[2]
local raw_c, raw_l = open('c', lfield(list))
local c, l = counters(raw_c), controls(raw_l)
check_conditions(6, #ARGV, list, tonumber(ARGV[5]), l[LIST_AUTHORITY])
c[SEQ] = c[SEQ] + 1
if ARGV[3] == '' then
  l[LIST_LIMIT] = 0
elseif ARGV[3] ~= 'u' then
  l[LIST_LIMIT] = tonumber(ARGV[3]) + 1
end
if ARGV[4] == '1' then l[LIST_AUTHORITY] = l[LIST_AUTHORITY] + 1 end
l[LIST_BYTES] = nil  -- its limit or authority changed (see packed_controls)
redis.call('HSET', M, 'c', packed_counters(c), lfield(list), packed_controls(l),
  kept_seq(c[SEQ]))
return c[SEQ]
