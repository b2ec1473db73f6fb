-- flags: allow-oom
-- take_many: up to count takes of a list's head (take.lua without events or monitor):
-- each qualifying head moved to a list and, if asked, deleted there at once, in list
-- order, until count are done or the head does not qualify (api.py, take_many).
-- ARGV[2]: packed locator (a head).  ARGV[3]: target list(2), flags(1): 1 delete,
-- 8 expect authority; count(2); then the authority(8) if flag 8.
-- Reply: {seq, record, data, delete seq (0: none), ...} per entry taken, then (when
-- any was) the entries left on the head's list.
-- allow-oom: moves (gets) and deletes, as move.lua and delete.lua.
local done = RETRY and recorded()
if done then return done end
local spec = ARGV[3]
local to = from_be2(spec, 1)
local flags = sbyte(spec, 3)
local count = from_be2(spec, 4)
local delete = band(flags, 1) ~= 0
local expect_authority
if band(flags, 8) ~= 0 then expect_authority = from_be(ssub(spec, 6, 13)) end
local from = locator_list(ARGV[2])
local raw_c, raw_to, raw_from
if from ~= to then
  raw_c, raw_to, raw_from = open('c', lfield(to), lfield(from))
else
  raw_c, raw_to = open('c', lfield(to))
end
local c, target = counters(raw_c), controls(raw_to)
local source = target
if from ~= to then source = controls(raw_from) end
local r, rid, member = locate_packed(ARGV[2])
if not r then return record({}) end
check_conditions(1, 0, from, expect_authority, source[LIST_AUTHORITY])
local on_target  -- the target's entries, when its limit check read them
if to ~= from then on_target = check_limit(to, target, false) end
-- Checked: from here on nothing fails.
local limit = limit_of(target)
if not (limit and not delete and to ~= from) then on_target = 0 end
local reply = {}
local n = 0
-- The result kept for a resend (takes_result in common.lua), parts joined at the end:
-- [1] its head, then per take the record's length and the record.  copies: the data
-- kept apart of takes that deleted it, which the result must then hold (each in a
-- field of its own: see takes_result).
local parts, k, copies = {''}, 1, {}
-- To another list, the heads to come are the list's next members, in order (taking
-- one moves no other): read up to count of them in one ZRANGE and their records in
-- one HMGET, not a ZRANGE and an HGET per entry.  Each must qualify as its head would
-- (locate's comparison); the first that does not ends the takes, as its locate would.
-- To the same list a taken entry may come back before the next head: located anew.
local records, heads
if to ~= from and count > 1 and ssub(ARGV[2], 1, 1) == 'h' then
  local arg, how = ssub(ARGV[2], 5), ssub(ARGV[2], 4, 4)
  local members = redis.call('ZRANGE', list_key(from), '1', int(count - 1))
  local ids = {}
  for _, m in ipairs(members) do
    if arg ~= '' then
      local k = cmp(ssub(m, 1, 16), arg)
      if (how == '<' and k > 0) or (how == '=' and k ~= 0) or (how == '>' and k < 0) then
        break
      end
    end
    ids[#ids + 1] = ssub(m, 25, 36)
  end
  records, heads = records_of(ids, 1, #ids), 0
end
-- Neither list watched (no monitor to tell of each change on the state it leaves): the
-- entries' list members, index members and records change in one command each, after
-- the loop, rather than three per entry; nothing in between reads them (the records
-- to come were read above).  take_entry's changes exactly, without its notify (no-op).
local batch = records and source[LIST_MONITORS] == 0 and target[LIST_MONITORS] == 0
local rem, add, srem, sadd, hset, hdel = {}, {}, {}, {}, {}, {}
local function take_batched(r)
  local seq = c[SEQ] + 1
  -- moved_rec, rec_member and reply_data's work with each part of r read once.
  local id, key, ord = ssub(r, 1, 12), ssub(r, 15, 30), ordinal(seq, false)
  local elements, al, sl = sbyte(r, 47, 49)
  local skey
  if sl > 0 then skey = ssub(r, 50 + al, 49 + al + sl) end
  local moved = id .. be2(to) .. key .. ord .. ssub(r, 39)  -- moved keeps what r kept
  local data = false
  if elements == 0 then
    data = ''
  elseif #r < 50 + al + sl then
    data = redis.call('HGET', D, id)
  end
  local member = ssub(r, 15, 38) .. id
  source[LIST_ELEMENTS] = source[LIST_ELEMENTS] - elements
  rem[#rem + 1] = member
  if skey then srem[#srem + 1] = skey_prefix(from, skey) .. member end
  if not delete then
    if cow ~= false then keep_old(r, false) end
    local moved_member = key .. ord .. id
    add[#add + 1], add[#add + 2] = '0', moved_member
    if skey then sadd[#sadd + 1], sadd[#sadd + 2] = '0', skey_prefix(to, skey) .. moved_member end
    hset[#hset + 1], hset[#hset + 2] = id, moved
    target[LIST_ELEMENTS] = target[LIST_ELEMENTS] + elements
    c[SEQ] = seq
    return seq, moved, data, 0
  end
  if cow ~= false then keep_old(r, true) end
  hdel[#hdel + 1] = id
  if elements > 0 and #r < 50 + al + sl then redis.call('HDEL', D, id) end  -- drop_data
  c[SEQ], c[ENTRIES], c[ELEMENTS] = seq + 1, c[ENTRIES] - 1, c[ELEMENTS] - elements
  return seq, moved, data, seq + 1
end
while r do
  local seq, moved, data, deleted
  if batch then
    seq, moved, data, deleted = take_batched(r)
  else
    seq, moved, data, deleted = take_entry(r, to, delete, c, source, target, rid, member)
  end
  reply[#reply + 1], reply[#reply + 2], reply[#reply + 3], reply[#reply + 4] =
    seq, moved, data, deleted
  parts[k + 1], parts[k + 2] = be2(#moved), moved
  k = k + 2
  if delete and data and data ~= '' then copies[#copies + 1] = data end
  if not delete then on_target = on_target + 1 end
  n = n + 1
  if n >= count then break end
  if limit and to ~= from and not delete and on_target >= limit then break end
  if heads then
    heads = heads + 1
    r, rid, member = records[heads] or nil, nil, nil
  else
    r, rid, member = locate_packed(ARGV[2])
  end
end
if batch then
  call_many('ZREM', list_key(from), rem, 1)
  call_many('ZREM', S, srem, 1)
  call_many('HSET', E, hset, 2)
  call_many('HDEL', E, hdel, 1)
  call_many('ZADD', list_key(to), add, 2)
  call_many('ZADD', S, sadd, 2)
end
-- Then the entries left on the head's list (each entry's count follows from it).
local left = redis.call('ZCARD', list_key(from))
reply[#reply + 1] = left
local function kept_takes()
  if REQ == '' then return end
  local field = kept_field()
  if #copies > 0 then
    local fields = {}
    for j, data in ipairs(copies) do
      fields[2 * j - 1], fields[2 * j] = field .. 'd' .. lnum(j), data
    end
    call_many('HSET', M, fields, 2)
  end
  parts[1] = REQ .. 't' .. be(reply[1], 8) .. (delete and '\1' or '\0') .. be(left, 8)
  return field, table.concat(parts)
end
if to ~= from then
  redis.call('HSET', M, 'c', packed_counters(c), lfield(from), packed_controls(source),
    lfield(to), packed_controls(target), kept_takes())
else
  redis.call('HSET', M, 'c', packed_counters(c), lfield(from), packed_controls(source),
    kept_takes())
end
return reply
