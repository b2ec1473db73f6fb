#!lua flags=no-writes
-- include: common
-- read: the located entry's record, or nil.
-- ARGV[6..]: locator kind, locator list ('' none), locator argument, comparison.
open()
return locate(ARGV[6], tonumber(ARGV[7]), ARGV[8], ARGV[9]) or false
