-- flags: allow-oom
-- events_nowait: dequeue every event queued for the caller, oldest first.  Each is
-- "monitor,list,state,seq,token"; wake-up markers (mark_failed) are dropped.  Taking
-- them clears the caller's undelivered-nonempty marks, as the memory backend does.
local done = RETRY and recorded()
if done then return done end
open()
return record(take_own_events())
