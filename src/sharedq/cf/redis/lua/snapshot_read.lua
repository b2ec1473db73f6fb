-- flags: no-writes
-- snapshot_read: one page of a list of a snapshot, in list order.  Each entry's record
-- and data are the ones a later change kept for the snapshot, else the live ones.
-- ARGV[2..]: snapshot id, list, the member after which to start ('' from the first),
-- page size.  The reply: record, data ('' for none), record...
local X = P .. 'x' .. ARGV[2] .. ':'
if redis.call('EXISTS', X .. 'i') == 0 then
  fail(STRUCTURE_LOST, 'snapshot ' .. ARGV[2] .. ' of structure ' .. structure_name()
    .. ' is gone (dropped, expired, or the structure was deleted or lost)')
end
local from = '-'
if ARGV[4] ~= '' then from = '(' .. ARGV[4] end
local members = redis.call('ZRANGEBYLEX', X .. 'l:' .. ARGV[3], from, '+', 'LIMIT', 0,
  tonumber(ARGV[5]))
if #members == 0 then return {} end
local ids = {}
for i, member in ipairs(members) do ids[i] = string.sub(member, 25, 36) end
local records = redis.call('HMGET', X .. 'e', unpack(ids))
local data = redis.call('HMGET', X .. 'd', unpack(ids))
-- What no change kept comes from the structure itself.
for _, pair in ipairs({{records, E}, {data, D}}) do
  local kept, live = pair[1], pair[2]
  local wanted, at = {}, {}
  for i = 1, #ids do
    if not kept[i] then
      wanted[#wanted + 1] = ids[i]
      at[#at + 1] = i
    end
  end
  if #wanted > 0 then
    local found = redis.call('HMGET', live, unpack(wanted))
    for j, i in ipairs(at) do kept[i] = found[j] end
  end
end
local reply = {}
for i = 1, #ids do
  if not records[i] then
    fail(STRUCTURE_LOST, 'snapshot ' .. ARGV[2] .. ' of structure ' .. structure_name()
      .. ' lost entry ' .. hex(ids[i]))
  end
  reply[2 * i - 1], reply[2 * i] = records[i], data[i] or ''
end
return reply
