-- handoff: the last release of a reentrant lock (Redisson RLock layout)
-- that hands the lock straight to a waiter of the releasing client when
-- no one else listens for it.
--
-- A release normally deletes the lock and publishes Redisson's unlock
-- message; a waiter woken by it then sends its own acquire: two round trips
-- from release to the next hold. When the only subscriber of the unlock
-- channel is the releasing client's own (no other process, Go or Java,
-- waits), the lock is instead given, in this same call, to the waiter the
-- client picked: the hash then names the grantee as it would after the
-- grantee's own acquire. Nobody is overtaken: a waiter of another process
-- is subscribed before it sleeps, and then this script publishes as usual.
--
-- KEYS[1]  lock hash
-- KEYS[2]  unlock channel: redisson_lock__channel:{<lock>}
-- KEYS[3]  request marker of the grant (lockgen_latch:{<lock>}:<request id>):
--          the grantee settles a grant whose reply was lost with settle.lua,
--          which marks it "abort"; a copy arriving after that never grants
-- ARGV[1]  releasing owner token (its hold count is 1: the last release)
-- ARGV[2]  publish command: "publish"
-- ARGV[3]  grantee owner token
-- ARGV[4]  grantee lease in milliseconds
--
-- Returns
--   nil  ARGV[1] does not hold the lock (expired, deleted, never taken)
--   1    released: lock deleted and the unlock message published
--   2    handed on: ARGV[3] now holds the lock, with lease ARGV[4]
--        (also the reply to a resent copy whose first copy handed it on)
-- Asked first, so that a server refusing PUBSUB in scripts fails the call
-- before it writes anything.
local listening = redis.call('pubsub', 'numsub', KEYS[2])[2]
if redis.call('hdel', KEYS[1], ARGV[1]) == 0 then
    -- A resend: its first copy gave the lock to the grantee, who cannot
    -- have released it, since it learns of the grant only from the reply.
    if redis.call('hget', KEYS[1], ARGV[3]) == '1' then
        return 2
    end
    return nil
end
-- The owner's field was the hash's only one: HDEL deleted the lock.
if listening <= 1 and redis.call('exists', KEYS[3]) == 0 then
    redis.call('hset', KEYS[1], ARGV[3], 1)
    redis.call('pexpire', KEYS[1], ARGV[4])
    return 2
end
redis.call(ARGV[2], KEYS[2], '0')
return 1
