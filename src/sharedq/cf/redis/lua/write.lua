#!lua
-- include: common
-- write: create an entry at its key position.
-- ARGV[6..]: list, key, data, adjunct, secondary key ('' none), entry id ('' generate),
-- version (8 bytes), position ('h' head, else tail), expect_authority ('' none),
-- ignore_limit ('1'), elements, lock numbers...
local done = recorded()
if done then return done end
local list, key, data, adjunct, skey, id = tonumber(ARGV[6]), ARGV[7], ARGV[8], ARGV[9],
  ARGV[10], ARGV[11]
local elements = tonumber(ARGV[16])
local v = open('seq', 'ne', 'nel', 'me', 'mel', 'l' .. list, 'w' .. list, 'e' .. list,
  'a' .. list)
if id ~= '' and redis.call('HEXISTS', E, id) == 1 then
  fail(ENTRY_EXISTS, 'entry id ' .. hex(id) .. ' is in use')
end
check_conditions(17, #ARGV, list, ARGV[14], v[9])
check_limit(list, v[6], ARGV[15] == '1')
local entries, in_use = num(v[2]), num(v[3])
if entries >= tonumber(v[4]) then
  fail(STRUCTURE_FULL, 'structure ' .. NAME .. ' has all ' .. v[4] .. ' entries in use')
end
if in_use + elements > tonumber(v[5]) then
  fail(STRUCTURE_FULL, 'structure ' .. NAME .. ' has ' .. in_use .. ' of ' .. v[5]
    .. ' elements in use; ' .. elements .. ' more do not fit')
end
local seq = tonumber(v[1]) + 1
if id == '' then
  id = be(seq, 12)
  if redis.call('HEXISTS', E, id) == 1 then
    fail(ENTRY_EXISTS, 'entry id ' .. hex(id) .. ' is in use')
  end
end
local r = make_rec(id, list, key, ordinal(seq, ARGV[13] == 'h'), ARGV[12], elements, adjunct,
  skey, data)
redis.call('HSET', E, id, r)
redis.call('HSET', M, 'seq', seq, 'ne', entries + 1, 'nel', in_use + elements,
  'e' .. list, num(v[8]) + elements)
place(r, num(v[7]) > 0)
notify(seq)
return record(seq)
