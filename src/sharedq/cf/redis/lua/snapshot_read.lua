-- flags: no-writes
-- snapshot_read: one page of a list of a snapshot, in list order.  Each entry's record
-- and data are the ones a later change kept for the snapshot, else the live ones.
-- ARGV[2..]: snapshot id, list, the member after which to start ('' from the first),
-- page size.  The reply: record, data ('' for none), record...
local X = P .. 'x' .. ARGV[2] .. ':'
if redis.call('EXISTS', X .. 'i') == 0 then
  fail(ERR.STRUCTURE_LOST, 'snapshot ' .. ARGV[2] .. ' of structure ' .. structure_name()
    .. ' is gone (dropped, expired, or the structure was deleted or lost)')
end
local from = '-'
if ARGV[4] ~= '' then from = '(' .. ARGV[4] end
local members = redis.call('ZRANGEBYLEX', X .. 'l:' .. ARGV[3], from, '+', 'LIMIT', 0,
  tonumber(ARGV[5]))
if #members == 0 then return {} end
local ids = {}
for i, member in ipairs(members) do ids[i] = ssub(member, 25, 36) end
-- Records: the one a change kept for the snapshot, else the live one.
local records = redis.call('HMGET', X .. 'e', unpack(ids))
local wanted, at = {}, {}
for i = 1, #ids do
  if not records[i] then
    wanted[#wanted + 1] = ids[i]
    at[#at + 1] = i
  end
end
if #wanted > 0 then
  local found = redis.call('HMGET', E, unpack(wanted))
  for j, i in ipairs(at) do records[i] = found[j] end
end
local reply = {}
local apart, where = {}, {}
for i = 1, #ids do
  local r = records[i]
  if not r then
    fail(ERR.STRUCTURE_LOST, 'snapshot ' .. ARGV[2] .. ' of structure ' .. structure_name()
      .. ' lost entry ' .. hex(ids[i]))
  end
  reply[2 * i - 1], reply[2 * i] = r, ''
  if data_apart(r) then
    apart[#apart + 1], where[#where + 1] = ids[i], 2 * i
  else
    reply[2 * i] = reply_data(r)  -- in the record, or none
  end
end
-- Data kept apart: the copy a change kept for the snapshot, else the live data.
if #apart > 0 then
  local kept = redis.call('HMGET', X .. 'd', unpack(apart))
  local missing, slots = {}, {}
  for j, data in ipairs(kept) do
    if data then
      reply[where[j]] = data
    else
      missing[#missing + 1], slots[#slots + 1] = apart[j], where[j]
    end
  end
  if #missing > 0 then
    local found = redis.call('HMGET', D, unpack(missing))
    for j, data in ipairs(found) do reply[slots[j]] = data or '' end
  end
end
return reply
