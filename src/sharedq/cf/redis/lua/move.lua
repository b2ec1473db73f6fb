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
-- (A get is on the path of every message: what a helper would do is written out where
-- the helper's call would cost more than its lines.)
local done = RETRY and recorded()
if done then return done end
local spec = ARGV[3]
local t1, t2 = sbyte(spec, 1, 2)
local to = t1 * 256 + t2
local o = options(spec, 3)
local a = ARGV[2]
local _, a1, a2 = sbyte(a, 1, 3)  -- locator_list(a)
local at = a1 * 256 + a2
if at == 65535 then at = nil end
local to_field, at_field = LFIELDS[to] or lfield(to), nil
local raw_c, raw_to, raw_at
if at and at ~= to then
  at_field = LFIELDS[at] or lfield(at)
  raw_c, raw_to, raw_at = open('c', to_field, at_field)  -- one read serves both lists
else
  raw_c, raw_to = open('c', to_field)
end
local c, target = counters(raw_c), controls(raw_to)
local r, id, member = locate_packed(a)
if not r then return false end
local from = at or rec_list(r)  -- a located entry is on the locator's list
local source = target
if from ~= to then
  if at then source = controls(raw_at) else source = list_controls(from) end
end
if o.expect_version then check_version(r, o.expect_version) end
local expect = o.expect_authority
if #ARGV >= 4 or (expect and expect ~= source[LIST_AUTHORITY]) then
  check_conditions(4, #ARGV, from, expect, source[LIST_AUTHORITY])
end
if to ~= from and target[LIST_LIMIT] ~= 0 and not o.ignore_limit then
  check_limit(to, target, false)
end
local skey = o.skey  -- nil: the entry's own
if skey == nil then skey = true end
local version  -- nil: the entry's own
if o.version ~= '' then version = new_version(r, o.version, false) end
local seq = c[SEQ] + 1
local key, ord = o.key or ssub(r, 15, 30), nil  -- rec_key(r)
if o.head then ord = ordinal(seq, true) else ord = spack('>BI7', 128, seq) end
local moved
if skey == true then  -- moved_rec's lines for it
  local b = BE2[to] or be2(to)
  if version then
    moved = id .. b .. key .. ord .. version .. ssub(r, 47)
  else
    moved = id .. b .. key .. ord .. ssub(r, 39)
  end
else
  moved = moved_rec(r, to, key, ord, version, skey, id)
end
if cow ~= false then keep_old(r, false) end
local elements, al, sl = sbyte(r, 47, 49)
member = member or ssub(r, 15, 38) .. id  -- rec_member(r, id)
local watched_from, watched_to = source[LIST_MONITORS] > 0, target[LIST_MONITORS] > 0
if sl == 0 and not watched_from then  -- unplace(r, false, member)
  redis.call('ZREM', LIST_KEYS[from] or list_key(from), member)
else
  unplace(r, watched_from, member)
end
redis.call('HSET', E, id, moved)
if sl == 0 and skey == true and not watched_to then  -- place(moved, false, ...)
  redis.call('ZADD', LIST_KEYS[to] or list_key(to), '0', key .. ord .. id)
else
  place(moved, watched_to, key .. ord .. id)
end
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
  redis.call('HSET', M, 'c', packed_counters(c), at_field or lfield(from),
    packed_controls(source), to_field, packed_controls(target), kept_move(seq, moved, data))
else
  redis.call('HSET', M, 'c', packed_counters(c), kept_move(seq, moved, data))
end
if #touched > 0 then notify(seq) end
-- The source list's entry count too (a retried request's kept reply has three items).
REPLY4[1], REPLY4[2], REPLY4[3] = seq, moved, data
REPLY4[4] = redis.call('ZCARD', LIST_KEYS[from] or list_key(from))
return REPLY4
