-- flags: allow-oom
-- move_entries: move entries by id, in order, each with its own seq, tail position.
-- ARGV[2..]: ignore_limit ('1'), missing_ok ('1'), lock count n, n lock numbers, then
-- one packed move each: id(12) to(2) from(2, 65535 none) flags(1) [new key(16)]
-- [version(8)] [secondary key]; flags: 1 new key, 2 set version, 4 increment version,
-- 8 set secondary key, 16 remove secondary key.
local done = RETRY and recorded()
if done then return done end
local ignore, missing_ok, nlocks = ARGV[2] == '1', ARGV[3] == '1', tonumber(ARGV[4])
bulk_begin(counters(open('c')))
check_conditions(5, 4 + nlocks, 0, nil, nil)
return bulk_finish(bulk_moves(5 + nlocks, #ARGV, ignore, missing_ok))
