-- What every request function shares (scripts.py puts it first in the library).
--
-- One structure lives under one hash tag, so one function sees and changes all of it
-- atomically; KEYS[1] is the structure's meta hash and every other key is derived from
-- it (same slot, so Redis Cluster routes the call by KEYS[1] alone).  Every function
-- checks everything before its first write, because Redis does not roll one back.
--
-- ARGV[1] of every function is its header: user id(1) connection token(16) retry
-- flag(1, '1' when the client resends a request whose reply it lost), then for a
-- request that changes something its request id: channel(8, the client thread) and
-- number(8).  Request arguments start at ARGV[2], packed where they are many.
--
-- Strings are binary throughout.  Keys are never compared with Lua's < (it uses
-- strcoll): ordering is Redis's lexicographic sorted-set order, or cmp() below.

-- Per-call state: set by begin() at the start of every function.  Redis runs one
-- function at a time, so these shared upvalues belong to the call in progress.
local M, P, E, D, S, K               -- meta hash, key prefix, entries, data, skey index, locks
local KS                             -- the structure's key set (see keyset)
local ARGV, UID, TOKEN, REQ, RETRY  -- REQ: the request number ('': none)
local UNUM                           -- the caller's user id as a number (UID a string)
local CHANNEL                        -- the request's channel (with a request number)
local touched, monitors              -- monitor evaluation (see notify)
local monitors_read = true           -- whether monitors holds any (begin empties it)
local cow                            -- snapshots being read (see keep_old)
local snapping                       -- the meta hash's 'xa' as open() read it (snapshots)
local checking                       -- a new entry's id while its checks run (see fail)
local emptied                        -- a list the call left empty (see watched_nonempty)

-- The library functions used most, bound once (by begin: a library's top level runs
-- without them): an upvalue is read in one step, string.sub in two table lookups.
local ssub, sbyte, schar, band, spack, sunpack

-- redis.call, bound the same way: the functions' global table is an empty one whose
-- metatable finds each global name in the real one, so every global a function reads
-- costs two table lookups and a metamethod, where an upvalue costs one step.  Below this
-- line `redis` is this table: redis.register_function (for the library's last lines,
-- run at load time) now, redis.call once begin has bound it.
local function runtime_redis() return redis end
local redis = {register_function = redis.register_function}

-- Literals, not string.rep: Redis 7.0 runs a library's top level without the string
-- library.
local FF4 = '\255\255\255\255'
local FF20 = FF4 .. FF4 .. FF4 .. FF4 .. FF4
local FF36 = FF20 .. FF4 .. FF4 .. FF4 .. FF4

-- The library's top level is one Lua function, and Lua 5.1 lets a function hold at
-- most 200 local names at once (test_lua_headroom.py keeps at least 40 of them free).
-- So names read only on rare paths share a table (ERR below), and a helper that only
-- the functions defined with it use is local to a do ... end block around them: its
-- name is freed at the block's end, and it is an upvalue of its callers all the same
-- (read as fast as any).

-- The codes of the errors fail() raises: read only on a request's way to failing.
local ERR = {
  NO_SUCH_ENTRY = 1020, ENTRY_EXISTS = 1021, NO_SUCH_STRUCTURE = 1022,
  STRUCTURE_EXISTS = 1023, NO_SUCH_MONITOR = 1024,
  NOT_CONNECTED = 1030, TOO_MANY_USERS = 1031, USER_ACTIVE = 1032,
  NO_SUCH_USER = 1033, USER_NOT_FAILED = 1034,
  STRUCTURE_FULL = 1040, LIST_FULL = 1041, EMC_AREA_FULL = 1042, ALTER_REJECTED = 1043,
  VERSION_MISMATCH = 1050, AUTHORITY_MISMATCH = 1051, LOCK_HELD = 1052,
  LOCK_NOT_HELD = 1053, LIST_MISMATCH = 1054,
  BAD_ARGUMENT = 1008, BAD_STRUCTURE_PARAMS = 1010,
  STRUCTURE_LOST = 1060, CONNECTION_FAILED = 1061, SERVER_UNSUITABLE = 1063,
}

-- A structure's key names (prefix, e, d, s, k, its users' token keys by user id and its
-- lists' keys by list number; its users' event streams and undelivered marks by user
-- id and its lists' monitor hashes by list number, which a take and every change of a
-- watched list name), made on its first call and kept: each string made costs a call
-- some 0.2-0.4 us, and one of a number (a user id, a list) a sprintf more.
-- Bounded: forgotten all at once past KEYSET_LIMIT structures (deleted ones included).
local TOKEN_KEYS, LIST_KEYS          -- the call's structure's token keys, list keys
local NAMES                          -- and the rest by number (see named)

local begin
do
local KEYSETS, keyset_count, KEYSET_LIMIT = {}, 0, 1024

local function keyset(m)
  local ks = KEYSETS[m]
  if ks then return ks end
  if keyset_count >= KEYSET_LIMIT then
    KEYSETS, keyset_count = {}, 0
  end
  local p = ssub(m, 1, -2)
  ks = {p, p .. 'e', p .. 'd', p .. 's', p .. 'k', {}, {}, {}, false, false}  -- see counters
  KEYSETS[m] = ks
  keyset_count = keyset_count + 1
  return ks
end

local function bind()
  ssub, sbyte, schar = string.sub, string.byte, string.char
  band, spack, sunpack = bit.band, struct.pack, struct.unpack
  redis.call = runtime_redis().call
end

-- User ids as strings, made once and kept (as lnum: a number printed is a sprintf).
local UIDS = {}

function begin(keys, args)
  if not ssub then bind() end
  local m = keys[1]
  if m ~= M then  -- the names of the structure the call before named are still bound
    M = m
    local ks = KEYSETS[m] or keyset(m)
    P, E, D, S, K, TOKEN_KEYS, LIST_KEYS = ks[1], ks[2], ks[3], ks[4], ks[5], ks[6], ks[7]
    NAMES, KS = ks[8], ks
  end
  ARGV = args
  local header = args[1]
  -- The header in one C call (each string.sub or byte is one).
  local u, retry
  if #header == 34 then
    u, TOKEN, retry, CHANNEL, REQ = sunpack('>Bc16Bc8c8', header)
  else
    u, TOKEN, retry = sunpack('>Bc16B', header)
    REQ = ''
  end
  UNUM = u
  UID = UIDS[u]
  if not UID then
    UID = tostring(u)
    UIDS[u] = UID
  end
  RETRY = retry == 49
  -- The tables of the call before are reused when it left them empty (nearly always).
  if touched == nil or #touched > 0 then touched = {} end
  if monitors_read then monitors, monitors_read = {}, false end
  cow, snapping, checking, emptied = nil, nil, nil, nil
end
end  -- begin

-- The structure's name, for messages.
local function structure_name()
  return string.match(M, '{(.-)}')
end

local function int(n)
  return string.format('%d', n)
end

-- An error reply the client maps to the same exception as the memory backend raises:
-- "SQ<code> <name=value,...|-> <detail>".  Values are integers, or 'x' and hex digits.
local function err_text(code, detail, ctx)
  return 'SQ' .. code .. ' ' .. (ctx or '-') .. ' ' .. detail
end

local function hex(s)
  return (string.gsub(s, '.', function(c) return string.format('%02x', sbyte(c)) end))
end

local function fail(code, detail, ctx)
  local id = checking
  if id then
    checking = nil
    if redis.call('HEXISTS', E, id) == 1 then
      code, detail, ctx = ERR.ENTRY_EXISTS, 'entry id ' .. hex(id) .. ' is in use', nil
    end
  end
  error({err = err_text(code, detail, ctx)})
end

