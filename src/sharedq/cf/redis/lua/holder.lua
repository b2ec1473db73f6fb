-- flags: no-writes
-- lock_holder: the user id holding a lock-table entry, or nil.
-- ARGV[2]: lock number.
open()
return redis.call('HGET', K, ARGV[2])
