#!lua flags=no-writes
-- include: common
-- lock_holder: the user id holding a lock-table entry, or nil.
-- ARGV[6]: lock number.
open()
return redis.call('HGET', K, ARGV[6])
