-- flags: no-writes
-- read: the located entry's record, or nil.
-- ARGV[2]: packed locator.
open()
return locate_packed(ARGV[2]) or false