-- n (an integer below 2^53) as width (at most 8) big-endian bytes.
local function be(n, width)
  if width == 8 then return spack('>I8', n) end
  return ssub(spack('>I8', n), 9 - width)
end

local from_be
do
local BE_FORMATS = {'>I1', '>I2', '>I3', '>I4', '>I5', '>I6', '>I7', '>I8'}
function from_be(s)
  return (sunpack(BE_FORMATS[#s], s))
end
end  -- from_be

-- A list number as 2 bytes (made once per number and kept: every string a function
-- makes costs a call some 0.2 us, hashing included), and back.
local BE2 = {}  -- by number (read as BE2[n] or be2(n) where a call would cost)
local be2
do
function be2(n)
  local s = BE2[n]
  if not s then
    s = schar((n - n % 256) / 256, n % 256)
    BE2[n] = s
  end
  return s
end
end  -- be2

local function from_be2(s, at)
  local a, b = sbyte(s, at, at + 1)
  return a * 256 + b
end

-- -1, 0 or 1 as a is below, equal to or above b, bytewise (equal lengths).
local function cmp(a, b)
  if a == b then return 0 end
  for i = 1, #a do
    local x, y = sbyte(a, i), sbyte(b, i)
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
  if not head then return spack('>BI7', 128, seq) end  -- one string made, not three
  local low = seq - 1
  local high = math.floor(low / 4294967296)
  return '\127' .. spack('>I3I4', 16777215 - high, 4294967295 - (low - high * 4294967296))
end

-- A user's connection token, in a key of its own that expires when the user's lease
-- lapses: a user whose token key is gone has failed (mark_failed deletes it).
local function token_key(uid)
  local k = TOKEN_KEYS[uid]
  if not k then
    k = P .. 't:' .. uid
    TOKEN_KEYS[uid] = k
  end
  return k
end

-- Key names by number (NAMES[i], made by named(i) the first time), so that no string
-- is made to look one up: user u's event stream 'q:<u>' at u, its set of monitors
-- with a nonempty event not yet taken 'ud:<u>' at 256 + u; list n's monitors 'w:<n>'
-- at -1 - n.  (One table and one function: a library's top level holds at most 200
-- local names.)
local function named(i)
  local k
  if i < 0 then
    k = P .. 'w:' .. (-1 - i)
  elseif i >= 256 then
    k = P .. 'ud:' .. (i - 256)
  else
    k = P .. 'q:' .. i
  end
  NAMES[i] = k
  return k
end

-- Entry records: id(12) list(2) key(16) ordinal(8) version(8) elements(1)
-- adjunct length(1) secondary key length(1, 0 = none), adjunct, secondary key, then
-- the data if it is small (at most INLINE bytes).  Larger data is apart, in D under the
-- same id: a request that moves or re-keys an entry then never copies it, since every
-- string a function makes costs time in proportion to its length (about 1.4 us a KiB
-- on Redis 7.0), so such data is read only to be returned, and passed on as it came.
-- Small data costs less inside the record than apart: no second hash field to store,
-- read and delete (a request saved on each of put, get and commit, and some 60 bytes
-- of server memory an entry), for a copy of a few hundred bytes when it moves.
local INLINE = 512
local function rec_id(r) return ssub(r, 1, 12) end
local function rec_list(r)
  local a, b = sbyte(r, 13, 14)
  return a * 256 + b
end
local function rec_key(r) return ssub(r, 15, 30) end
local function rec_version(r) return ssub(r, 39, 46) end
local function rec_elements(r) return sbyte(r, 47) end
-- A list's sorted-set member: key, ordinal, id; so that members sort as the list does.
-- id: the record's, when the caller has it (one string fewer made).  A caller holding
-- the key and ordinal of a record it made joins key .. ord .. id itself.
local function rec_member(r, id) return ssub(r, 15, 38) .. (id or ssub(r, 1, 12)) end

-- The part of a new entry's data its record keeps: all of it when small, else none.
local function inline_part(elements, data)
  if elements > 0 and #data <= INLINE then return data end
  return ''
end

-- Store a new entry's data apart (in D) when its record does not keep it.
local function store_apart(id, elements, data)
  if elements > 0 and #data > INLINE then redis.call('HSET', D, id, data) end
end

-- The record's three length bytes (elements, adjunct, secondary key), made once per
-- value and kept (bounded: forgotten all at once past 4,096).
local lengths
do
local LENGTHS, lengths_count = {}, 0
function lengths(elements, al, sl)
  local n = elements * 65536 + al * 256 + sl
  local s = LENGTHS[n]
  if not s then
    if lengths_count >= 4096 then LENGTHS, lengths_count = {}, 0 end
    s = schar(elements, al, sl)
    LENGTHS[n] = s
    lengths_count = lengths_count + 1
  end
  return s
end
end  -- lengths

-- inline: the data the record keeps (inline_part).
local function make_rec(id, list, key, ord, version, elements, adjunct, skey, inline)
  return id .. (BE2[list] or be2(list)) .. key .. ord .. version
    .. lengths(elements, #adjunct, #skey) .. adjunct .. skey .. (inline or '')
end

local data_apart, rec_data, reply_data
do
-- Where the data kept in record r starts (past its end: none kept there).
local function rec_inline_at(r)
  local al, sl = sbyte(r, 48, 49)
  return 50 + al + sl
end

-- Whether the entry's data is kept apart, in D.
function data_apart(r)
  return rec_elements(r) > 0 and #r < rec_inline_at(r)
end

-- The entry's data ('' for none).
function rec_data(r)
  if rec_elements(r) == 0 then return '' end
  local at = rec_inline_at(r)
  if #r >= at then return ssub(r, at) end
  return redis.call('HGET', D, rec_id(r))
end

-- What a reply carries for the entry's data: false when it is the data the record
-- keeps (the client takes it from the record: codec.entry_of), so that it is neither
-- copied out of the record nor sent twice; else the data ('' for none).
function reply_data(r)
  if rec_elements(r) > 0 and #r >= rec_inline_at(r) then return false end
  return rec_data(r)
end
end  -- data_apart, rec_data, reply_data

-- Delete the entry's data from D, if it is kept there (the entry is going, or its
-- data is now kept in its record or is none).
local function drop_data(r, id)
  if data_apart(r) then redis.call('HDEL', D, id or rec_id(r)) end
end

-- A write's spec (codec.write_spec, write.lua's ARGV[2]): list, key, version, flags (1
-- head, 2 ignore_limit, 4 expect authority: its value at bytes 29-36), elements,
-- adjunct, secondary key, and entry id ('' to generate one).
local function write_spec(spec)
  local l1, l2 = sbyte(spec, 1, 2)
  local flags, elements, _, _, _, _, _, _, _, _, al, sl, il = sbyte(spec, 27, 39)
  local adjunct, skey, id = '', '', ''  -- each cut only when there is one
  if al > 0 then adjunct = ssub(spec, 40, 39 + al) end
  if sl > 0 then skey = ssub(spec, 40 + al, 39 + al + sl) end
  if il > 0 then id = ssub(spec, 40 + al + sl, 39 + al + sl + il) end
  return l1 * 256 + l2, ssub(spec, 3, 18), ssub(spec, 19, 26), flags, elements, adjunct,
    skey, id
end

-- Snapshots, copy on write.  A snapshot (snapshot.lua) copies only the lists' sorted
-- sets; entry records and data stay where they are.  A request about to change or
-- delete an existing entry first keeps its record (and data) for every snapshot still
-- being read, with HSETNX: the value at the snapshot, never a later one.  Snapshots
-- are listed in the set P..'xs'; one whose marker expired is dropped from it here.
-- The meta hash's field 'xa' is there while the set may hold one: open() reads it with
-- the fields it is asked for, so that a request changes entries without a look at
-- snapshots while none is active (nearly always).
local keep_old
do
local function snapshots()
  if cow == nil then
    cow = false
    if snapping == false then return cow end
    local ids = redis.call('SMEMBERS', P .. 'xs')
    if #ids > 0 then
      local live = {}
      for _, id in ipairs(ids) do
        local X = P .. 'x' .. id .. ':'
        local expires = redis.call('HGET', X .. 'i', 'until')
        if expires then
          live[#live + 1] = {X, expires}
        else
          redis.call('SREM', P .. 'xs', id)
        end
      end
      if #live > 0 then cow = live end
    end
    if not cow then redis.call('HDEL', M, 'xa') end
  end
  return cow
end

-- Keep entry r's record, and its data when the change rewrites or deletes it.
function keep_old(r, with_data)
  local live = snapshots()
  if not live then return end
  local id = rec_id(r)
  local data
  with_data = with_data and data_apart(r)  -- else the record holds it, or there is none
  if with_data then data = redis.call('HGET', D, id) or '' end
  for _, s in ipairs(live) do
    if redis.call('HSETNX', s[1] .. 'e', id, r) == 1 then
      redis.call('PEXPIREAT', s[1] .. 'e', s[2])
    end
    if with_data and redis.call('HSETNX', s[1] .. 'd', id, data) == 1 then
      redis.call('PEXPIREAT', s[1] .. 'd', s[2])
    end
  end
end
end  -- keep_old

-- The record with a new list, key, ordinal, version (nil: its own) and secondary key
-- (false: none, true: its own), and the data it keeps, if any.  id: the record's, when
-- the caller has it.  What the record keeps is copied in one piece where it can be.
local function moved_rec(r, list, key, ord, version, skey, id)
  id = id or ssub(r, 1, 12)
  if skey == true then
    local b = BE2[list] or be2(list)
    if version then return id .. b .. key .. ord .. version .. ssub(r, 47) end
    return id .. b .. key .. ord .. ssub(r, 39)
  end
  local al, sl = sbyte(r, 48, 49)
  local sk = skey or ''
  return id .. be2(list) .. key .. ord .. (version or ssub(r, 39, 46))
    .. lengths(sbyte(r, 47), al, #sk) .. ssub(r, 50, 49 + al) .. sk
    .. ssub(r, 50 + al + sl)
end

-- List n's number as a string, and its controls' field in the meta hash ('L<n>'), made
-- once and kept: Lua makes 'L' .. n with sprintf (about 0.2 us), and a number passed
-- to redis.call is printed the same way.
local LFIELDS = {}  -- by number (read as LFIELDS[n] or lfield(n) where a call would cost)
local lnum, lfield
do
local LNUMS = {}

function lnum(n)
  local s = LNUMS[n]
  if not s then
    s = tostring(n)
    LNUMS[n] = s
  end
  return s
end

function lfield(n)
  local s = LFIELDS[n]
  if not s then
    s = 'L' .. n
    LFIELDS[n] = s
  end
  return s
end
end  -- lnum, lfield

local function list_key(n)
  local k = LIST_KEYS[n]
  if not k then
    k = P .. 'l:' .. lnum(n)
    LIST_KEYS[n] = k
  end
  return k
end
local function skey_prefix(list, skey) return be2(list) .. schar(#skey) .. skey end

-- Versions are 8 bytes big-endian; Lua numbers cannot hold all of them.
local function version_plus_one(v, id)
  local b = {sbyte(v, 1, 8)}
  local i = 8
  while i > 0 and b[i] == 255 do
    b[i] = 0
    i = i - 1
  end
  if i == 0 then fail(ERR.BAD_ARGUMENT, 'entry ' .. hex(id) .. ' version cannot increase') end
  b[i] = b[i] + 1
  return schar(unpack(b))
end

-- A version op: '' keeps it, 'i' increments it, 8 bytes set it (options' version).
local function new_version(r, op, saturate)
  if op == '' then return rec_version(r) end
  if op == 'i' then
    if saturate and rec_version(r) == FF4 .. FF4 then return rec_version(r) end
    return version_plus_one(rec_version(r), rec_id(r))
  end
  return op
end

-- The replies of the most frequent requests (write, move, delete), filled in place of a
-- new table each call (a table costs as much as some thirty lines of Lua): Redis turns
-- a function's reply into its own as the function returns, so none outlives its call.
local REPLY2, REPLY3, REPLY4 = {}, {}, {}

-- -- results kept for a resent request -----------------------------------------------

-- The result of a change is kept in the meta hash, field 'q<user>:<channel>' (one per
-- client thread of the user), written by the same HSET as the change's counters: a
-- client resending a request after a lost reply gets it instead of a second change.
-- Value: the request number(8), a kind, then 'N' a seq(8) ('n': in decimal, as kept
-- before), 'c' a seq(8) and an entry record (a change, whose data is in field
-- 'q<user>:<channel>d'), 'i' the same for a
-- change whose data is the data its record keeps (so no copy of it is kept apart),
-- 'e' the same for a change whose reply carries no data (a delete asked for none, or
-- an entry without data), 'a' the same for a move whose data stays apart in D under the
-- entry's id (named, not copied: see named_result), 't' a take_many's takes (see
-- takes_result), 'k' a take's result in MessagePack with its data kept apart named
-- (true in place of the data, see named_data) or in the 'd' field (0 in its place),
-- 'm' anything else in MessagePack.
--
-- Why the functions flagged allow-oom (scripts.py) may keep these even when the server
-- is at maxmemory: the record is bounded.  There are two fields per client thread of a
-- connected user (at most 32 users), each overwritten by that thread's next request
-- rather than added to, and all of a user's go when it disconnects, is cleaned up or
-- reattaches (forget_results).  So a get (a move) at maxmemory keeps at most one
-- message's data per thread (none when it names data kept apart), in place of the one
-- it kept before; it never accumulates.  A take_many that deletes data kept apart
-- keeps each copy in a field 'q<user>:<channel>d<j>' (j up to MAX_TAKE_MANY), each
-- overwritten by the thread's next such batch as long: a thread holds at most its
-- largest batch's data, as when the whole batch was kept in one field.
-- Made once per user and client thread (bounded as the results are: forgotten all at
-- once past 4,096).
local kept_field
do
local KEPT_FIELDS, kept_count = {}, 0
function kept_field()
  local head = CHANNEL
  local users = KEPT_FIELDS[UID]
  if not users then
    users = {}
    KEPT_FIELDS[UID] = users
  end
  local f = users[head]
  if not f then
    if kept_count >= 4096 then
      KEPT_FIELDS, kept_count = {}, 0
      users = {}
      KEPT_FIELDS[UID] = users
    end
    f = 'q' .. UID .. ':' .. head
    users[head] = f
    kept_count = kept_count + 1
  end
  return f
end
end  -- kept_field

-- The records of ids[from..to] (entry ids), in one HMGET per 1,000: found[1] is
-- ids[from]'s, false where there is none.
local function records_of(ids, from, to)
  local found = {}
  for first = from, to, 1000 do
    local last = first + 999
    if last > to then last = to end
    local part = redis.call('HMGET', E, unpack(ids, first, last))
    for i = 1, #part do found[first - from + i] = part[i] end
  end
  return found
end

-- The result a resent request gets (nil: none kept for it, so the request runs).
local recorded
do
-- A move's result whose data stayed apart (kind 'a': seq, record): a get copied no
-- data of 4 KiB into the meta hash for a resend that hardly ever comes.  The data is
-- read again from D, which is sound only while nothing changed the entry since: its
-- record is the one the move left (any later move or write of that id has another
-- ordinal, a later update another version, lengths or adjunct; a delete leaves none),
-- and no update replaced data kept apart after the move ('dg' in the meta hash: the
-- seq of the last such update, anywhere in the structure, since an update may leave
-- the record as it was).  Otherwise the first attempt's data is gone: the resend
-- fails with CONNECTION_FAILED, as it would had the server stayed out of reach (the
-- move was done; what it returned cannot be told), never with other data.
-- ids, records: the named entries and their records as the request left them; seq: the
-- request's first.  Returns their data.
local function named_data(ids, records, seq)
  local now = records_of(ids, 1, #ids)
  local replaced = redis.call('HGET', M, 'dg')
  for i = 1, #ids do
    if now[i] ~= records[i] or (replaced and from_be(replaced) > seq) then
      local why = 'was deleted'
      if now[i] then why = 'changed' end
      fail(ERR.CONNECTION_FAILED, 'the reply to a move of entry ' .. hex(ids[i]) .. ' was lost'
        .. ' and the entry ' .. why .. ' before the move was resent: its data as the move'
        .. ' left it cannot be returned')
    end
  end
  return redis.call('HMGET', D, unpack(ids))
end

local function named_result(body)
  local seq, r = from_be(ssub(body, 1, 8)), ssub(body, 9)
  return {seq, r, named_data({ssub(r, 1, 12)}, {r}, seq)[1]}
end

-- A take_many's result (kind 't'): its first seq(8), whether each take deleted(1),
-- the entries left on the head's list(8), then per take its record's length(2) and
-- the record; as take_many's reply.  The seqs follow one another (one a take, two with
-- its delete), and each take's data is told by its record as reply_data tells it:
-- none, in the record, or apart in D: named, for a take without delete (see
-- named_data), else copied to field 'q<user>:<channel>d<j>' for the j-th such take
-- (written as it came, no Lua string made).  The records are joined by one
-- table.concat: MessagePack of the reply cost some 4,000 instructions a take, and any
-- new Lua string of 4 KiB (a packed or joined copy of the data) some 100,000: Lua
-- pays for what it allocates with garbage-collection steps over its whole heap.
local function takes_result(body)
  local seq, step = from_be(ssub(body, 1, 8)), sbyte(body, 9) + 1
  local left = from_be(ssub(body, 10, 17))
  local reply, n, at = {}, 0, 18
  local ids, records, named = {}, {}, {}
  local copies, copied = {}, {}
  local deleted = 0
  while at <= #body do
    local to = at + 1 + from_be2(body, at)
    local r = ssub(body, at + 2, to)
    at = to + 1
    local elements, al, sl = sbyte(r, 47, 49)
    local data = false
    if elements == 0 then
      data = ''
    elseif #r < 50 + al + sl then
      if step == 2 then
        copies[#copies + 1] = kept_field() .. 'd' .. lnum(#copies + 1)
        copied[#copied + 1] = n + 3
      else
        ids[#ids + 1], records[#records + 1], named[#named + 1] = ssub(r, 1, 12), r, n + 3
      end
    end
    if step == 2 then deleted = seq + 1 end
    reply[n + 1], reply[n + 2], reply[n + 3], reply[n + 4] = seq, r, data, deleted
    n, seq = n + 4, seq + step
  end
  reply[n + 1] = left
  if #ids > 0 then
    for i, data in ipairs(named_data(ids, records, reply[1])) do reply[named[i]] = data end
  end
  if #copies > 0 then
    for j, data in ipairs(redis.call('HMGET', M, unpack(copies))) do reply[copied[j]] = data end
  end
  return reply
end

function recorded()
  if not RETRY or REQ == '' then return nil end
  local prev = redis.call('HGET', M, kept_field())
  if not prev or ssub(prev, 1, 8) ~= REQ then return nil end
  local kind, body = ssub(prev, 9, 9), ssub(prev, 10)
  if kind == 'N' then return from_be(body) end
  if kind == 'n' then return tonumber(body) end  -- as a library before 'N' kept it
  if kind == 'a' then return named_result(body) end
  if kind == 't' then return takes_result(body) end
  if kind == 'k' then  -- a take's result, its data named or beside it (take.lua)
    local t = cmsgpack.unpack(body)
    if t[4] == true then
      t[4] = named_data({ssub(t[3], 1, 12)}, {t[3]}, t[2])[1]
    else
      t[4] = redis.call('HGET', M, kept_field() .. 'd')
    end
    return t
  end
  if kind == 'T' then  -- a take's, no events, its data in its record or none (take.lua)
    local seq, deleted, left = sunpack('>I8BI8', body)
    local r = ssub(body, 18)
    return {{}, seq, r, sbyte(r, 47) == 0 and '' or false, deleted == 1 and seq + 1 or 0,
      0, 0, 0, left}
  end
  if kind == 'c' then
    local data = redis.call('HGET', M, kept_field() .. 'd')
    return {from_be(ssub(body, 1, 8)), ssub(body, 9), data}
  end
  if kind == 'i' then
    return {from_be(ssub(body, 1, 8)), ssub(body, 9), false}
  end
  if kind == 'e' then
    return {from_be(ssub(body, 1, 8)), ssub(body, 9), ''}
  end
  return cmsgpack.unpack(body)
end
end  -- recorded

-- The field and value keeping a result (nothing for a request without an id): the last
-- arguments of the HSET that writes the change's counters.
local function kept(kind, body)
  if REQ == '' then return end
  return kept_field(), REQ .. kind .. body
end

-- (The seq packed here, not by be(): a Lua call is worth some lines.)
local function kept_seq(seq)
  if REQ == '' then return end
  return kept_field(), REQ .. 'N' .. spack('>I8', seq)
end

-- A change's reply is {seq, record, data}; the data is kept in a field of its own,
-- unless the reply leaves it in the record (data false: see reply_data).
local function kept_change(seq, r, data)
  if REQ == '' then return end
  local field = kept_field()
  if data == false then return field, REQ .. 'i' .. spack('>I8', seq) .. r end
  if data == '' then return field, REQ .. 'e' .. spack('>I8', seq) .. r end
  return field, REQ .. 'c' .. spack('>I8', seq) .. r, field .. 'd', data
end

-- A move's result: its data named when it stays apart (kind 'a', see named_result),
-- else as kept_change keeps it.
local function kept_move(seq, r, data)
  if REQ == '' then return end
  if data == false then return kept_field(), REQ .. 'i' .. spack('>I8', seq) .. r end
  if data ~= '' then return kept_field(), REQ .. 'a' .. spack('>I8', seq) .. r end
  return kept_change(seq, r, data)
end

-- Keep a result of another shape, with an HSET of its own.
local function record(result)
  if REQ ~= '' then redis.call('HSET', M, kept('m', cmsgpack.pack(result))) end
  return result
end

-- Forget a user's kept results (it disconnected, was cleaned up or reattached).
local function forget_results(uid)
  local cursor = '0'
  repeat
    local page = redis.call('HSCAN', M, cursor, 'MATCH', 'q' .. uid .. ':*', 'COUNT', 1000)
    cursor = page[1]
    for i = 1, #page[2], 2 do redis.call('HDEL', M, page[2][i]) end
  until cursor == '0'
end

-- -- the caller --------------------------------------------------------------------

local open, open_fields
do
local function not_live()
  local inst = redis.call('HGET', M, 'inst')
  if not inst or inst ~= ssub(TOKEN, 1, 8) then
    fail(ERR.STRUCTURE_LOST, 'structure ' .. structure_name() .. ' was deleted or lost')
  end
  fail(ERR.NOT_CONNECTED, 'user ' .. UID .. ' is not connected to structure '
    .. structure_name())
end

-- Check that the caller's connection is live (its token is current: not replaced, not
-- deleted, not expired with its lease) and return the meta fields asked for, reading
-- the snapshot mark 'xa' with them (see snapshots).
-- At most three fields (no vararg: select and unpack are two C calls more); open_fields
-- takes any number.  Without the mark, no snapshot is being read: cow is false at once
-- (as keep_old's first look would make it).
function open(a, b, c)
  if redis.call('GET', TOKEN_KEYS[UID] or token_key(UID)) ~= TOKEN then not_live() end
  if not a then return end
  local found
  if c then
    found = redis.call('HMGET', M, 'xa', a, b, c)
  elseif b then
    found = redis.call('HMGET', M, 'xa', a, b)
  else
    found = redis.call('HMGET', M, 'xa', a)
  end
  local x = found[1]
  snapping = x
  if x == false then cow = false end
  return found[2], found[3], found[4]
end

function open_fields(...)
  if redis.call('GET', TOKEN_KEYS[UID] or token_key(UID)) ~= TOKEN then not_live() end
  local n = select('#', ...)
  local found = redis.call('HMGET', M, 'xa', ...)
  snapping = found[1]
  if snapping == false then cow = false end
  return unpack(found, 2, n + 1)
end
end  -- open, open_fields

local function num(x) return tonumber(x) or 0 end

-- -- packed fields of the meta hash ----------------------------------------------------
-- A request reads what it needs of the meta hash in one HMGET and writes it back in one
-- HSET, so the figures every change touches are packed into few fields.

-- 'c': seq, entries, elements, maximum entries, maximum elements, EMCs, maximum EMCs.
local SEQ, ENTRIES, ELEMENTS, MAX_ENTRIES, MAX_ELEMENTS, EMCS, MAX_EMCS = 1, 2, 3, 4, 5, 6, 7

-- 'L<n>': list n's elements, monitors, limit + 1 (0: no limit) and authority.  A list
-- whose controls never changed has no field: all zero (NO_CONTROLS).  A controls table
-- also holds, at LIST_BYTES, the bytes it said when taken or last packed, or nil once a
-- request changed its monitors, limit or authority (see packed_controls): every line
-- changing those clears it.
local LIST_ELEMENTS, LIST_MONITORS, LIST_LIMIT, LIST_AUTHORITY = 1, 2, 3, 4
local LIST_BYTES = 5
local NO_CONTROLS

-- Each as a table (counters, controls) and back to its bytes (packed_counters,
-- packed_controls).
local counters, packed_counters, controls, packed_controls
do
local COUNTERS = '>I8I8I8I8I8I8I8'
local CONTROLS = '>I8I8I8I8'
local Z8 = '\0\0\0\0\0\0\0\0'
NO_CONTROLS = Z8 .. Z8 .. Z8 .. Z8

-- struct.unpack of these fields into a new table costs some 4,000 instructions, as
-- much as a hundred lines of Lua: the table a request packed is kept under the bytes
-- it packed to, and the next request that reads those bytes (nearly always the next
-- one) takes that table instead (out of PACKED: no two requests share one).  Every
-- request packs its tables as its last change (nothing changes them after), so a kept
-- table holds exactly what its bytes say.  Bounded: forgotten all at once past 256.
--
-- Nothing enforces "last": a library built by scripts.checking_source() (CHECKS true,
-- for tests) repacks every table it takes and fails the request, before any write,
-- when the table no longer packs to the bytes it was kept under.
local PACKED, packed_count = {}, 0
local CHECKS = false  -- scripts.checking_source() turns it on; one test a cache hit off

local function stale(what)
  error({err = 'ERR sharedq check: the ' .. what .. ' kept under their packed bytes pack to'
    .. ' other bytes now: a request changed them after packing them (see PACKED)'})
end

-- A list's controls go back and forth between a few values as its entries come and go
-- (a queue's elements n, n + 1, n, ...), and struct.pack of four fields costs as much
-- as forty lines: MEMO[b][e] is what bytes b pack to with their elements changed to e,
-- made once.  Sound while a table's LIST_BYTES are what it said before this request
-- changed its elements, and nothing else (a change of anything else clears them).  The
-- checking library packs every table and fails the request when the memo says other
-- bytes.  Bounded: forgotten all at once past 256 bytes.
local MEMO, memo_count = {}, 0

-- The counters are one field per structure: the table last packed is kept in the
-- structure's key set (KS[9] its bytes, KS[10] the table) rather than in PACKED, where
-- each new seq would be a new key.
function counters(raw)
  local ks = KS
  if ks[9] == raw then
    local c = ks[10]
    ks[9] = false
    if CHECKS and spack(COUNTERS, c[1], c[2], c[3], c[4], c[5], c[6], c[7]) ~= raw then
      stale('counters')
    end
    return c
  end
  return {sunpack(COUNTERS, raw)}
end

-- Each keeps its table under the bytes it returns (packed_controls in PACKED, its lines
-- written out: a Lua call costs as much).
function packed_counters(c)
  local s = spack(COUNTERS, c[1], c[2], c[3], c[4], c[5], c[6], c[7])
  local ks = KS
  ks[9], ks[10] = s, c
  return s
end

function controls(raw)
  raw = raw or NO_CONTROLS
  local l = PACKED[raw]
  if l then
    PACKED[raw] = nil
    if CHECKS and spack(CONTROLS, l[1], l[2], l[3], l[4]) ~= raw then stale('list controls') end
    return l  -- its LIST_BYTES are raw: it was kept under them
  end
  l = {sunpack(CONTROLS, raw)}
  l[LIST_BYTES] = raw  -- in place of unpack's fifth result, the position after them
  return l
end

function packed_controls(l)
  local from, s = l[LIST_BYTES], nil
  local memo
  if from then
    memo = MEMO[from]
    if memo then s = memo[l[1]] end
  end
  if not s or CHECKS then
    local packed = spack(CONTROLS, l[1], l[2], l[3], l[4])
    if s and s ~= packed then
      error({err = 'ERR sharedq check: the list controls memo says other bytes than the table'
        .. ' packs to: a request changed their monitors, limit or authority and left their'
        .. ' LIST_BYTES (see MEMO)'})
    end
    s = packed
    if from then
      if not memo then
        if memo_count >= 256 then MEMO, memo_count = {}, 0 end
        memo = {}
        MEMO[from] = memo
        memo_count = memo_count + 1
      end
      memo[l[1]] = s
    end
  end
  l[LIST_BYTES] = s
  if packed_count >= 256 then PACKED, packed_count = {}, 0 end
  PACKED[s] = l
  packed_count = packed_count + 1
  return s
end
end  -- counters, packed_counters, controls, packed_controls

-- The list's limit, or nil for none.
local function limit_of(l)
  if l[LIST_LIMIT] == 0 then return nil end
  return l[LIST_LIMIT] - 1
end

local function list_controls(list)
  return controls(redis.call('HGET', M, lfield(list)))
end

-- Lock-table conditions (ARGV[first_lock..last_lock]), then the authority condition
-- (expect_authority: a number, or nil), in the memory backend's order.
local function check_conditions(first_lock, last_lock, list, expect_authority, authority)
  if first_lock <= last_lock then
    local holders = redis.call('HMGET', K, unpack(ARGV, first_lock, last_lock))
    for _, holder in ipairs(holders) do
      if holder and holder ~= UID then
        fail(ERR.LOCK_HELD, 'lock is held by user ' .. holder, 'holder=' .. holder)
      end
    end
  end
  if expect_authority and authority ~= expect_authority then  -- a number: see controls
    fail(ERR.AUTHORITY_MISMATCH, 'list ' .. list .. ' authority is ' .. int(authority)
      .. ', not ' .. int(expect_authority), 'authority=' .. int(authority))
  end
end

local function check_version(r, expect)
  if expect and rec_version(r) ~= expect then
    fail(ERR.VERSION_MISMATCH, 'entry ' .. hex(rec_id(r)) .. ' has version x'
      .. hex(rec_version(r)) .. ', not x' .. hex(expect), 'version=x' .. hex(rec_version(r)))
  end
end

-- Returns the list's entries when it read them (nil: not read), so that a caller can
-- count on from there instead of asking again.
local function check_limit(list, l, ignore)
  local limit = limit_of(l)
  if ignore or not limit then return nil end
  local n = redis.call('ZCARD', list_key(list))
  if n >= limit then
    fail(ERR.LIST_FULL, 'list ' .. list .. ' is at its limit of ' .. int(limit) .. ' entries')
  end
  return n
end

-- A new entry may be written (write, write_rekey): its id is free, the conditions hold
-- (locks from ARGV[first_lock]; flag 4: the list's authority as the spec expects), its
-- list is below its limit (flag 2 ignores it) and the structure has room.
-- The id's check costs no command of its own when the rest holds: store_new_entry's
-- HSETNX, the request's first write, makes it.  Only when another check fails is the id
-- looked up first (fail() does, while checking is set), so that a request failing twice
-- reports what the memory backend reports (the id first).  Returns the list's entries
-- before the write when the limit check read them (nil: not read).  (The flags tested
-- by arithmetic: bit.band is a C call.)
local function check_new_entry(spec, list, flags, elements, id, c, l, first_lock)
  if id ~= '' then checking = id end
  if flags % 8 >= 4 then
    local expect = sunpack('>I8', spec, 29)
    if #ARGV >= first_lock or expect ~= l[LIST_AUTHORITY] then
      check_conditions(first_lock, #ARGV, list, expect, l[LIST_AUTHORITY])
    end
  elseif #ARGV >= first_lock then
    check_conditions(first_lock, #ARGV, list, nil, nil)
  end
  local n
  local limit = l[LIST_LIMIT] - 1  -- check_limit(list, l, flag 2), written out
  if limit >= 0 and flags % 4 < 2 then
    n = redis.call('ZCARD', LIST_KEYS[list] or list_key(list))
    if n >= limit then
      fail(ERR.LIST_FULL, 'list ' .. list .. ' is at its limit of ' .. int(limit) .. ' entries')
    end
  end
  if c[ENTRIES] >= c[MAX_ENTRIES] then
    fail(ERR.STRUCTURE_FULL, 'structure ' .. structure_name() .. ' has all '
      .. int(c[MAX_ENTRIES]) .. ' entries in use')
  end
  if c[ELEMENTS] + elements > c[MAX_ELEMENTS] then
    fail(ERR.STRUCTURE_FULL, 'structure ' .. structure_name() .. ' has ' .. int(c[ELEMENTS])
      .. ' of ' .. int(c[MAX_ELEMENTS]) .. ' elements in use; ' .. elements
      .. ' more do not fit')
  end
  checking = nil
  return n
end

-- Store a new entry's record, as the request's first write: HSETNX fails the request,
-- with nothing written, when the id is in use (a caller's id, or a generated one that
-- a caller chose earlier).
local function store_new_entry(id, r)
  if redis.call('HSETNX', E, id, r) == 0 then
    fail(ERR.ENTRY_EXISTS, 'entry id ' .. hex(id) .. ' is in use')
  end
end

-- -- locating ------------------------------------------------------------------------

-- A packed locator: kind(1) list(2, 65535 none) comparison(1) argument.
local function locator_list(a)
  local list = from_be2(a, 2)
  if list == 65535 then return nil end
  return list
end

-- The record a packed locator finds: see locate.
local locate_packed
do
-- The record a locator finds, or nil for a positional miss, then its id and, when a
-- list was read to find it, its list member (nil: not read): what the caller would
-- otherwise cut from the record again.  kind: 'i' id (arg; list may be nil), 'h' head
-- (arg: key or '', how: '<' '=' '>'), 't' tail, 'k' key, 's' secondary key.  bound:
-- for a head at most a key (how '<'), '[' .. key .. FF20, the highest member it may be.
local function locate(kind, list, arg, how, bound)
  if kind == 'i' then
    local r = redis.call('HGET', E, arg)
    if not r then
      fail(ERR.NO_SUCH_ENTRY, 'no entry ' .. hex(arg) .. ' in structure ' .. structure_name())
    end
    if list then
      local l1, l2 = sbyte(r, 13, 14)  -- rec_list(r), read inline
      if l1 * 256 + l2 ~= list then
        fail(ERR.LIST_MISMATCH, 'entry ' .. hex(arg) .. ' is on list ' .. rec_list(r)
          .. ', not ' .. list, 'list_number=' .. rec_list(r))
      end
    end
    return r, arg
  end
  local L = LIST_KEYS[list] or list_key(list)
  local found
  if kind == 'h' then
    if bound then
      -- The head if it is at most the bound: the list's first member up to the bound
      -- (one command, no key cut and compared here).
      found = redis.call('ZRANGEBYLEX', L, '-', bound, 'LIMIT', '0', '1')[1]
    else
      found = redis.call('ZRANGE', L, '0', '0')[1]
      if found and arg ~= '' then
        local c = cmp(ssub(found, 1, 16), arg)
        if (how == '<' and c > 0) or (how == '=' and c ~= 0) or (how == '>' and c < 0) then
          return nil
        end
      end
    end
  elseif kind == 't' then
    found = redis.call('ZRANGE', L, '-1', '-1')[1]
  elseif kind == 'k' then
    if how == '<' then
      found = redis.call('ZREVRANGEBYLEX', L, '[' .. arg .. FF20, '-', 'LIMIT', '0', '1')[1]
    else
      found = redis.call('ZRANGEBYLEX', L, '[' .. arg, '+', 'LIMIT', '0', '1')[1]
      if found and how == '=' and ssub(found, 1, 16) ~= arg then return nil end
    end
  else
    local p = skey_prefix(list, arg)
    local m = redis.call('ZRANGEBYLEX', S, '[' .. p, '[' .. p .. FF36, 'LIMIT', '0', '1')[1]
    if m then found = ssub(m, -36) end
  end
  if not found then return nil end
  local id = ssub(found, 25, 36)
  return redis.call('HGET', E, id), id, found
end

-- The kind and comparison bytes as the characters locate() takes (no string made).
local CHARS = {[105] = 'i', [104] = 'h', [116] = 't', [107] = 'k', [115] = 's', [60] = '<',
               [61] = '=', [62] = '>'}

-- Head and tail locators parsed once and kept under their bytes (a queue's get sends
-- the same one every time): no C call, no string cut per request.  Not ids, keys or
-- secondary keys: mostly a new one each time, for which keeping it would cost a table.
-- Bounded: forgotten all at once past 1,024.
local LOCATORS, locators_count = {}, 0

function locate_packed(a)
  local p = LOCATORS[a]
  if p then
    local bound = p[5]
    if bound then  -- a head at most a key (a get's): locate's lines for it
      local list = p[2]
      local found = redis.call('ZRANGEBYLEX', LIST_KEYS[list] or list_key(list), '-', bound,
        'LIMIT', '0', '1')[1]
      if not found then return nil end
      local id = ssub(found, 25, 36)
      return redis.call('HGET', E, id), id, found
    end
    return locate(p[1], p[2], p[3], p[4], bound)
  end
  local kind, l1, l2, how = sbyte(a, 1, 4)
  local list = l1 * 256 + l2
  if list == 65535 then list = nil end
  if kind ~= 104 and kind ~= 116 then
    return locate(CHARS[kind], list, ssub(a, 5), CHARS[how])
  end
  local arg = ssub(a, 5)
  local bound = false
  if kind == 104 and how == 60 and arg ~= '' then bound = '[' .. arg .. FF20 end
  if locators_count >= 1024 then LOCATORS, locators_count = {}, 0 end
  p = {CHARS[kind], list, arg, CHARS[how], bound}
  LOCATORS[a] = p
  locators_count = locators_count + 1
  return locate(p[1], p[2], p[3], p[4], p[5])
end
end  -- locate_packed

-- Options of move, delete and update: flags(2), then the fields the flags announce, in
-- this order: new key(16), version to set(8), expected version(8), expected
-- authority(8), new secondary key (the rest).  codec.py packs them.  Flag 1024 (a
-- delete's): the reply carries no data.
local option_flags, options
do
local NO_OPTIONS = {version = '', head = false, ignore_limit = false,
                    increment_authority = false, without_data = false}

-- The flags' meanings, worked out once per flags value: bit.band is a C call each time.
local OPTION_FLAGS = {}

function option_flags(flags)
  local f = OPTION_FLAGS[flags]
  if not f then
    f = {}
    for i = 0, 10 do f[i + 1] = band(flags, 2 ^ i) ~= 0 end
    OPTION_FLAGS[flags] = f
  end
  return f
end

-- Options with no key, version, expected version or secondary key in them (a get's, a
-- commit's: the same bytes on every call) are parsed once and kept under their bytes,
-- by where they start in the argument (1 or 3): a table each, never changed.  Bounded:
-- forgotten all at once past 1,024.
local PARSED, parsed_count = {{}, false, {}}, 0

-- Others (a put's, with its message's key and version) fill their flags value's table
-- (OPTION_SETS, made once per value with the fields the flags give): every field a
-- message gives is assigned on every call, and a function reads only its own call's
-- options (one options() a call), so one table serves them all.
local OPTION_SETS = {}

-- version: '' keeps the entry's, 'i' increments it, 8 bytes set it (see new_version).
function options(s, at)
  local parsed = PARSED[at]
  if parsed then
    local o = parsed[s]
    if o then return o end
  end
  local a, b = sbyte(s, at, at + 1)
  local flags = a * 256 + b
  local f = OPTION_FLAGS[flags] or option_flags(flags)
  local o
  if f[1] or f[2] or f[4] or f[6] or not parsed then
    o = OPTION_SETS[flags]
    if not o then
      o = {version = f[3] and 'i' or '', head = f[8], ignore_limit = f[9],
           increment_authority = f[10], without_data = f[11]}
      OPTION_SETS[flags] = o
    end
  else
    if flags == 0 then
      o = NO_OPTIONS
    else
      o = {version = f[3] and 'i' or '', head = f[8], ignore_limit = f[9],
           increment_authority = f[10], without_data = f[11]}
    end
    if parsed_count >= 1024 then
      PARSED, parsed_count = {{}, false, {}}, 0
      parsed = PARSED[at]
    end
    parsed[s] = o
    parsed_count = parsed_count + 1
    if flags == 0 then return o end
  end
  at = at + 2
  local key, expect_version, expect_authority, skey = nil, nil, nil, nil
  if f[1] then
    key = ssub(s, at, at + 15)
    at = at + 16
  end
  if f[2] then
    o.version = ssub(s, at, at + 7)
    at = at + 8
  end
  if f[4] then
    expect_version = ssub(s, at, at + 7)
    at = at + 8
  end
  if f[5] then
    expect_authority = (sunpack('>I8', s, at))
    at = at + 8
  end
  if f[6] then
    skey = ssub(s, at)
  elseif f[7] then
    skey = false
  end
  o.key, o.expect_version, o.expect_authority, o.skey = key, expect_version, expect_authority, skey
  return o
end
end  -- option_flags, options

-- -- monitors --------------------------------------------------------------------------
-- A monitor record: user id(1) nonempty(1) notify_empty(1) token length(1) token, then
-- 'r' low(16) high(16) for a key range or 's' secondary key.

-- touched: {list, key, secondary key, true if it came} of entries that came or went in
-- this call;
-- monitors: list -> its monitors, parsed, in registration order.

-- sid: the id as a string, when the caller has it (a hash field it read): a number
-- passed to redis.call or joined to a string is printed with sprintf each time.
local function parse_monitor(id, raw, sid)
  local uid, nonempty, notify_empty, tl = sbyte(raw, 1, 4)
  local m = {id = id, uid = uid, nonempty = nonempty == 1, notify_empty = notify_empty == 1,
             token = ssub(raw, 5, 4 + tl), raw = raw, sid = sid or tostring(id)}
  local spec = ssub(raw, 5 + tl)
  if ssub(spec, 1, 1) == 'r' then
    m.low, m.high = ssub(spec, 2, 17), ssub(spec, 18, 33)
  else
    m.skey = ssub(spec, 2)
  end
  return m
end

-- Whether the set a monitor watches on a list holds an entry now; a monitor's record
-- with its nonempty flag as it is now; and notify (below).
local watched_nonempty, monitor_raw, notify, seen_by_monitors
do
local function monitors_of(list)
  local found = monitors[list]
  if found then return found end
  monitors_read = true
  found = {}
  local flat = redis.call('HGETALL', NAMES[-1 - list] or named(-1 - list))
  for i = 1, #flat, 2 do
    found[#found + 1] = parse_monitor(tonumber(flat[i]), flat[i + 1], flat[i])
  end
  if #found > 1 then table.sort(found, function(a, b) return a.id < b.id end) end
  monitors[list] = found
  return found
end

local LOWEST = '\0\0\0\0' .. '\0\0\0\0' .. '\0\0\0\0' .. '\0\0\0\0'
local HIGHEST = FF4 .. FF4 .. FF4 .. FF4

function watched_nonempty(list, m)
  if list == emptied then return false end  -- the call counted it: no command
  if m.skey then
    local p = skey_prefix(list, m.skey)
    return #redis.call('ZRANGEBYLEX', S, '[' .. p, '[' .. p .. FF36, 'LIMIT', '0', '1') > 0
  end
  if m.low == LOWEST and m.high == HIGHEST then
    return redis.call('ZCARD', list_key(list)) > 0
  end
  return #redis.call('ZRANGEBYLEX', list_key(list), '[' .. m.low, '[' .. m.high .. FF20,
    'LIMIT', '0', '1') > 0
end

function monitor_raw(m)
  return schar(m.uid, m.nonempty and 1 or 0) .. ssub(m.raw, 3)
end

local function queue_event(uid, text)
  redis.call('XADD', NAMES[uid] or named(uid), '*', 'e', text)
end

-- arrived: the call's changes only brought entries into the monitor's set, so the set
-- holds one now, and no command need ask (a set known non-empty stays as it is).
local function evaluate(m, list, seq, arrived)
  local nonempty = arrived
  if nonempty then
    if m.nonempty then return end
  else
    nonempty = watched_nonempty(list, m)
    if nonempty == m.nonempty then return end
  end
  m.nonempty = nonempty
  m.raw = monitor_raw(m)
  local sid = m.sid
  redis.call('HSET', NAMES[-1 - list] or named(-1 - list), sid, m.raw)
  local state
  local uid = m.uid
  local undelivered = NAMES[256 + uid] or named(256 + uid)
  if nonempty then
    if redis.call('SADD', undelivered, sid) == 0 then return end
    state = 'n'
  else
    if not m.notify_empty then return end
    redis.call('SREM', undelivered, sid)
    state = 'e'
  end
  queue_event(uid, sid .. ',' .. lnum(list) .. ',' .. state .. ',' .. int(seq) .. ',' .. m.token)
end

local function hits(m, key, skey)
  if m.skey then return m.skey == skey end
  return cmp(m.low, key) <= 0 and cmp(key, m.high) <= 0
end

-- Evaluate the monitors the change just made touched, on its final state: a move within
-- a watched range is no transition at all.  Events carry the change's seq.  A monitor
-- every touch of which was an arrival (t[4], see place) has a non-empty set now without
-- a command asking; one touched by a departure too is asked (watched_nonempty).  Each
-- is evaluated once, in the order of its first touch.
function notify(seq)
  local n = #touched
  if n == 0 then return end
  if n == 1 then  -- one entry came or went (most calls): each monitor hit once
    local t = touched[1]
    local list, key, skey, arrived = t[1], t[2], t[3], t[4] == true
    for _, m in ipairs(monitors_of(list)) do
      local hit  -- hits(m, key, skey), inline
      if m.skey then
        hit = m.skey == skey
      else
        hit = cmp(m.low, key) <= 0 and cmp(key, m.high) <= 0
      end
      if hit then evaluate(m, list, seq, arrived) end
    end
    touched = {}
    return
  end
  -- hit: monitor -> true while only arrivals touched it; order: monitor, list, ...
  local hit, order = {}, nil
  for _, t in ipairs(touched) do
    for _, m in ipairs(monitors_of(t[1])) do
      if hits(m, t[2], t[3]) then
        local h = hit[m]
        if h == nil then
          if order then
            order[#order + 1], order[#order + 2] = m, t[1]
          else
            order = {m, t[1]}
          end
          hit[m] = t[4] == true
        elseif h and not t[4] then
          hit[m] = false
        end
      end
    end
  end
  if order then
    for i = 1, #order, 2 do
      local m = order[i]
      evaluate(m, order[i + 1], seq, hit[m])
    end
  end
  touched = {}
end

-- Whether a monitor of `list` watches a set that an entry of this key (and secondary
-- key: nil for none) would be in: if none does, the entry coming and going in one call
-- is seen by nobody (write_rekey's written entry).
function seen_by_monitors(list, key, skey)
  for _, m in ipairs(monitors_of(list)) do
    if hits(m, key, skey) then return true end
  end
  return false
end
end  -- watched_nonempty, monitor_raw, notify, seen_by_monitors

-- Events taken (take.lua, events.lua): every event queued for the caller, oldest
-- first, each "monitor,list,state,seq,token"; wake-up markers (mark_failed) dropped.
-- The stream and the caller's undelivered-nonempty marks go with them, in one DEL.
-- An empty stream means no marks to clear: a mark is added only with its event
-- (evaluate), and events go only with their marks (here, release, destroy) or with
-- their own monitor's (unmonitor), so the DEL is left out.  Returns NO_EVENTS (never
-- to be changed) when there were none.
local NO_EVENTS = {}
local function take_own_events()
  local queue = NAMES[UNUM] or named(UNUM)
  local items = redis.call('XRANGE', queue, '-', '+')
  if #items == 0 then return NO_EVENTS end
  local events = {}
  for _, item in ipairs(items) do
    local fields = item[2]
    if fields[1] == 'e' then events[#events + 1] = fields[2] end
  end
  redis.call('DEL', queue, NAMES[256 + UNUM] or named(256 + UNUM))
  return events
end

-- -- placing and removing entries (no checks: callers have checked) ------------------

-- member: the record's list member, when the caller has it.
-- (The record's list and secondary key read inline: a Lua call costs as much as
-- several lines.)
local function place(r, watched, member)
  local l1, l2 = sbyte(r, 13, 14)
  local list = l1 * 256 + l2
  member = member or rec_member(r)
  redis.call('ZADD', LIST_KEYS[list] or list_key(list), '0', member)
  local al, sl = sbyte(r, 48, 49)
  local skey
  if sl > 0 then
    skey = ssub(r, 50 + al, 49 + al + sl)
    redis.call('ZADD', S, '0', skey_prefix(list, skey) .. member)
  end
  if watched then touched[#touched + 1] = {list, rec_key(r), skey, true} end
end

-- One command for many members or fields: cmd key args... in chunks of at
-- most 1,000 arguments (Lua's unpack has a bounded stack).  step: the arguments that go
-- together (2 for field and value), so that a chunk never splits them.
local function call_many(cmd, key, args, step)
  local n = #args
  if n == 0 then return end
  local size = 1000 - 1000 % step
  for first = 1, n, size do
    local last = first + size - 1
    if last > n then last = n end
    -- Each command named as it is (test_acl.py lists the commands functions run).
    if cmd == 'ZREM' then
      redis.call('ZREM', key, unpack(args, first, last))
    elseif cmd == 'ZADD' then
      redis.call('ZADD', key, unpack(args, first, last))
    elseif cmd == 'HSET' then
      redis.call('HSET', key, unpack(args, first, last))
    else
      redis.call('HDEL', key, unpack(args, first, last))
    end
  end
end

local function unplace(r, watched, member)
  local l1, l2 = sbyte(r, 13, 14)
  local list = l1 * 256 + l2
  member = member or rec_member(r)
  redis.call('ZREM', LIST_KEYS[list] or list_key(list), member)
  local al, sl = sbyte(r, 48, 49)
  local skey
  if sl > 0 then
    skey = ssub(r, 50 + al, 49 + al + sl)
    redis.call('ZREM', S, skey_prefix(list, skey) .. member)
  end
  if watched then touched[#touched + 1] = {list, rec_key(r), skey} end
end

-- -- taking an entry (take.lua, take_many.lua; callers have checked) ------------------

-- Move r to list `to` and, if `delete`, delete it there at once: two changes, two
-- seqs, and a watched target sees the entry come and go as with two requests.  The
-- counters and both lists' element counts are updated in place (`source` may be
-- `target`).  id, member: r's id and list member, when the caller has them.  Returns
-- the move's seq, the moved record, the reply's data and the delete's seq (0: none).
local function take_entry(r, to, delete, c, source, target, id, member)
  local seq = c[SEQ] + 1
  id = id or ssub(r, 1, 12)
  member = member or rec_member(r, id)
  local key, ord = ssub(r, 15, 30), ordinal(seq, false)
  local moved = moved_rec(r, to, key, ord, nil, true, id)
  local data = reply_data(r)  -- moved keeps what r kept
  local elements = rec_elements(r)
  local watched_from, watched_to = source[LIST_MONITORS] > 0, target[LIST_MONITORS] > 0
  source[LIST_ELEMENTS] = source[LIST_ELEMENTS] - elements
  if not delete then
    if cow ~= false then keep_old(r, false) end
    unplace(r, watched_from, member)
    redis.call('HSET', E, id, moved)
    place(moved, watched_to, key .. ord .. id)
    target[LIST_ELEMENTS] = target[LIST_ELEMENTS] + elements
    c[SEQ] = seq
    if #touched > 0 then notify(seq) end
    return seq, moved, data, 0
  end
  if cow ~= false then keep_old(r, true) end
  unplace(r, watched_from, member)
  if watched_to then
    local member = key .. ord .. id
    place(moved, true, member)
    notify(seq)
    unplace(moved, true, member)
    notify(seq + 1)
  else
    if #touched > 0 then notify(seq) end
  end
  redis.call('HDEL', E, id)
  drop_data(r, id)
  c[SEQ], c[ENTRIES], c[ELEMENTS] = seq + 1, c[ENTRIES] - 1, c[ELEMENTS] - elements
  return seq, moved, data, seq + 1
end
