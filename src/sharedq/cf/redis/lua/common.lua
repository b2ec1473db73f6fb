-- The prelude every request script starts with (scripts.py puts it after the shebang).
--
-- One structure lives under one hash tag, so one script sees and changes all of it
-- atomically; KEYS[1] is the structure's meta hash and every other key is derived from
-- it (same slot, so Redis Cluster routes the call by KEYS[1] alone).  Every script
-- checks everything before its first write, because Redis does not roll a script back.
--
-- ARGV[1..5] of every script: user id, connection token, request channel, request id
-- ('' for requests that change nothing), retry flag ('1' when the client resends a
-- request whose reply it lost).  Request arguments start at ARGV[6].
--
-- Strings are binary throughout.  Keys are never compared with Lua's < (it uses
-- strcoll): ordering is Redis's lexicographic sorted-set order, or cmp() below.

local M = KEYS[1]
local P = string.sub(M, 1, -2)
local NAME = string.match(M, '{(.-)}')
local E = P .. 'e'           -- entry id -> entry record
local S = P .. 's'           -- secondary-key index: list(2) len(1) skey member(36)
local K = P .. 'k'           -- lock table: lock number -> holder's user id
local UID = ARGV[1]
local TOKEN = ARGV[2]
local CHAN = ARGV[3]
local REQ = ARGV[4]
local RETRY = ARGV[5]

local FF20 = string.rep('\255', 20)
local FF36 = string.rep('\255', 36)
local LOWEST = string.rep('\0', 16)
local HIGHEST = string.rep('\255', 16)

local NO_SUCH_ENTRY, ENTRY_EXISTS, NO_SUCH_STRUCTURE = 1020, 1021, 1022
local STRUCTURE_EXISTS, NO_SUCH_MONITOR = 1023, 1024
local NOT_CONNECTED, TOO_MANY_USERS, USER_ACTIVE = 1030, 1031, 1032
local NO_SUCH_USER, USER_NOT_FAILED = 1033, 1034
local STRUCTURE_FULL, LIST_FULL, EMC_AREA_FULL, ALTER_REJECTED = 1040, 1041, 1042, 1043
local VERSION_MISMATCH, AUTHORITY_MISMATCH, LOCK_HELD = 1050, 1051, 1052
local LOCK_NOT_HELD, LIST_MISMATCH = 1053, 1054
local BAD_ARGUMENT, BAD_STRUCTURE_PARAMS = 1008, 1010
local STRUCTURE_LOST = 1060

local function int(n)
  return string.format('%d', n)
end

-- An error reply the client maps to the same exception as the memory backend raises:
-- "SQ<code> <name=value,...|-> <detail>".  Values are integers, or 'x' and hex digits.
local function err_text(code, detail, ctx)
  return 'SQ' .. code .. ' ' .. (ctx or '-') .. ' ' .. detail
end

local function fail(code, detail, ctx)
  error({err = err_text(code, detail, ctx)})
end

local function hex(s)
  return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end))
end

-- n (an integer below 2^53) as width big-endian bytes.
local function be(n, width)
  local out = {}
  for i = width, 1, -1 do
    out[i] = n % 256
    n = (n - out[i]) / 256
  end
  return string.char(unpack(out))
end

local function from_be(s)
  local n = 0
  for i = 1, #s do
    n = n * 256 + string.byte(s, i)
  end
  return n
end

-- -1, 0 or 1 as a is below, equal to or above b, bytewise (equal lengths).
local function cmp(a, b)
  if a == b then return 0 end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      if x < y then return -1 end
      return 1
    end
  end
  return 0
end

-- The place among equal keys, from the change's seq: 2^63 + seq at the tail of a
-- sublist, 2^63 - seq at its head, 8 bytes big-endian (as the memory backend orders).
local function ordinal(seq, head)
  if not head then return '\128' .. be(seq, 7) end
  local low = {string.byte(be(seq - 1, 7), 1, 7)}
  for i = 1, 7 do low[i] = 255 - low[i] end
  return '\127' .. string.char(unpack(low))
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Entry records: id(12) list(2) key(16) ordinal(8) version(8) elements(1)
-- adjunct length(1) secondary key length(1, 0 = none), adjunct, secondary key, data.
local function rec_id(r) return string.sub(r, 1, 12) end
local function rec_list(r)
  local a, b = string.byte(r, 13, 14)
  return a * 256 + b
