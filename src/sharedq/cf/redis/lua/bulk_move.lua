-- flags: allow-oom
-- move_entries: move entries by id, in order, each with its own seq, tail position.
-- ARGV[2..]: ignore_limit ('1'), missing_ok ('1'), lock count n, n lock numbers, then
-- one packed move each: id(12) to(2) from(2, 65535 none) flags(1) [new key(16)]
-- [version(8)] [secondary key]; flags: 1 new key, 2 set version, 4 increment version,
-- 8 set secondary key, 16 remove secondary key.
local done = recorded()
if done then return done end
local ignore, missing_ok, nlocks = ARGV[2] == '1', ARGV[3] == '1', tonumber(ARGV[4])
bulk_begin(counters(open('c')))
check_conditions(5, 4 + nlocks, 0, nil, nil)
-- The records in one HMGET; an entry whose lists are both unwatched has its list
-- members, index members and record changed in one command each at the end (or
-- before an entry named again, whose earlier move must be in place first), the others
-- as they come (their monitors are told of each change on the state it leaves).
local first = 5 + nlocks
local ids = {}
for i = first, #ARGV do ids[#ids + 1] = ssub(ARGV[i], 1, 12) end
local records = records_of(ids, 1, #ids)
local current = {}  -- id -> its record as this request left it
-- list -> its entries now, once read for a limit check (one ZCARD per list, not per
-- entry), kept exact as entries come and go; pend: list -> entries added (or, below
-- zero, removed) by changes not yet sent.
local counts, pend = {}, {}
local rem, add, srem, sadd, hset = {}, {}, {}, {}, {}
local function flush()
  for key, members in pairs(rem) do call_many('ZREM', key, members, 1) end
  call_many('ZREM', S, srem, 1)
  call_many('HSET', E, hset, 2)
  for key, members in pairs(add) do call_many('ZADD', key, members, 2) end
  call_many('ZADD', S, sadd, 2)
  rem, add, srem, sadd, hset, pend = {}, {}, {}, {}, {}, {}
end
local function finish(err)
  flush()
  return bulk_finish(err)
end
for i = first, #ARGV do
  local a = ARGV[i]
  local id, to, from = ids[i - first + 1], from_be2(a, 13), from_be2(a, 15)
  local flags, at = sbyte(a, 17), 18
  local r = current[id]
  if r then
    flush()
  else
    r = records[i - first + 1]
  end
  if not r then
    if not missing_ok then
      return finish(err_text(NO_SUCH_ENTRY, 'no entry ' .. hex(id)))
    end
    bulk.missing[#bulk.missing + 1] = id
  else
    local cur = rec_list(r)
    if from ~= 65535 and cur ~= from then
      return finish(err_text(LIST_MISMATCH, 'entry ' .. hex(id)
        .. ' is on list ' .. cur .. ', not ' .. from))
    end
    local source, target = bulk_list(cur), bulk_list(to)
    local limit = limit_of(target)
    if to ~= cur and not ignore and limit then
      local n = counts[to]
      if not n then n = redis.call('ZCARD', list_key(to)) + (pend[to] or 0) end
      if n >= limit then
        return finish(err_text(LIST_FULL, 'list ' .. to .. ' is at its limit of '
          .. int(limit) .. ' entries'))
      end
      counts[to] = n
    end
    local key = rec_key(r)
    if band(flags, 1) ~= 0 then
      key = ssub(a, at, at + 15)
      at = at + 16
    end
    local op = ''
    if band(flags, 2) ~= 0 then
      op = 's' .. ssub(a, at, at + 7)
      at = at + 8
    elseif band(flags, 4) ~= 0 then
      op = 'i'
    end
    local skey = rec_skey(r)
    if band(flags, 8) ~= 0 then
      skey = ssub(a, at)
    elseif band(flags, 16) ~= 0 then
      skey = false
    end
    local seq = bulk.c[SEQ] + 1
    bulk.c[SEQ] = seq
    local moved = moved_rec(r, to, key, ordinal(seq, false), new_version(r, op, true), skey)
    keep_old(r, false)
    if source[LIST_MONITORS] > 0 or target[LIST_MONITORS] > 0 then
      unplace(r, source[LIST_MONITORS] > 0)
      redis.call('HSET', E, id, moved)
      place(moved, target[LIST_MONITORS] > 0)
    else
      local member, old_skey = rec_member(r), rec_skey(r)
      bulk_push(rem, list_key(cur), member)
      if old_skey then srem[#srem + 1] = skey_prefix(cur, old_skey) .. member end
      hset[#hset + 1], hset[#hset + 2] = id, moved
      local moved_member = rec_member(moved)
      bulk_push(add, list_key(to), '0', moved_member)
      if skey then
        sadd[#sadd + 1], sadd[#sadd + 2] = '0', skey_prefix(to, skey) .. moved_member
      end
      if to ~= cur then
        pend[to], pend[cur] = (pend[to] or 0) + 1, (pend[cur] or 0) - 1
      end
    end
    current[id] = moved
    if to ~= cur then
      if counts[to] then counts[to] = counts[to] + 1 end
      if counts[cur] then counts[cur] = counts[cur] - 1 end
    end
    local elements = rec_elements(r)
    source[LIST_ELEMENTS] = source[LIST_ELEMENTS] - elements
    target[LIST_ELEMENTS] = target[LIST_ELEMENTS] + elements
    notify(seq)
    bulk.seqs[#bulk.seqs + 1] = seq
  end
  bulk.processed = bulk.processed + 1
end
return finish()
