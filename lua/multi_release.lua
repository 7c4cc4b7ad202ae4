-- multi_release: drop one hold of each of several reentrant locks in one
-- call, with release.lua's semantics per member: the last hold deletes the
-- lock and wakes one waiter on its channel.
--
-- KEYS     for each member i: KEYS[3i-2] lock hash, KEYS[3i-1] its unlock
--          channel, KEYS[3i] this release's request latch on it (see settle.lua)
-- ARGV[1]  unlock message ("0")
-- ARGV[2]  lease in milliseconds, re-applied where holds remain
-- ARGV[3]  owner token
-- ARGV[4]  publish command: "publish" or "spublish"
-- ARGV[5]  latch lifetime in milliseconds
-- ARGV[6]  request id of this release
--
-- Returns an array with one integer per member: -1 not held by ARGV[3],
-- 0 one hold dropped, 1 the last hold dropped (a resend returns the same)
local out = {}
for i = 1, #KEYS / 3 do
    local lock, channel, latch = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
    local seen = redis.call('get', latch)
    local count = redis.call('hget', lock, ARGV[3])
    if seen == '0:' .. ARGV[6] then
        out[i] = 0
    elseif seen == '1:' .. ARGV[6] then
        out[i] = 1
    elseif not count then
        out[i] = -1
    elseif tonumber(count) > 1 then
        redis.call('hset', lock, ARGV[3], tonumber(count) - 1)
        redis.call('pexpire', lock, ARGV[2])
        redis.call('set', latch, '0:' .. ARGV[6], 'px', ARGV[5])
        out[i] = 0
    else
        redis.call('del', lock)
        redis.call(ARGV[4], channel, ARGV[1])
        redis.call('set', latch, '1:' .. ARGV[6], 'px', ARGV[5])
        out[i] = 1
    end
end
return out
