-- multi_release: drop one hold of each of several reentrant locks in one
-- call, with release.lua's semantics per member: the last hold deletes the
-- lock and wakes one waiter on its channel.
--
-- KEYS     for each member i: KEYS[4i-3] lock hash, KEYS[4i-2] its unlock
--          channel, KEYS[4i-1] the unlock latch of this request on it,
--          KEYS[4i] the owner's acquire latch on it
-- ARGV[1]  unlock message ("0")
-- ARGV[2]  lease in milliseconds, re-applied where holds remain
-- ARGV[3]  owner token
-- ARGV[4]  publish command: "publish" or "spublish"
-- ARGV[5]  latch lifetime in milliseconds
--
-- Returns an array with one integer per member: -1 not held by ARGV[3],
-- 0 one hold dropped, 1 the last hold dropped (a resend returns the same)
local out = {}
for i = 1, #KEYS / 4 do
    local lock, channel, latch, acquired = KEYS[4 * i - 3], KEYS[4 * i - 2], KEYS[4 * i - 1], KEYS[4 * i]
    local done = redis.call('get', latch)
    if done then
        out[i] = tonumber(done)
    elseif redis.call('hexists', lock, ARGV[3]) == 0 then
        out[i] = -1
        redis.call('set', latch, -1, 'px', ARGV[5])
    elseif redis.call('hincrby', lock, ARGV[3], -1) > 0 then
        redis.call('pexpire', lock, ARGV[2])
        redis.call('set', latch, 0, 'px', ARGV[5])
        out[i] = 0
    else
        redis.call('del', lock, acquired)
        redis.call(ARGV[4], channel, ARGV[1])
        redis.call('set', latch, 1, 'px', ARGV[5])
        out[i] = 1
    end
end
return out
