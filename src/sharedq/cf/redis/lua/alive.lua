-- flags: no-writes
-- Whether the caller's connection can still make requests: 1 or 0.
if redis.call('GET', token_key(UID)) == TOKEN then return 1 end
return 0
