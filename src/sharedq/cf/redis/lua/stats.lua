-- flags: no-writes
-- statistics: maximum and in-use counts and the last seq.
open()
return counts()
