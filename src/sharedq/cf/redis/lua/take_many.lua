-- flags: allow-oom
-- take_many: up to count takes of a list's head (take.lua without events or monitor):
-- each qualifying head moved to a list and, if asked, deleted there at once, in list
-- order, until count are done or the head does not qualify (api.py, take_many).
-- ARGV[2]: packed locator (a head).  ARGV[3]: target list(2), flags(1): 1 delete,
-- 8 expect authority; count(2); then the authority(8) if flag 8.
-- Reply: {seq, record, data, delete seq (0: none), ...} per entry taken, then (when
-- any was) the entries left on the head's list.
-- allow-oom: moves (gets) and deletes, as move.lua and delete.lua.
local done = recorded()
if done then return done end
local spec = ARGV[3]
local to = from_be2(spec, 1)
local flags = string.byte(spec, 3)
local count = from_be2(spec, 4)
local delete = bit.band(flags, 1) ~= 0
local expect_authority
if bit.band(flags, 8) ~= 0 then expect_authority = from_be(string.sub(spec, 6, 13)) end
local from = locator_list(ARGV[2])
local raw_c, raw_to, raw_from
if from ~= to then
  raw_c, raw_to, raw_from = open('c', 'L' .. to, 'L' .. from)
else
  raw_c, raw_to = open('c', 'L' .. to)
end
local c, target = counters(raw_c), controls(raw_to)
local source = target
if from ~= to then source = controls(raw_from) end
local r = locate_packed(ARGV[2])
if not r then return record({}) end
check_conditions(1, 0, from, expect_authority, source[LIST_AUTHORITY])
if to ~= from then check_limit(to, target, false) end
-- Checked: from here on nothing fails.
local limit = limit_of(target)
local on_target = 0
if limit and not delete and to ~= from then on_target = redis.call('ZCARD', list_key(to)) end
local reply = {}
local n = 0
while r do
  local seq, moved, data, deleted = take_entry(r, to, delete, c, source, target)
  reply[#reply + 1], reply[#reply + 2], reply[#reply + 3], reply[#reply + 4] =
    seq, moved, data, deleted
  if not delete then on_target = on_target + 1 end
  n = n + 1
  if n >= count then break end
  if limit and to ~= from and not delete and on_target >= limit then break end
  r = locate_packed(ARGV[2])
end
if to ~= from then
  redis.call('HSET', M, 'c', packed_counters(c), 'L' .. from, packed_controls(source),
    'L' .. to, packed_controls(target))
else
  redis.call('HSET', M, 'c', packed_counters(c), 'L' .. from, packed_controls(source))
end
-- Then the entries left on the head's list (each entry's count follows from it).
reply[#reply + 1] = redis.call('ZCARD', list_key(from))
return record(reply)
