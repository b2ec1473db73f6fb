-- flags: allow-oom
-- Renew the caller's lease while its connection is live; 0 once it is not (a lapsed
-- lease is never renewed: that user has failed).
-- ARGV[2]: lease in milliseconds.
local key = token_key(UID)
if redis.call('GET', key) ~= TOKEN then return 0 end
redis.call('PEXPIRE', key, ARGV[2])
return 1
