#!lua
-- include: common, bulk
-- move_entries: move entries by id, in order, each with its own seq, tail position.
-- ARGV[6..]: ignore_limit ('1'), missing_ok ('1'), lock count n, n lock numbers, then
-- one packed move each: id(12) to(2) from(2, 65535 none) flags(1) [new key(16)]
-- [version(8)] [secondary key]; flags: 1 new key, 2 set version, 4 increment version,
-- 8 set secondary key, 16 remove secondary key.
local done = recorded()
if done then return done end
local ignore, missing_ok, nlocks = ARGV[6] == '1', ARGV[7] == '1', tonumber(ARGV[8])
local v = open('seq')
check_conditions(9, 8 + nlocks, 0, '', false)
local seq = tonumber(v[1])
for i = 9 + nlocks, #ARGV do
  local a = ARGV[i]
  local id, to, from = string.sub(a, 1, 12), from_be(string.sub(a, 13, 14)),
    from_be(string.sub(a, 15, 16))
  local flags, at = string.byte(a, 17), 18
  local r = redis.call('HGET', E, id)
  if not r then
    if not missing_ok then
      return bulk_finish(seq, nil, nil, err_text(NO_SUCH_ENTRY, 'no entry ' .. hex(id)))
    end
    bulk.missing[#bulk.missing + 1] = id
  else
    local cur = rec_list(r)
    if from ~= 65535 and cur ~= from then
      return bulk_finish(seq, nil, nil, err_text(LIST_MISMATCH, 'entry ' .. hex(id)
        .. ' is on list ' .. cur .. ', not ' .. from))
    end
    local source, target = bulk_list(cur), bulk_list(to)
    if to ~= cur and not ignore and target.limit
      and redis.call('ZCARD', list_key(to)) >= tonumber(target.limit) then
      return bulk_finish(seq, nil, nil, err_text(LIST_FULL, 'list ' .. to
        .. ' is at its limit of ' .. target.limit .. ' entries'))
    end
    local key = rec_key(r)
    if bit.band(flags, 1) ~= 0 then
      key = string.sub(a, at, at + 15)
      at = at + 16
    end
    local op = ''
    if bit.band(flags, 2) ~= 0 then
      op = 's' .. string.sub(a, at, at + 7)
      at = at + 8
    elseif bit.band(flags, 4) ~= 0 then
      op = 'i'
    end
    local skey = rec_skey(r)
    if bit.band(flags, 8) ~= 0 then
      skey = string.sub(a, at)
    elseif bit.band(flags, 16) ~= 0 then
      skey = false
    end
    seq = seq + 1
    local moved = moved_rec(r, to, key, ordinal(seq, false), new_version(r, op, true), skey)
    unplace(r, source.watched)
    redis.call('HSET', E, id, moved)
    place(moved, target.watched)
    local elements = rec_elements(r)
    source.elements, source.changed = source.elements - elements, true
    target.elements, target.changed = target.elements + elements, true
    notify(seq)
    bulk.seqs[#bulk.seqs + 1] = seq
  end
  bulk.processed = bulk.processed + 1
end
return bulk_finish(seq)
