-- flags: no-writes
-- read: the located entry's record and data (see reply_data), or nil.
-- ARGV[2]: packed locator.
open()
local r = locate_packed(ARGV[2])
if not r then return false end
return {r, reply_data(r)}
