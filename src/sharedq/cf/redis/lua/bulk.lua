-- What bulk moves and deletes share: counters kept while entries change, the moves and
-- deletes themselves (bulk_move, bulk_delete and bulk_commit run them), and the reply.
-- A bulk request stops at an entry it cannot handle, keeping the ones before it done;
-- the reply says how far it got: {processed, {seqs}, {missing ids}, error or false}.

local bulk

local function bulk_begin(c)
  bulk = {c = c, seqs = {}, missing = {}, processed = 0, lists = {}}
end

-- A list's controls, read once per request and written back by bulk_finish.
local function bulk_list(n)
  local l = bulk.lists[n]
  if not l then
    l = list_controls(n)
    bulk.lists[n] = l
  end
  return l
end

-- Append a (and b) to the array t[key], made on first use: commands grouped per key.
local function bulk_push(t, key, a, b)
  local l = t[key]
  if not l then
    l = {}
    t[key] = l
  end
  l[#l + 1] = a
  if b then l[#l + 1] = b end
end

local function bulk_finish(err)
  if #bulk.seqs > 0 then
    local fields = {'c', packed_counters(bulk.c)}
    for n, l in pairs(bulk.lists) do
      fields[#fields + 1] = lfield(n)
      fields[#fields + 1] = packed_controls(l)
    end
    redis.call('HSET', M, unpack(fields))
  end
  return record({bulk.processed, bulk.seqs, bulk.missing, err or false})
end

-- Move the entries of ARGV[first..last], packed moves, in order, each with its own seq,
-- tail position (move_entries; the packing in bulk_move.lua).  Returns the error text
-- that stopped the moves, or nil, with every change made sent to Redis.
local function bulk_moves(first, last, ignore, missing_ok)
  -- The records in one HMGET; an entry whose lists are both unwatched has its list
  -- members, index members and record changed in one command each at the end (or
  -- before an entry named again, whose earlier move must be in place first), the others
  -- as they come (their monitors are told of each change on the state it leaves).
  local ids = {}
  for i = first, last do ids[#ids + 1] = ssub(ARGV[i], 1, 12) end
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
    return err
  end
  for i = first, last do
    local a = ARGV[i]
    local id = ids[i - first + 1]
    local t1, t2, f1, f2, flags = sbyte(a, 13, 17)
    local to, from, at = t1 * 256 + t2, f1 * 256 + f2, 18
    local r = current[id]
    if r then
      flush()
    else
      r = records[i - first + 1]
    end
    if not r then
      if not missing_ok then
        return finish(err_text(ERR.NO_SUCH_ENTRY, 'no entry ' .. hex(id)))
      end
      bulk.missing[#bulk.missing + 1] = id
    else
      local c1, c2 = sbyte(r, 13, 14)
      local cur = c1 * 256 + c2
      if from ~= 65535 and cur ~= from then
        return finish(err_text(ERR.LIST_MISMATCH, 'entry ' .. hex(id)
          .. ' is on list ' .. cur .. ', not ' .. from))
      end
      local source, target = bulk.lists[cur] or bulk_list(cur), bulk.lists[to] or bulk_list(to)
      local limit = limit_of(target)
      if to ~= cur and not ignore and limit then
        local n = counts[to]
        if not n then n = redis.call('ZCARD', list_key(to)) + (pend[to] or 0) end
        if n >= limit then
          return finish(err_text(ERR.LIST_FULL, 'list ' .. to .. ' is at its limit of '
            .. int(limit) .. ' entries'))
        end
        counts[to] = n
      end
      -- Each part of r read once; skey_arg, version: moved_rec's (true, nil: r's own).
      local elements, al, sl = sbyte(r, 47, 49)
      local old_skey
      if sl > 0 then old_skey = ssub(r, 50 + al, 49 + al + sl) end
      local key, version, skey, skey_arg = nil, nil, old_skey, true
      if flags ~= 0 then
        local f = option_flags(flags)  -- f[1]: flag 1, f[2]: 2, f[3]: 4, f[4]: 8, f[5]: 16
        if f[1] then
          key = ssub(a, at, at + 15)
          at = at + 16
        end
        if f[2] then
          version = ssub(a, at, at + 7)  -- new_version(r, it)
          at = at + 8
        elseif f[3] then
          version = new_version(r, 'i', true)
        end
        if f[4] then
          skey = ssub(a, at)
          skey_arg = skey
        elseif f[5] then
          skey, skey_arg = false, false
        end
      end
      key = key or ssub(r, 15, 30)
      local seq = bulk.c[SEQ] + 1
      bulk.c[SEQ] = seq
      local ord = ordinal(seq, false)
      local moved = moved_rec(r, to, key, ord, version, skey_arg, id)
      if cow ~= false then keep_old(r, false) end
      local member, moved_member = ssub(r, 15, 38) .. id, key .. ord .. id
      if source[LIST_MONITORS] > 0 or target[LIST_MONITORS] > 0 then
        unplace(r, source[LIST_MONITORS] > 0, member)
        redis.call('HSET', E, id, moved)
        place(moved, target[LIST_MONITORS] > 0, moved_member)
      else
        bulk_push(rem, list_key(cur), member)
        if old_skey then srem[#srem + 1] = skey_prefix(cur, old_skey) .. member end
        hset[#hset + 1], hset[#hset + 2] = id, moved
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
      source[LIST_ELEMENTS] = source[LIST_ELEMENTS] - elements
      target[LIST_ELEMENTS] = target[LIST_ELEMENTS] + elements
      if #touched > 0 then notify(seq) end
      bulk.seqs[#bulk.seqs + 1] = seq
    end
    bulk.processed = bulk.processed + 1
  end
  return finish()
end

-- Delete the entries ARGV[first..last] by id, in order, each with its own seq
-- (delete_entries).  Returns the error text that stopped the deletes, or nil, with
-- every change made sent to Redis.
local function bulk_deletes(first, last, missing_ok)
  -- The records in one HMGET; an entry on a watched list is deleted as it comes (its
  -- monitors are told of each change on the state it leaves), the others' list members
  -- and records in one command each at the end, since nothing in between reads them.
  -- An id deleted before in this request is missing from then on, as a second HGET
  -- would find it.
  local c = bulk.c
  local records = records_of(ARGV, first, last)
  local gone, rem, srem, hdel = {}, {}, {}, {}
  local function flush(err)
    for key, members in pairs(rem) do call_many('ZREM', key, members, 1) end
    call_many('ZREM', S, srem, 1)
    call_many('HDEL', E, hdel, 1)
    return err
  end
  for i = first, last do
    local id = ARGV[i]
    local r = records[i - first + 1]
    if not r or gone[id] then
      if not missing_ok then
        return flush(err_text(ERR.NO_SUCH_ENTRY, 'no entry ' .. hex(id)))
      end
      bulk.missing[#bulk.missing + 1] = id
    else
      gone[id] = true
      local n1, n2 = sbyte(r, 13, 14)
      local n = n1 * 256 + n2
      local list = bulk.lists[n] or bulk_list(n)
      if cow ~= false then keep_old(r, true) end
      local member = ssub(r, 15, 38) .. id
      local size, al, sl = sbyte(r, 47, 49)
      if list[LIST_MONITORS] > 0 then
        unplace(r, true, member)
        redis.call('HDEL', E, id)
      else
        bulk_push(rem, list_key(n), member)
        if sl > 0 then
          srem[#srem + 1] = skey_prefix(n, ssub(r, 50 + al, 49 + al + sl)) .. member
        end
        hdel[#hdel + 1] = id
      end
      if size > 0 and #r < 50 + al + sl then redis.call('HDEL', D, id) end  -- drop_data
      list[LIST_ELEMENTS] = list[LIST_ELEMENTS] - size
      c[SEQ], c[ENTRIES], c[ELEMENTS] = c[SEQ] + 1, c[ENTRIES] - 1, c[ELEMENTS] - size
      if #touched > 0 then notify(c[SEQ]) end
      bulk.seqs[#bulk.seqs + 1] = c[SEQ]
    end
    bulk.processed = bulk.processed + 1
  end
  return flush()
end
