-- read_release: drop one read hold of a read-write lock.
--
-- KEYS[1]  lock hash
-- KEYS[2]  channel: redisson_rwlock:{<lock>}
-- KEYS[3]  timeout key of the dropped hold: {<lock>}:<owner>:rwlock_timeout:<count>
-- KEYS[4]  request latch of this release (see release.lua)
-- ARGV[1]  unlock message ("0": wakes one waiter, typically a writer)
-- ARGV[2]  owner token (the read field)
-- ARGV[3]  publish command: "publish" or "spublish"
-- ARGV[4]  latch lifetime in milliseconds
-- ARGV[5]  request id of this release
--
-- Returns
--   nil  ARGV[2] holds no read hold
--   0    dropped; the lock is still held (by this owner or others)
--   1    dropped the last hold of anyone: lock deleted, one waiter woken
--
-- Unlike Redisson, the hash's lease is not recomputed from the other
-- readers' timeout keys (they cannot be declared in KEYS): it stays as the
-- holders' renewals set it and runs out one lease after the last live one.
local seen = redis.call('get', KEYS[4])
if seen == '0:' .. ARGV[5] then
    return 0
end
if seen == '1:' .. ARGV[5] then
    return 1
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return nil
end
local count = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if count <= 0 then
    redis.call('hdel', KEYS[1], ARGV[2])
end
redis.call('del', KEYS[3])
if redis.call('hlen', KEYS[1]) > 1 then
    redis.call('set', KEYS[4], '0:' .. ARGV[5], 'px', ARGV[4])
    return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], KEYS[2], ARGV[1])
redis.call('set', KEYS[4], '1:' .. ARGV[5], 'px', ARGV[4])
return 1
