-- flags: no-writes
-- list_info: a list's entry count, elements, limit (nil: none) and authority.
-- ARGV[2]: list.
local list = ARGV[2]
local l = controls(open(lfield(list)))
return {redis.call('ZCARD', list_key(list)), l[LIST_ELEMENTS], limit_of(l) or false,
  l[LIST_AUTHORITY]}
