-- flags: allow-oom
-- delete_entries: delete entries by id, in order, each with its own seq.
-- ARGV[2..]: missing_ok ('1'), lock count n, n lock numbers, entry ids...
local done = RETRY and recorded()
if done then return done end
local missing_ok, nlocks = ARGV[2] == '1', tonumber(ARGV[3])
bulk_begin(counters(open('c')))
check_conditions(4, 3 + nlocks, 0, nil, nil)
return bulk_finish(bulk_deletes(4 + nlocks, #ARGV, missing_ok))
