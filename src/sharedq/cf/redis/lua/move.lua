-- flags: allow-oom
-- move: move the located entry to a list, optionally re-keyed and re-versioned.
-- ARGV[2]: packed locator.  ARGV[3]: target list(2), then options (see options()).
-- ARGV[4..]: lock numbers.
-- allow-oom (a get is a move, and so are a commit of puts and a backout): the entry's
-- record and list member replace the old ones (a new secondary key may lengthen the
-- record and add one index member, once per entry), and its data in D is never
-- written.  The result kept for a resend replaces the calling thread's previous one
-- (see kept_field in common.lua) and names data kept apart rather than copy it (kind
-- 'a'); a snapshot being read keeps the old record, once per entry (keep_old).
local done = RETRY and recorded()
if done then return done end
local spec = ARGV[3]
local to = from_be2(spec, 1)
local o = options(spec, 3)
local at = locator_list(ARGV[2])
local raw_c, raw_to, raw_at
if at and at ~= to then
  raw_c, raw_to, raw_at = open('c', lfield(to), lfield(at))  -- one read serves both lists
else
  raw_c, raw_to = open('c', lfield(to))
end
local c, target = counters(raw_c), controls(raw_to)
local r, id, member = locate_packed(ARGV[2])
if not r then return false end
local from = rec_list(r)
local source = target
if from ~= to then
  if at then source = controls(raw_at) else source = list_controls(from) end
end
check_version(r, o.expect_version)
check_conditions(4, #ARGV, from, o.expect_authority, source[LIST_AUTHORITY])
if to ~= from then check_limit(to, target, o.ignore_limit) end
local skey = o.skey  -- nil: the entry's own
if skey == nil then skey = true end
local version  -- nil: the entry's own
if o.version ~= '' then version = new_version(r, o.version, false) end
local seq = c[SEQ] + 1
local key, ord = o.key or rec_key(r), ordinal(seq, o.head)
local moved = moved_rec(r, to, key, ord, version, skey, id)
if cow ~= false then keep_old(r, false) end
unplace(r, source[LIST_MONITORS] > 0, member or rec_member(r, id))
redis.call('HSET', E, id, moved)
place(moved, target[LIST_MONITORS] > 0, key .. ord .. id)
local elements, al, sl = sbyte(r, 47, 49)
local data = false  -- reply_data(r): moved keeps what r kept
if elements == 0 then
  data = ''
elseif #r < 50 + al + sl then
  data = redis.call('HGET', D, id)
end
c[SEQ] = seq
if to ~= from then
  source[LIST_ELEMENTS] = source[LIST_ELEMENTS] - elements
  target[LIST_ELEMENTS] = target[LIST_ELEMENTS] + elements
  redis.call('HSET', M, 'c', packed_counters(c), lfield(from), packed_controls(source),
    lfield(to), packed_controls(target), kept_move(seq, moved, data))
else
  redis.call('HSET', M, 'c', packed_counters(c), kept_move(seq, moved, data))
end
if #touched > 0 then notify(seq) end
-- The source list's entry count too (a retried request's kept reply has three items).
REPLY4[1], REPLY4[2], REPLY4[3] = seq, moved, data
REPLY4[4] = redis.call('ZCARD', list_key(from))
return REPLY4
