#!lua flags=no-writes
-- include: common
-- list_info: a list's entry count, elements, limit (nil: none) and authority.
-- ARGV[6]: list.
local list = ARGV[6]
local v = open('e' .. list, 'l' .. list, 'a' .. list)
return {redis.call('ZCARD', list_key(list)), num(v[1]), v[2], num(v[3])}
