-- read_release: drop one read hold of a read-write lock.
--
-- Counts as release.lua does: the client sends the owner's read hold count
-- before this release, so a resent copy of a release that already ran does
-- nothing, and nothing is written per request.
--
-- KEYS[1]  lock hash
-- KEYS[2]  channel: redisson_rwlock:{<lock>}
-- KEYS[3]  timeout key of the dropped hold: {<lock>}:<owner>:rwlock_timeout:<count>
-- ARGV[1]  owner token (the read field)
-- ARGV[2]  publish command: "publish" or "spublish"
-- ARGV[3]  the owner's read hold count before this release (>= 1)
--
-- Returns
--   nil  ARGV[1] holds no read hold as counted
--   0    dropped; the lock is still held (by this owner or others)
--   1    dropped the last hold of anyone: lock deleted, one waiter woken
--        (Redisson's unlock message "0", typically a writer)
--
-- Unlike Redisson, the hash's lease is not recomputed from the other
-- readers' timeout keys (they cannot be declared in KEYS): it stays as the
-- holders' renewals set it and runs out one lease after the last live one.
local expected = tonumber(ARGV[3])
local n = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
if n == expected - 1 and n > 0 then
    return 0 -- an earlier copy of this release counted down
end
if n ~= expected then
    return nil
end
if n > 1 then
    redis.call('hset', KEYS[1], ARGV[1], n - 1)
else
    redis.call('hdel', KEYS[1], ARGV[1])
end
redis.call('del', KEYS[3])
if redis.call('hlen', KEYS[1]) > 1 then
    return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[2], KEYS[2], '0')
return 1
