#!lua
-- include: common
-- move: move the located entry to a list, optionally re-keyed and re-versioned.
-- ARGV[6..]: locator kind, locator list ('' none), locator argument, comparison,
-- target list, new key ('' keep), secondary key ('u' keep, '' remove, 's' .. new),
-- version op, position ('h' head), expect_version ('' none), expect_authority,
-- ignore_limit ('1'), lock numbers...
local done = recorded()
if done then return done end
local to = tonumber(ARGV[10])
local v = open('seq', 'l' .. to, 'w' .. to, 'e' .. to)
local r = locate(ARGV[6], tonumber(ARGV[7]), ARGV[8], ARGV[9])
if not r then return false end
local from = rec_list(r)
local f = redis.call('HMGET', M, 'w' .. from, 'e' .. from, 'a' .. from)
check_version(r, ARGV[15])
check_conditions(18, #ARGV, from, ARGV[16], f[3])
if to ~= from then check_limit(to, v[2], ARGV[17] == '1') end
local key = ARGV[11]
if key == '' then key = rec_key(r) end
local skey = ARGV[12]
if skey == 'u' then
  skey = rec_skey(r)
elseif skey == '' then
  skey = false
else
  skey = string.sub(skey, 2)
end
local version = new_version(r, ARGV[13], false)
local seq = tonumber(v[1]) + 1
local moved = moved_rec(r, to, key, ordinal(seq, ARGV[14] == 'h'), version, skey)
unplace(r, num(f[1]) > 0)
redis.call('HSET', E, rec_id(r), moved)
place(moved, num(v[3]) > 0)
if to ~= from then
  local elements = rec_elements(r)
  redis.call('HSET', M, 'seq', seq, 'e' .. from, num(f[2]) - elements,
    'e' .. to, num(v[4]) + elements)
else
  redis.call('HSET', M, 'seq', seq)
end
notify(seq)
return record({seq, moved})
