-- flags: no-writes
-- scan: one page of a list's entries with keys in [low, high], in list order.
-- ARGV[2..]: list, low key, high key, the member after which to start ('' from low),
-- page size, with_data ('1').  The reply: record, data ('' without data), record...
-- The client pages on from the last record's member.
open()
local from = '[' .. ARGV[3]
if ARGV[5] ~= '' then from = '(' .. ARGV[5] end
local members = redis.call('ZRANGEBYLEX', list_key(ARGV[2]), from, '[' .. ARGV[4] .. FF20,
  'LIMIT', 0, tonumber(ARGV[6]))
if #members == 0 then return {} end
local ids = {}
for i, member in ipairs(members) do ids[i] = ssub(member, 25, 36) end
local records = redis.call('HMGET', E, unpack(ids))
local reply = {}
local apart, at = {}, {}
for i, r in ipairs(records) do
  reply[2 * i - 1], reply[2 * i] = r, ''
  if ARGV[7] == '1' then
    if data_apart(r) then
      apart[#apart + 1], at[#at + 1] = ids[i], 2 * i
    else
      reply[2 * i] = reply_data(r)
    end
  end
end
if #apart > 0 then
  for j, data in ipairs(redis.call('HMGET', D, unpack(apart))) do reply[at[j]] = data end
end
return reply
