-- flags: allow-oom
-- take: a consumer's round trip (api.py, ListStructure.take).  In order: the caller's
-- events taken (events.lua), then the located entry moved to a list (move.lua, without
-- options) and, if asked, deleted there at once (delete.lua by id): two changes,
-- consecutive seqs; or, when the locator finds nothing, a monitor registered
-- (monitor.lua).  Everything is checked before the first write.
-- ARGV[2]: packed locator.  ARGV[3]: target list(2), flags(1): 1 delete, 2 take events,
-- 4 register a monitor if nothing is found, 8 expect authority (its value(8) follows).
-- ARGV[4..9] with flag 4: the monitor's list, low key, high key, secondary key ('':
-- the key range), notify_empty ('1'), token (as monitor.lua's ARGV[2..7]).
-- Reply: {events, seq, record, data, delete seq, monitor id, nonempty, monitor seq,
-- entries left on the list the entry was taken from}: seq
-- 0 when nothing was moved, delete seq 0 when nothing was deleted, monitor id 0 when
-- none was registered.
-- allow-oom: a move (a get), a delete, an EMC and events taken, as their own files are.
local done = RETRY and recorded()
if done then return done end
-- The spec read in one C call, its flags' meanings from option_flags' table (a C call
-- each is some 500 instructions, a take's whole parsing once some 4,000).
local spec = ARGV[3]
local to, flags, expect_authority
if #spec >= 11 then
  to, flags, expect_authority = sunpack('>I2BI8', spec)
else
  to, flags = sunpack('>I2B', spec)
end
local f = option_flags(flags)
if not f[4] then expect_authority = nil end
local delete = f[1]
local at = locator_list(ARGV[2])
local raw_c, raw_to, raw_at
if at and at ~= to then
  raw_c, raw_to, raw_at = open('c', lfield(to), lfield(at))
else
  raw_c, raw_to = open('c', lfield(to))
end
local c, target = counters(raw_c), controls(raw_to)
local r, rid, member = locate_packed(ARGV[2])
local from, source
local watch = f[3] and not r
if r then
  from = rec_list(r)
  source = target
  if from ~= to then
    if at then source = controls(raw_at) else source = list_controls(from) end
  end
  check_conditions(1, 0, from, expect_authority, source[LIST_AUTHORITY])
  if to ~= from then check_limit(to, target, false) end
elseif watch and c[EMCS] >= c[MAX_EMCS] then
  fail(ERR.EMC_AREA_FULL, 'all ' .. int(c[MAX_EMCS]) .. ' EMCs of structure ' .. structure_name()
    .. ' are in use')
end
-- Checked: from here on nothing fails.
local events = NO_EVENTS
if f[2] then events = take_own_events() end
if watch then
  local list = tonumber(ARGV[4])
  local mid = redis.call('HGET', M, 'mid')
  local l = list_controls(list)
  local id = num(mid) + 1
  local sid = tostring(id)  -- printed once, not for each command that names it
  local mspec = 'r' .. ARGV[5] .. ARGV[6]
  if ARGV[7] ~= '' then mspec = 's' .. ARGV[7] end
  local m = parse_monitor(id, schar(tonumber(UID), 0, ARGV[8] == '1' and 1 or 0,
    #ARGV[9]) .. ARGV[9] .. mspec, sid)
  m.nonempty = watched_nonempty(list, m)
  redis.call('HSET', NAMES[-1 - list] or named(-1 - list), sid, monitor_raw(m))
  redis.call('HSET', P .. 'um:' .. UID, sid, lnum(list))
  c[SEQ], c[EMCS] = c[SEQ] + 1, c[EMCS] + 1
  l[LIST_MONITORS], l[LIST_BYTES] = l[LIST_MONITORS] + 1, nil  -- see packed_controls
  local reply = {events, 0, '', '', 0, id, m.nonempty and 1 or 0, c[SEQ], 0}
  if REQ == '' then
    redis.call('HSET', M, 'c', packed_counters(c), 'mid', sid, lfield(list), packed_controls(l))
  else
    redis.call('HSET', M, 'c', packed_counters(c), 'mid', sid, lfield(list), packed_controls(l),
      kept('m', cmsgpack.pack(reply)))
  end
  return reply
end
if not r then
  -- A take that changed nothing (no entry, no event, no monitor) keeps no result: a
  -- resend finds none for its request and runs again, as if the first had not run.
  if events == NO_EVENTS then return {events, 0, '', '', 0, 0, 0, 0, 0} end
  return record({events, 0, '', '', 0, 0, 0, 0, 0})
end
-- The entries left on the list it leaves: counted before when that is another list,
-- so that a monitor there sees it empty without a command of its own.
local left
if to ~= from then
  left = redis.call('ZCARD', list_key(from)) - 1
  if left == 0 then emptied = from end
end
local seq, moved, data, deleted = take_entry(r, to, delete, c, source, target, rid, member)
if not left then left = redis.call('ZCARD', list_key(from)) end
local reply = {events, seq, moved, data, deleted, 0, 0, 0, left}
-- The result kept for a resend goes in the HSET of the counters (one command, not two).
local f1, v1, f2
if REQ ~= '' then
  if (not data or data == '') and events == NO_EVENTS then
    -- Kind 'T' (see recorded): its figures packed in one call, not the reply in
    -- MessagePack (some 6,000 instructions for a 100-byte message's record).
    f1, v1 = kept('T', spack('>I8BI8', seq, deleted ~= 0 and 1 or 0, reply[9]) .. moved)
  elseif not data or data == '' then
    f1, v1 = kept('m', cmsgpack.pack(reply))
  elseif delete then
    -- Its data is gone with the entry: copied for a resend, beside the result rather
    -- than packed in it (MessagePack cost some 25 instructions a byte).
    reply[4] = 0
    f1, v1 = kept('k', cmsgpack.pack(reply))
    f2 = f1 .. 'd'
    reply[4] = data
  else
    -- Data kept apart that stays there is named rather than copied (see named_data).
    reply[4] = true
    f1, v1 = kept('k', cmsgpack.pack(reply))
    reply[4] = data
  end
end
-- Each table made at its size (growing one rehashes it, some 3,000 instructions).
local hset, n
if to ~= from then
  hset = {'c', packed_counters(c), lfield(from), packed_controls(source), lfield(to),
    packed_controls(target), f1, v1, f2, data}
  n = 6
elseif delete then
  hset = {'c', packed_counters(c), lfield(from), packed_controls(source), f1, v1, f2, data}
  n = 4
else
  hset = {'c', packed_counters(c), f1, v1, f2, data}
  n = 2
end
if f1 then n = n + (f2 and 4 or 2) end
redis.call('HSET', M, unpack(hset, 1, n))
return reply