end
local function rec_key(r) return string.sub(r, 15, 30) end
local function rec_version(r) return string.sub(r, 39, 46) end
local function rec_elements(r) return string.byte(r, 47) end
local function rec_skey(r)
  local al, sl = string.byte(r, 48, 49)
  if sl == 0 then return nil end
  return string.sub(r, 50 + al, 49 + al + sl)
end
-- A list's sorted-set member: key, ordinal, id; so that members sort as the list does.
local function rec_member(r) return string.sub(r, 15, 38) .. string.sub(r, 1, 12) end

local function make_rec(id, list, key, ord, version, elements, adjunct, skey, data)
  return id .. be(list, 2) .. key .. ord .. version
    .. string.char(elements, #adjunct, #skey) .. adjunct .. skey .. data
end

-- The record with a new list, key, ordinal, version and secondary key (false: none).
local function moved_rec(r, list, key, ord, version, skey)
  local al, sl = string.byte(r, 48, 49)
  local sk = skey or ''
  return string.sub(r, 1, 12) .. be(list, 2) .. key .. ord .. version
    .. string.char(string.byte(r, 47), al, #sk) .. string.sub(r, 50, 49 + al) .. sk
    .. string.sub(r, 50 + al + sl)
end

local function list_key(n) return P .. 'l:' .. n end
local function skey_prefix(list, skey) return be(list, 2) .. string.char(#skey) .. skey end

-- Versions are 8 bytes big-endian; Lua numbers cannot hold all of them.
local function version_plus_one(v, id)
  local b = {string.byte(v, 1, 8)}
  local i = 8
  while i > 0 and b[i] == 255 do
    b[i] = 0
    i = i - 1
  end
  if i == 0 then fail(BAD_ARGUMENT, 'entry ' .. hex(id) .. ' version cannot increase') end
  b[i] = b[i] + 1
  return string.char(unpack(b))
end

-- A version op: '' keeps it, 'i' increments it, 's' .. 8 bytes sets it.
local function new_version(r, op, saturate)
  if op == '' then return rec_version(r) end
  if op == 'i' then
    if saturate and rec_version(r) == string.rep('\255', 8) then return rec_version(r) end
    return version_plus_one(rec_version(r), rec_id(r))
  end
  return string.sub(op, 2)
end

-- -- results kept for a resent request -----------------------------------------------

local function recorded()
  if RETRY == '' or REQ == '' then return nil end
  local prev = redis.call('HGET', P .. 'r:' .. UID, CHAN)
  if prev and string.sub(prev, 1, #REQ + 1) == REQ .. ':' then
    return cmsgpack.unpack(string.sub(prev, #REQ + 2))
  end
  return nil
end

-- Keep the result of a change under the request's channel (one per client thread), so
-- that a client resending the request after a lost reply gets it instead of a second
-- change.  The hash is bounded: a user with too many channels starts it afresh.
local function record(result)
  if REQ ~= '' then
    local key = P .. 'r:' .. UID
    if redis.call('HSET', key, CHAN, REQ .. ':' .. cmsgpack.pack(result)) == 1
      and redis.call('HLEN', key) > 256 then
      redis.call('DEL', key)
      redis.call('HSET', key, CHAN, REQ .. ':' .. cmsgpack.pack(result))
    end
  end
  return result
end

-- -- the caller --------------------------------------------------------------------

local function not_live()
  local inst = redis.call('HGET', M, 'inst')
  if not inst or inst ~= string.sub(TOKEN, 1, 8) then
    fail(STRUCTURE_LOST, 'structure ' .. NAME .. ' was deleted or lost')
  end
  fail(NOT_CONNECTED, 'user ' .. UID .. ' is not connected to structure ' .. NAME)
end

-- Check that the caller's connection is live (its token is current and its lease has
-- not lapsed) and return the meta fields asked for, from index 1.
local function open(...)
  local v = redis.call('HMGET', M, 't' .. UID, 'x' .. UID, ...)
  if v[1] ~= TOKEN or tonumber(v[2]) <= now_ms() then not_live() end
  table.remove(v, 1)
  table.remove(v, 1)
  return v
end

local function num(x) return tonumber(x) or 0 end

-- a // b for non-negative integers below 2^53, exact where float division rounds.
local function idiv(a, b)
  local q = math.floor(a / b)
  while q * b > a do q = q - 1 end
  while (q + 1) * b <= a do q = q + 1 end
  return q
end

-- Lock-table conditions (ARGV[first_lock..last_lock]), then the authority condition,
-- in the memory backend's order.
local function check_conditions(first_lock, last_lock, list, expect_authority, authority)
  if first_lock <= last_lock then
    local holders = redis.call('HMGET', K, unpack(ARGV, first_lock, last_lock))
    for _, holder in ipairs(holders) do
      if holder and holder ~= UID then
        fail(LOCK_HELD, 'lock is held by user ' .. holder, 'holder=' .. holder)
      end
    end
  end
  if expect_authority ~= '' and num(authority) ~= tonumber(expect_authority) then
    fail(AUTHORITY_MISMATCH, 'list ' .. list .. ' authority is ' .. int(num(authority))
      .. ', not ' .. expect_authority, 'authority=' .. int(num(authority)))
  end
end

local function check_version(r, expect)
  if expect ~= '' and rec_version(r) ~= expect then
    fail(VERSION_MISMATCH, 'entry ' .. hex(rec_id(r)) .. ' has version x' .. hex(rec_version(r))
      .. ', not x' .. hex(expect), 'version=x' .. hex(rec_version(r)))
  end
end

local function check_limit(list, limit, ignore)
  if not ignore and limit and redis.call('ZCARD', list_key(list)) >= tonumber(limit) then
    fail(LIST_FULL, 'list ' .. list .. ' is at its limit of ' .. limit .. ' entries')
  end
end

-- -- locating ------------------------------------------------------------------------

-- The record a locator finds, or nil for a positional miss.  kind: 'i' id (arg; list
-- may be nil), 'h' head (arg: key or '', how: '<' '=' '>'), 't' tail, 'k' key, 's'
-- secondary key.
local function locate(kind, list, arg, how)
  if kind == 'i' then
    local r = redis.call('HGET', E, arg)
    if not r then
      fail(NO_SUCH_ENTRY, 'no entry ' .. hex(arg) .. ' in structure ' .. NAME)
    end
    if list and rec_list(r) ~= list then
      fail(LIST_MISMATCH, 'entry ' .. hex(arg) .. ' is on list ' .. rec_list(r) .. ', not '
        .. list, 'list_number=' .. rec_list(r))
    end
    return r
  end
  local L = list_key(list)
  local found
  if kind == 'h' then
    if arg ~= '' and how == '<' then
      -- The head if its key is <= arg: the first member at or below arg's sublist.
      found = redis.call('ZRANGEBYLEX', L, '-', '[' .. arg .. FF20, 'LIMIT', 0, 1)[1]
    else
      found = redis.call('ZRANGE', L, 0, 0)[1]
      if found and arg ~= '' then
        local c = cmp(string.sub(found, 1, 16), arg)
        if (how == '=' and c ~= 0) or (how == '>' and c < 0) then return nil end
      end
    end
  elseif kind == 't' then
    found = redis.call('ZRANGE', L, -1, -1)[1]
  elseif kind == 'k' then
    if how == '<' then
      found = redis.call('ZREVRANGEBYLEX', L, '[' .. arg .. FF20, '-', 'LIMIT', 0, 1)[1]
    else
      found = redis.call('ZRANGEBYLEX', L, '[' .. arg, '+', 'LIMIT', 0, 1)[1]
      if found and how == '=' and string.sub(found, 1, 16) ~= arg then return nil end
    end
  else
    local p = skey_prefix(list, arg)
    local m = redis.call('ZRANGEBYLEX', S, '[' .. p, '[' .. p .. FF36, 'LIMIT', 0, 1)[1]
    if m then found = string.sub(m, -36) end
  end
  if not found then return nil end
  return redis.call('HGET', E, string.sub(found, 25, 36))
end

-- -- monitors --------------------------------------------------------------------------
-- A monitor record: user id(1) nonempty(1) notify_empty(1) token length(1) token, then
-- 'r' low(16) high(16) for a key range or 's' secondary key.

local touched = {}     -- {list, key, secondary key} of entries that came or went
local monitors = {}    -- list -> its monitors, parsed, in registration order

local function parse_monitor(id, raw)
  local uid, nonempty, notify_empty, tl = string.byte(raw, 1, 4)
  local m = {id = id, uid = uid, nonempty = nonempty == 1, notify_empty = notify_empty == 1,
             token = string.sub(raw, 5, 4 + tl), raw = raw}
  local spec = string.sub(raw, 5 + tl)
  if string.sub(spec, 1, 1) == 'r' then
    m.low, m.high = string.sub(spec, 2, 17), string.sub(spec, 18, 33)
  else
    m.skey = string.sub(spec, 2)
  end
  return m
end

local function monitors_of(list)
  local found = monitors[list]
  if found then return found end
  found = {}
  local flat = redis.call('HGETALL', P .. 'w:' .. list)
  for i = 1, #flat, 2 do
    found[#found + 1] = parse_monitor(tonumber(flat[i]), flat[i + 1])
  end
  table.sort(found, function(a, b) return a.id < b.id end)
  monitors[list] = found
  return found
end

-- Whether the set a monitor watches on a list holds an entry now.
local function watched_nonempty(list, m)
  if m.skey then
    local p = skey_prefix(list, m.skey)
    return #redis.call('ZRANGEBYLEX', S, '[' .. p, '[' .. p .. FF36, 'LIMIT', 0, 1) > 0
  end
  if m.low == LOWEST and m.high == HIGHEST then
    return redis.call('ZCARD', list_key(list)) > 0
  end
  return #redis.call('ZRANGEBYLEX', list_key(list), '[' .. m.low, '[' .. m.high .. FF20,
    'LIMIT', 0, 1) > 0
end

local function monitor_raw(m)
  return string.char(m.uid, m.nonempty and 1 or 0) .. string.sub(m.raw, 3)
end

local function queue_event(uid, text)
  redis.call('XADD', P .. 'q:' .. uid, '*', 'e', text)
end

local function evaluate(m, list, seq)
  local nonempty = watched_nonempty(list, m)
  if nonempty == m.nonempty then return end
  m.nonempty = nonempty
  m.raw = monitor_raw(m)
  redis.call('HSET', P .. 'w:' .. list, m.id, m.raw)
  local state
  local undelivered = P .. 'ud:' .. m.uid
  if nonempty then
    if redis.call('SADD', undelivered, m.id) == 0 then return end
    state = 'n'
  else
    if not m.notify_empty then return end
    redis.call('SREM', undelivered, m.id)
    state = 'e'
  end
  queue_event(m.uid, m.id .. ',' .. list .. ',' .. state .. ',' .. int(seq) .. ',' .. m.token)
end

-- Evaluate the monitors the change just made touched, on its final state: a move within
-- a watched range is no transition at all.  Events carry the change's seq.
local function notify(seq)
  if #touched == 0 then return end
  local seen = {}
  for _, t in ipairs(touched) do
    for _, m in ipairs(monitors_of(t[1])) do
      if not seen[m.id] then
        local hit
        if m.skey then
          hit = m.skey == t[3]
        else
          hit = cmp(m.low, t[2]) <= 0 and cmp(t[2], m.high) <= 0
        end
        if hit then
          seen[m.id] = true
          evaluate(m, t[1], seq)
        end
      end
    end
  end
  touched = {}
end

-- -- placing and removing entries (no checks: callers have checked) ------------------

local function place(r, watched)
  local list, member = rec_list(r), rec_member(r)
  redis.call('ZADD', list_key(list), 0, member)
  local skey = rec_skey(r)
  if skey then redis.call('ZADD', S, 0, skey_prefix(list, skey) .. member) end
  if watched then touched[#touched + 1] = {list, rec_key(r), skey} end
end

local function unplace(r, watched)
  local list, member = rec_list(r), rec_member(r)
  redis.call('ZREM', list_key(list), member)
  local skey = rec_skey(r)
  if skey then redis.call('ZREM', S, skey_prefix(list, skey) .. member) end
  if watched then touched[#touched + 1] = {list, rec_key(r), skey} end
end
