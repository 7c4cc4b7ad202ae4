-- write_release: drop one write hold of a read-write lock.
--
-- KEYS[1]  lock hash
-- KEYS[2]  channel: redisson_rwlock:{<lock>}
-- KEYS[3]  request latch of this release (see release.lua)
-- ARGV[1]  read-unlock message ("1": wakes every waiting reader)
-- ARGV[2]  lease in milliseconds, re-applied while write holds remain
-- ARGV[3]  "<owner>:write"
-- ARGV[4]  publish command: "publish" or "spublish"
-- ARGV[5]  latch lifetime in milliseconds
-- ARGV[6]  request id of this release
--
-- Returns
--   nil  ARGV[3] does not hold the write lock
--   0    one write hold dropped, the owner still writes
--   1    the last write hold dropped: the lock is deleted, or left in read
--        mode when the owner still holds read holds (downgrade); waiting
--        readers are woken either way
local seen = redis.call('get', KEYS[3])
if seen == '0:' .. ARGV[6] then
    return 0
end
if seen == '1:' .. ARGV[6] then
    return 1
end
if redis.call('hget', KEYS[1], 'mode') ~= 'write' or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local count = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if count > 0 then
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[2]) then
        redis.call('pexpire', KEYS[1], ARGV[2])
    end
    redis.call('set', KEYS[3], '0:' .. ARGV[6], 'px', ARGV[5])
    return 0
end
redis.call('hdel', KEYS[1], ARGV[3])
if redis.call('hlen', KEYS[1]) == 1 then
    redis.call('del', KEYS[1])
else
    redis.call('hset', KEYS[1], 'mode', 'read')
end
redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('set', KEYS[3], '1:' .. ARGV[6], 'px', ARGV[5])
return 1
