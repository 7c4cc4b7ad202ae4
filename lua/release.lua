-- release: drop one hold of a reentrant lock (Redisson RLock layout).
--
-- The client sends the hold count its owner has before this release (its
-- acquire and release calls on one lock run one at a time), so a resent
-- copy of a release that already ran finds the count one lower and does
-- nothing: a release never counts down twice, and nothing is written per
-- request.
--
-- KEYS[1]  lock hash
-- KEYS[2]  unlock channel: redisson_lock__channel:{<lock>}
-- ARGV[1]  lease in milliseconds, re-applied while holds remain
-- ARGV[2]  owner token
-- ARGV[3]  publish command: "publish", or "spublish" on a sharded cluster
-- ARGV[4]  the owner's hold count before this release (>= 1)
--
-- Returns
--   nil  ARGV[2] does not hold the lock as counted (expired, deleted, never
--        taken, or a resend of a last release that already ran)
--   0    one hold dropped, the owner still holds the lock
--   1    the last hold dropped: lock deleted, one waiter woken
local expected = tonumber(ARGV[4])
if expected == 1 then
    if redis.call('hdel', KEYS[1], ARGV[2]) == 0 then
        return nil
    end
    -- The owner's field was the hash's only one: HDEL deleted the lock.
    -- "0" is Redisson's unlock message: it wakes one waiter.
    redis.pcall(ARGV[3], KEYS[2], '0')
    return 1
end
local n = tonumber(redis.call('hget', KEYS[1], ARGV[2]))
if n == expected then
    redis.call('hset', KEYS[1], ARGV[2], n - 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 0
end
if n == expected - 1 then
    return 0 -- an earlier copy of this release counted down
end
return nil
