-- flags: allow-oom
-- move_and_delete_entries: bulk_move's moves, then bulk_delete's deletes, in one
-- request (a unit of work's commit of puts and gets); one count, seqs and missing ids
-- over both, in that order.  The deletes run only when every move was handled.
-- ARGV[2..]: ignore_limit ('1'), missing_ok ('1'), lock count n, n lock numbers, move
-- count m, m packed moves (as bulk_move.lua), then entry ids.
local done = RETRY and recorded()
if done then return done end
local ignore, missing_ok, nlocks = ARGV[2] == '1', ARGV[3] == '1', tonumber(ARGV[4])
bulk_begin(counters(open('c')))
check_conditions(5, 4 + nlocks, 0, nil, nil)
local first = 6 + nlocks
local last = first + tonumber(ARGV[5 + nlocks]) - 1
local err = bulk_moves(first, last, ignore, missing_ok)
if not err then err = bulk_deletes(last + 1, #ARGV, missing_ok) end
return bulk_finish(err)
