-- multi_release: drop one hold of each of several reentrant locks in one
-- call, with release.lua's semantics per member: the last hold deletes the
-- lock and wakes one waiter on its channel, and a resent copy of a release
-- that already ran does nothing.
--
-- KEYS     for each member i: KEYS[2i-1] lock hash, KEYS[2i] its unlock
--          channel
-- ARGV[1]  lease in milliseconds, re-applied where holds remain
-- ARGV[2]  owner token
-- ARGV[3]  publish command: "publish" or "spublish"
-- ARGV[3+i] the owner's hold count of member i before this release (>= 1)
-- ARGV[3+m+i] member i's lease, re-applied where its holds remain (m
--          members; absent: ARGV[1])
--
-- Returns an array with one integer per member: -1 not held by ARGV[2] as
-- counted, 0 one hold dropped, 1 the last hold dropped
local out = {}
local m = #KEYS / 2
for i = 1, m do
    local lock, channel = KEYS[2 * i - 1], KEYS[2 * i]
    local expected = tonumber(ARGV[3 + i])
    local n = tonumber(redis.call('hget', lock, ARGV[2]))
    if n == expected - 1 and n > 0 then
        out[i] = 0 -- an earlier copy of this release counted down
    elseif n ~= expected then
        out[i] = -1
    elseif n > 1 then
        redis.call('hset', lock, ARGV[2], n - 1)
        redis.call('pexpire', lock, ARGV[3 + m + i] or ARGV[1])
        out[i] = 0
    else
        redis.call('hdel', lock, ARGV[2])
        redis.pcall(ARGV[3], channel, '0')
        out[i] = 1
    end
end
return out
