-- release: drop one hold of a reentrant lock (Redisson RLock layout).
--
-- KEYS[1]  lock hash
-- KEYS[2]  unlock channel: redisson_lock__channel:{<lock>}
-- KEYS[3]  request latch of this release: lockgen_latch:{<lock>}:<request id>.
--          It remembers the result, so a resent release never decrements
--          twice (Redisson's unlock latch)
-- ARGV[1]  unlock message published on the last release ("0")
-- ARGV[2]  lease in milliseconds, re-applied while holds remain
-- ARGV[3]  owner token
-- ARGV[4]  publish command: "publish", or "spublish" on a sharded cluster
-- ARGV[5]  latch lifetime in milliseconds
-- ARGV[6]  request id of this release
--
-- Returns
--   nil  ARGV[3] does not hold the lock (expired, deleted, or never taken)
--   0    one hold dropped, the owner still holds the lock
--   1    the last hold dropped: lock deleted, one waiter woken
local seen = redis.call('get', KEYS[3])
if seen == '0:' .. ARGV[6] then
    return 0
end
if seen == '1:' .. ARGV[6] then
    return 1
end
local count = redis.call('hget', KEYS[1], ARGV[3])
if not count then
    return nil
end
count = tonumber(count) - 1
if count > 0 then
    redis.call('hset', KEYS[1], ARGV[3], count)
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[3], '0:' .. ARGV[6], 'px', ARGV[5])
    return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('set', KEYS[3], '1:' .. ARGV[6], 'px', ARGV[5])
return 1
