-- flags: allow-oom
-- events_nowait: dequeue every event queued for the caller, oldest first.  Each is
-- "monitor,list,state,seq,token"; wake-up markers (mark_failed) are dropped.  Taking
-- them clears the caller's undelivered-nonempty marks, as the memory backend does.
local done = RETRY and recorded()
if done then return done end
open()
local queue = P .. 'q:' .. UID
local items = redis.call('XRANGE', queue, '-', '+')
local events = {}
for _, item in ipairs(items) do
  if item[2][1] == 'e' then events[#events + 1] = item[2][2] end
end
if #items > 0 then redis.call('DEL', queue) end
redis.call('DEL', P .. 'ud:' .. UID)
return record(events)
