#!lua flags=no-writes
-- include: common, counts
-- statistics: maximum and in-use counts and the last seq.
open()
return counts()
