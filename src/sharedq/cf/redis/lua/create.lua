-- create: allocate an empty structure.  The client has validated the parameters and
-- computed the capacity.  ARGV[2..]: field, value, ... of the meta hash, starting with
-- 'inst' and the new structure's random instance id (how a resent create knows that
-- the structure it finds is its own).
if redis.call('EXISTS', M) == 1 then
  if RETRY and redis.call('HGET', M, 'inst') == ARGV[3] then return counts() end
  fail(ERR.STRUCTURE_EXISTS, 'structure ' .. structure_name() .. ' exists already')
end
redis.call('HSET', M, unpack(ARGV, 2))
return counts()
